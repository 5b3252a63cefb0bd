#include "kareus/report/partition_gantt.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <tuple>

namespace kareus::report {

std::optional<workload::Knob> most_used_knob(const plan::Plan& plan, std::string_view key) {
  std::map<std::tuple<std::string, int, double>, long> uses;  // (slot, sms, clock) -> instructions
  std::map<std::pair<std::string, int>, long> knob_uses;
  for (const auto& stage : plan.stages) {
    for (const plan::PlannedInstruction& ins : stage) {
      const plan::InstructionKnobs knobs = plan::instruction_knobs(*ins.knob, "knob", "plan");
      for (const auto* list : {&knobs.partitions, &knobs.recompute}) {
        for (const plan::PartitionKnob& k : *list) {
          if (k.key != key) continue;
          ++uses[{k.slot, k.sms, ins.freq_mhz}];
          ++knob_uses[{k.slot, k.sms}];
        }
      }
    }
  }
  if (knob_uses.empty()) return std::nullopt;
  const auto knob = std::max_element(knob_uses.begin(), knob_uses.end(),
                                     [](const auto& a, const auto& b) { return a.second < b.second; })->first;
  double clock = 0;
  long best = -1;
  for (const auto& [use, n] : uses) {
    if (std::get<0>(use) == knob.first && std::get<1>(use) == knob.second && n > best) best = n, clock = std::get<2>(use);
  }
  return workload::Knob{clock, knob.second, knob.first};
}

std::string partition_gantt_svg(const workload::Partition& partition, const workload::Knob& knob,
                                const evaluate::Timeline& timeline) {
  const double width = 900, left = 190, row = 34, top = 10;
  const double total = timeline.time_s > 0 ? timeline.time_s : 1;
  auto x_of = [&](double t) { return left + width * t / total; };
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {0} {1}\" width=\"100%\" style=\"max-width:{0}px\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n",
      left + width + 20, top + 2 * row + 40);
  svg += fmt::format("<text x=\"4\" y=\"{:.1f}\">this nanobatch's compute</text>\n", top + 20);
  svg += fmt::format("<text x=\"4\" y=\"{:.1f}\">other nanobatch's {}</text>\n", top + row + 20,
                     partition.collective ? partition.collective->name : std::string("(no collective)"));
  // Consecutive phases of one op are one box.
  std::size_t i = 0;
  const auto& phases = timeline.phases;
  const char* fills[] = {"#4477aa", "#66ccee", "#228833", "#ccbb44", "#ee6677", "#aa3377"};
  while (i < phases.size()) {
    std::size_t j = i;
    while (j + 1 < phases.size() && phases[j + 1].op == phases[i].op) ++j;
    if (phases[i].op >= 0) {
      const auto& op = partition.ops[static_cast<std::size_t>(phases[i].op)];
      const double x = x_of(phases[i].start_s), w = std::max(1.0, x_of(phases[j].end_s) - x);
      svg += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{}\" fill=\"{}\" stroke=\"white\">"
                         "<title>{}: {:.3f}-{:.3f} ms</title></rect>\n",
                         x, top, w, row - 8, fills[static_cast<std::size_t>(phases[i].op) % 6], op.name,
                         phases[i].start_s * 1e3, phases[j].end_s * 1e3);
      if (w > 8.0 * static_cast<double>(op.name.size())) {
        svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" fill=\"white\">{}</text>\n", x + 3, top + 17, op.name);
      }
    }
    i = j + 1;
  }
  if (partition.collective && timeline.collective_end_s > timeline.collective_start_s) {
    double moving_from = timeline.collective_end_s;
    for (const auto& ph : phases) {
      if (ph.collective && ph.link_bytes_per_s > 0) {
        moving_from = ph.start_s;
        break;
      }
    }
    svg += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{}\" fill=\"#bbbbbb\">"
                       "<title>launch and ring latency</title></rect>\n",
                       x_of(timeline.collective_start_s), top + row, std::max(1.0, x_of(moving_from) - x_of(timeline.collective_start_s)),
                       row - 8);
    svg += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{}\" fill=\"#333333\">"
                       "<title>moving: {:.3f}-{:.3f} ms</title></rect>\n",
                       x_of(moving_from), top + row, std::max(1.0, x_of(timeline.collective_end_s) - x_of(moving_from)),
                       row - 8, moving_from * 1e3, timeline.collective_end_s * 1e3);
  }
  svg += fmt::format(
      "<text x=\"{}\" y=\"{:.1f}\">0</text><text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{:.3f} ms at {:.0f} MHz; "
      "{}</text>\n",
      left, top + 2 * row + 18, left + width, top + 2 * row + 18, total * 1e3, knob.freq_mhz,
      knob.sequential() ? std::string("sequential: the collective after the compute, the segment un-split")
                        : fmt::format("the collective on {} SMs, launched before {} (grey: launching)", knob.sms, knob.slot));
  return svg + "</svg>\n";
}

}  // namespace kareus::report
