// Plots through gnuplot, when it is installed: SVG files that need no server to view.
//
// Example:
//   PlotSeries s{.title = "Kareus", .points = frontier};
//   if (!plot_svg({s}, {.title = "GPT-3 M=12", .x_label = "time (s)", .y_label = "energy (J)"},
//                 "frontier.svg")) spdlog::info("gnuplot not found; no plot");
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "kareus/core/pareto.hpp"

namespace kareus::report {

struct PlotSeries {
  std::string title;
  std::vector<TimeEnergy> points;  // x = time_s, y = energy_j
  bool with_points = false;        // markers as well as the line
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

}  // namespace kareus::report
