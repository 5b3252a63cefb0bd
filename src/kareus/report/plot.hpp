// Plots through gnuplot, when it is installed: SVG files that need no server to view; and the
// frontier plot `kareus plan` and `kareus compare` share (every method in its own colour, the chosen
// plan marked, the iso savings drawn).
//
// Thread-safety: each call runs its own gnuplot on its own temporary files.
// Example:
//   PlotSeries s{.title = "Kareus", .points = frontier};
//   if (!plot_svg({s}, {.title = "GPT-3 M=12", .x_label = "time (s)", .y_label = "energy (J)"},
//                 "frontier.svg")) spdlog::info("gnuplot not found; no plot");
//   std::string svg = frontier_plot_svg({.title = job, .methods = {kareus, perseus}, .chosen = chosen,
//                                        .iso = IsoSavings{.iso_time_energy_reduction_pct = 28.4}});
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "kareus/core/pareto.hpp"

namespace kareus::report {

struct PlotSeries {
  std::string title;
  std::vector<TimeEnergy> points;  // x = time_s, y = energy_j
  bool with_points = false;        // markers as well as the line
  std::string color = {};          // "#rrggbb"; empty: gnuplot's own cycle
  bool ring = false;               // a large open ring on each point and no line (the chosen plan)
};

struct PlotLabels {
  std::string title;
  std::string x_label = "iteration time (s)";
  std::string y_label = "iteration energy (J)";
};

bool gnuplot_available();

// Renders the series to an SVG at `path` (written atomically). Returns false, writing nothing, when
// gnuplot is not installed; throws Error when gnuplot fails.
bool plot_svg(const std::vector<PlotSeries>& series, const PlotLabels& labels,
              const std::filesystem::path& path);

// Same, but returns the SVG text (empty when gnuplot is not installed).
std::string render_svg(const std::vector<PlotSeries>& series, const PlotLabels& labels);

// What one method's frontier saves against a reference frontier: the iso figures of
// core/pareto.hpp, as `kareus compare` and `kareus plan` print them (planner/baselines). Empty
// figures: the method has no plan that fast, or that frugal.
struct IsoSavings {
  std::string method = "Kareus";     // the series titles they compare, in FrontierPlot::methods
  std::string reference = "Perseus";
  std::optional<double> iso_time_energy_reduction_pct;  // less energy at the reference's fastest time
  std::optional<double> iso_energy_time_reduction_pct;  // less time at the reference's lowest energy
};

// "Kareus against Perseus: 28.4% less energy at Perseus's fastest time, 34.1% less time at its
// lowest energy" (one decimal, the precision `kareus plan` prints).
std::string iso_savings_sentence(const IsoSavings& iso);

struct FrontierPlot {
  std::string title;                // the job and what its energy covers; wrapped to the plot's width
  std::vector<PlotSeries> methods;  // one per method, titled as planner names them ("Kareus", "Perseus", ...)
  std::optional<TimeEnergy> chosen;  // the chosen plan, ringed
  std::optional<IsoSavings> iso;     // arrows from the reference's ends to the method's frontier, and the sentence
};

// One iso figure as the plot draws it: an arrow from the reference's plan to the method's frontier
// at the same time (straight down) or the same energy (straight left), labelled with the saving.
struct IsoArrow {
  TimeEnergy from, to;
  std::string label;  // "-28.4% energy", "-34.1% time"
};

// The arrows of `plot.iso` (none without it, without either series, or for an empty figure).
std::vector<IsoArrow> iso_arrows(const FrontierPlot& plot);

// The time–energy frontier plot of a job: each method in a fixed colour (Kareus, then
// Nanobatching+Perseus, Perseus and Megatron-LM, in that order in the key; a one-point method a
// marker), the chosen plan ringed, each iso figure an arrow labelled with its saving (at the
// reference's fastest time, down to the method's energy; at its lowest energy, left to the method's
// time) and iso_savings_sentence() under the axis. Empty when gnuplot is not installed.
std::string frontier_plot_svg(const FrontierPlot& plot);

}  // namespace kareus::report
