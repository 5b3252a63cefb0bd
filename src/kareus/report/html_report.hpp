// A self-contained HTML report (inline SVG, no server, no scripts): the frontier plot and the chosen
// plan's per-stage clock timeline.
//
// Example:
//   std::string html = html_report({.title = "Kareus plan", .facts = {{"time_s", "2.91"}}},
//                                  render_svg(series, labels), clock_timeline_svg(plan));
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "kareus/plan/plan.hpp"

namespace kareus::report {

// One row per stage; each instruction a box as wide as its time at its planned start, coloured by
// its SM clock (blue = low, red = high), labelled F/B with its microbatch.
std::string clock_timeline_svg(const plan::Plan& plan);

struct ReportText {
  std::string title;
  std::vector<std::pair<std::string, std::string>> facts;  // shown as a table, in order
  std::string note;                                        // e.g. "simulated GPU model, not a measurement"
};

std::string html_report(const ReportText& text, const std::string& frontier_svg, const std::string& timeline_svg);

}  // namespace kareus::report
