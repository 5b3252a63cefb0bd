#include "kareus/sim/trace.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "kareus/schedule/schedule.hpp"

namespace kareus::sim {
namespace {

constexpr double kMicroseconds = 1e6;

// chrome://tracing's reserved colour names, from the coolest (lowest clock) to the hottest.
constexpr std::array<const char*, 6> kClockColours = {"good", "olive", "yellow", "rail_load", "bad", "terrible"};

std::string instruction_label(const plan::PlannedInstruction& i, int virtual_stages) {
  std::string kind = i.type == schedule::InstructionType::kForward ? "F"
                     : i.part == schedule::BackwardPart::kWeightGradient ? "W"
                                                                          : "B";
  std::string label = fmt::format("{}{}", kind, i.microbatch);
  if (virtual_stages > 1) label += fmt::format(".{}", i.chunk);
  return label;
}

}  // namespace

nlohmann::json chrome_trace(const plan::Plan& plan, const SimulationResult& result) {
  double low = 1e300, high = 0;
  for (const auto& stage : plan.stages) {
    for (const auto& i : stage) {
      low = std::min(low, i.freq_mhz);
      high = std::max(high, i.freq_mhz);
    }
  }
  auto colour = [&](double freq_mhz) {
    if (high <= low) return kClockColours.back();
    const auto bucket = static_cast<std::size_t>((freq_mhz - low) / (high - low) * (kClockColours.size() - 1) + 0.5);
    return kClockColours[std::min(bucket, kClockColours.size() - 1)];
  };

  nlohmann::json events = nlohmann::json::array();
  for (int s = 0; s < plan.num_stages; ++s) {
    events.push_back({{"ph", "M"}, {"pid", s}, {"name", "process_name"}, {"args", {{"name", fmt::format("GPU {} (stage {})", s, s)}}}});
    events.push_back({{"ph", "M"}, {"pid", s}, {"name", "process_sort_index"}, {"args", {{"sort_index", s}}}});
    events.push_back({{"ph", "M"}, {"pid", s}, {"tid", 0}, {"name", "thread_name"}, {"args", {{"name", "instructions"}}}});
    events.push_back({{"ph", "M"}, {"pid", s}, {"tid", 1}, {"name", "thread_name"}, {"args", {{"name", "P2P sends"}}}});
  }
  // Instructions, and per GPU the power it draws: the instruction's average while it runs,
  // P_blocking in between.
  std::vector<std::vector<std::pair<double, double>>> power(static_cast<std::size_t>(plan.num_stages));
  for (const SimulatedInstruction& r : result.instructions) {
    const plan::PlannedInstruction& i = plan.stages[static_cast<std::size_t>(r.stage)][r.position];
    nlohmann::json args = {{"instruction", instruction_label(i, plan.virtual_stages)},
                           {"freq_mhz", i.freq_mhz},
                           {"planned_time_s", i.time_s},
                           {"time_s", r.end_s - r.start_s},
                           {"energy_j", r.energy_j}};
    if (r.old_clock_s > 0) {
      args["ran_at_previous_clock_s"] = r.old_clock_s;
      args["previous_freq_mhz"] = r.old_freq_mhz;
    }
    events.push_back({{"ph", "X"},
                      {"pid", r.stage},
                      {"tid", 0},
                      {"name", fmt::format("{:.0f} MHz", i.freq_mhz)},
                      {"cat", instruction_label(i, 1).substr(0, 1)},
                      {"ts", r.start_s * kMicroseconds},
                      {"dur", (r.end_s - r.start_s) * kMicroseconds},
                      {"cname", colour(i.freq_mhz)},
                      {"args", std::move(args)}});
    const double duration_s = r.end_s - r.start_s;
    power[static_cast<std::size_t>(r.stage)].emplace_back(r.start_s, duration_s > 0 ? r.energy_j / duration_s : 0);
    power[static_cast<std::size_t>(r.stage)].emplace_back(r.end_s, -1);  // back to idle unless the next starts
  }
  for (int s = 0; s < plan.num_stages; ++s) {
    auto& samples = power[static_cast<std::size_t>(s)];
    std::stable_sort(samples.begin(), samples.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    events.push_back({{"ph", "C"}, {"pid", s}, {"name", "power_w"}, {"ts", 0}, {"args", {{"power_w", result.p_blocking_w}}}});
    for (std::size_t k = 0; k < samples.size(); ++k) {
      // An end and the next start at the same instant: only the start's power is drawn.
      if (samples[k].second < 0 && k + 1 < samples.size() && samples[k + 1].first == samples[k].first) continue;
      const double w = samples[k].second < 0 ? result.p_blocking_w : samples[k].second;
      events.push_back({{"ph", "C"}, {"pid", s}, {"name", "power_w"}, {"ts", samples[k].first * kMicroseconds}, {"args", {{"power_w", w}}}});
    }
  }
  for (const SimulatedTransfer& t : result.transfers) {
    events.push_back({{"ph", "X"},
                      {"pid", t.from_stage},
                      {"tid", 1},
                      {"name", fmt::format("to stage {}", t.to_stage)},
                      {"cat", "p2p"},
                      {"ts", t.start_s * kMicroseconds},
                      {"dur", (t.end_s - t.start_s) * kMicroseconds},
                      {"args", {{"bytes", t.bytes}}}});
  }
  return {{"traceEvents", std::move(events)},
          {"displayTimeUnit", "ms"},
          {"otherData",
           {{"planned_time_s", result.planned_time_s},
            {"planned_energy_j", result.planned_energy_j},
            {"time_s", result.time_s},
            {"energy_j", result.energy_j},
            {"energy_scope", plan.energy_scope}}}};
}

}  // namespace kareus::sim
