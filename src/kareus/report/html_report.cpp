#include "kareus/report/html_report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "kareus/pipeline/dag.hpp"

namespace kareus::report {
namespace {

std::string escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

}  // namespace

std::string clock_timeline_svg(const plan::Plan& plan) {
  // Start times from the plan's own dependency DAG and option times.
  auto schedule =
      pipeline::PipelineSchedule::make(plan.schedule, plan.num_stages, plan.num_microbatches, plan.virtual_stages);
  pipeline::InstructionDag dag(schedule);
  std::vector<double> durations;
  std::vector<double> clocks;
  for (const auto& stage : plan.stages) {
    for (const auto& ins : stage) {
      durations.push_back(ins.time_s);
      clocks.push_back(ins.freq_mhz);
    }
  }
  if (durations.size() != dag.num_nodes()) return "<p>(the plan does not match its schedule; no timeline)</p>";
  std::vector<double> finish = dag.earliest_finish<double>(durations);
  const double makespan = finish.empty() ? 1 : *std::max_element(finish.begin(), finish.end());
  const double lo = *std::min_element(clocks.begin(), clocks.end());
  const double hi = *std::max_element(clocks.begin(), clocks.end());
  const double width = 1000, row = 28, left = 70;
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" font-family=\"sans-serif\" font-size=\"10\">\n",
      left + width + 10, row * plan.num_stages + 40);
  for (std::size_t v = 0; v < dag.num_nodes(); ++v) {
    const auto& ins = dag.instruction(v);
    double x = left + width * (finish[v] - durations[v]) / makespan;
    double w = std::max(0.5, width * durations[v] / makespan);
    double y = 10 + row * ins.stage;
    double t = hi > lo ? (clocks[v] - lo) / (hi - lo) : 1.0;
    int red = static_cast<int>(60 + 190 * t), blue = static_cast<int>(230 - 170 * t);
    svg += fmt::format(
        "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{}\" fill=\"rgb({},90,{})\" stroke=\"white\" "
        "stroke-width=\"0.5\"><title>stage {} {} {}: {:.0f} MHz, {:.4f} s</title></rect>\n",
        x, y, w, row - 6, red, blue, ins.stage, pipeline::to_string(ins.type), ins.microbatch, clocks[v],
        durations[v]);
    if (w > 14) {
      svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" fill=\"white\">{}{}</text>\n", x + 2, y + 14,
                         ins.type == pipeline::InstructionType::kForward ? 'F' : 'B', ins.microbatch);
    }
  }
  for (int s = 0; s < plan.num_stages; ++s) {
    svg += fmt::format("<text x=\"4\" y=\"{:.1f}\">stage {}</text>\n", 10 + row * s + 14, s);
  }
  svg += fmt::format("<text x=\"{}\" y=\"{:.1f}\">0 s</text><text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{:.3f} s; "
                     "colour: {:.0f} MHz (blue) to {:.0f} MHz (red)</text>\n",
                     left, row * plan.num_stages + 30, left + width, row * plan.num_stages + 30, makespan, lo, hi);
  return svg + "</svg>\n";
}

std::string html_report(const ReportText& text, const std::string& frontier_svg, const std::string& timeline_svg) {
  std::string facts;
  for (const auto& [key, value] : text.facts) {
    facts += fmt::format("<tr><th>{}</th><td>{}</td></tr>\n", escape(key), escape(value));
  }
  return fmt::format(
      "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{0}</title>\n"
      "<style>body{{font-family:sans-serif;margin:2em;max-width:1100px}}th{{text-align:left;padding-right:1em}}"
      ".note{{color:#a33}}</style></head>\n<body>\n<h1>{0}</h1>\n<p class=\"note\">{1}</p>\n<table>\n{2}</table>\n"
      "<h2>Iteration time–energy frontier</h2>\n{3}\n<h2>Chosen plan: SM clock per instruction</h2>\n{4}\n</body></html>\n",
      escape(text.title), escape(text.note), facts,
      frontier_svg.empty() ? "<p>(gnuplot is not installed: no plot)</p>" : frontier_svg, timeline_svg);
}

}  // namespace kareus::report
