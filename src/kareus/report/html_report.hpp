// Self-contained HTML reports (inline SVG, no server, no scripts), one page style for both:
// `kareus plan`'s (the frontier plot, the chosen plan's per-stage clock timeline with its colour
// legend, and further sections: the overlap decisions) and `kareus compare`'s (one section per
// config: the methods' figures and their frontier plot). Both scale to a narrow window.
//
// Thread-safety: pure functions.
// Example:
//   std::string html = html_report({.title = "Kareus plan", .facts = {{"time_s", "2.91"}}},
//                                  frontier_plot_svg(plot), clock_timeline_svg(plan));
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kareus/core/pareto.hpp"
#include "kareus/evaluate/evaluator.hpp"
#include "kareus/plan/plan.hpp"
#include "kareus/report/plot.hpp"

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

// How far to trust the figures, in one sentence, with the docs page that measures the model.
std::string trust_note(evaluate::Provenance provenance);

// One method's line of a `kareus compare` config.
struct MethodSummary {
  std::string method;  // "Megatron-LM", "Perseus", "Nanobatching+Perseus", "Kareus"
  TimeEnergy fastest;  // its max-throughput plan
  std::optional<double> iso_time_energy_reduction_pct;  // against the config's reference; empty for it
  std::optional<double> iso_energy_time_reduction_pct;
  std::size_t measurements = 0;
};

struct CompareSection {
  std::string config;        // the job's name
  std::string energy_scope;  // what its energies cover
  std::string reference;     // the iso figures' reference method; empty when no baseline ran
  std::vector<MethodSummary> methods;
  std::vector<std::string> notes;  // methods left out, and why; the reference when not Perseus
  std::string frontier_svg;        // frontier_plot_svg() of its methods; empty without gnuplot
};

// `kareus compare`'s page: `text` on top, then one section per config, in order.
std::string compare_report_html(const ReportText& text, const std::vector<CompareSection>& configs);

}  // namespace kareus::report
