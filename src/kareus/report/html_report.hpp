// A self-contained HTML report (inline SVG, no server, no scripts): the frontier plot, the chosen
// plan's per-stage clock timeline with its colour legend, and further sections (the overlap
// decisions); it scales to a narrow window.
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

// The overlap decisions: per partition key, the share of instructions running each knob (launch
// slot and collective SMs, or sequential) in `chosen` and over `frontier`, as an HTML table.
std::string overlap_decisions_html(const plan::Plan& chosen, const std::vector<plan::Plan>& frontier);

// `sections`: further (title, HTML) sections after the timeline, in order.
std::string html_report(const ReportText& text, const std::string& frontier_svg, const std::string& timeline_svg,
                        const std::vector<std::pair<std::string, std::string>>& sections = {});

}  // namespace kareus::report
