#include "kareus/report/plot.hpp"

#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "kareus/core/error.hpp"
#include "kareus/core/io.hpp"

namespace kareus::report {
namespace {

std::string gnuplot_string(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// A title broken at spaces into lines of at most `width` characters, so that a long job name stays
// inside the plot's 900 pixels instead of running off both edges.
std::string wrapped(const std::string& text, std::size_t width) {
  std::string out, line;
  std::istringstream words(text);
  for (std::string word; words >> word;) {
    if (!line.empty() && line.size() + 1 + word.size() > width) {
      out += line + "\n";
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
  }
  return out + line;
}

std::string find_gnuplot() {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    std::filesystem::path candidate = std::filesystem::path(dir) / "gnuplot";
    if (::access(candidate.c_str(), X_OK) == 0) return candidate.string();
  }
  return {};
}

}  // namespace

bool gnuplot_available() { return !find_gnuplot().empty(); }

namespace {

// Runs gnuplot on the series with `setup` (arrows, labels, margins) after the common settings, on
// a canvas `height` pixels tall; "" when gnuplot is not installed.
std::string render(const std::vector<PlotSeries>& series, const PlotLabels& labels, const std::string& setup,
                   int height) {
  std::string gnuplot = find_gnuplot();
  if (gnuplot.empty()) return {};
  auto temp_dir = std::filesystem::temp_directory_path();
  auto stem = fmt::format("kareus-plot-{}-{}", ::getpid(), reinterpret_cast<std::uintptr_t>(&series));
  auto script_path = temp_dir / (stem + ".gp");
  auto svg_path = temp_dir / (stem + ".svg");

  std::string script = fmt::format(
      "set encoding utf8\n"
      "set terminal svg size 900,{} dynamic enhanced font 'sans,12' background rgb 'white'\n"
      "set output {}\nset title {} noenhanced\nset xlabel {}\nset ylabel {}\n"
      "set grid\nset key top right noenhanced\n{}",
      height, gnuplot_string(svg_path.string()), gnuplot_string(wrapped(labels.title, 90)),
      gnuplot_string(labels.x_label), gnuplot_string(labels.y_label), setup);
  std::string plot = "plot ";
  std::string data;
  for (std::size_t i = 0; i < series.size(); ++i) {
    const PlotSeries& s = series[i];
    const std::string style = s.ring            ? "points pt 6 ps 2.2 lw 2"
                              : s.with_points ? "linespoints pt 7 ps 0.8 lw 2"
                                              : "lines lw 2";
    plot += fmt::format("{}'-' using 1:2 with {}{} title {}", i ? ", " : "", style,
                        s.color.empty() ? "" : fmt::format(" lc rgb '{}'", s.color), gnuplot_string(s.title));
    for (const TimeEnergy& p : s.points) data += fmt::format("{:.9g} {:.9g}\n", p.time_s, p.energy_j);
    if (s.points.empty()) data += "NaN NaN\n";
    data += "e\n";
  }
  script += plot + "\n" + data;
  write_file_atomic(script_path, script);
  std::string command = fmt::format("{} {} 2>&1", gnuplot_string(gnuplot), gnuplot_string(script_path.string()));
  std::string output;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) throw Error("cannot run gnuplot");
  char buffer[512];
  while (std::fgets(buffer, sizeof buffer, pipe)) output += buffer;
  int status = ::pclose(pipe);
  std::filesystem::remove(script_path);
  if (status != 0) {
    std::filesystem::remove(svg_path);
    throw Error(fmt::format("gnuplot failed: {}", output));
  }
  std::string svg = read_text_file(svg_path);
  std::filesystem::remove(svg_path);
  return svg;
}

// Each method's colour and place in the key (Okabe and Ito's palette, safe for colour blindness).
struct MethodStyle {
  std::string_view method;
  std::string_view color;
};
constexpr MethodStyle kMethodStyles[] = {
    {"Kareus", "#d55e00"}, {"Nanobatching+Perseus", "#009e73"}, {"Perseus", "#0072b2"}, {"Megatron-LM", "#000000"}};

std::size_t method_rank(const std::string& method) {
  for (std::size_t i = 0; i < std::size(kMethodStyles); ++i) {
    if (kMethodStyles[i].method == method) return i;
  }
  return std::size(kMethodStyles);
}

const PlotSeries* find_series(const std::vector<PlotSeries>& series, const std::string& title) {
  for (const PlotSeries& s : series) {
    if (s.title == title && !s.points.empty()) return &s;
  }
  return nullptr;
}

std::string percent_phrase(double pct, std::string_view what) {
  return fmt::format("{:.1f}% {} {}", std::abs(pct), pct >= 0 ? "less" : "more", what);
}

}  // namespace

std::string render_svg(const std::vector<PlotSeries>& series, const PlotLabels& labels) {
  return render(series, labels, "", 600);
}

std::string iso_savings_sentence(const IsoSavings& iso) {
  const std::string at_time = iso.iso_time_energy_reduction_pct
                                  ? percent_phrase(*iso.iso_time_energy_reduction_pct, "energy") +
                                        fmt::format(" at {}'s fastest time", iso.reference)
                                  : fmt::format("no plan as fast as {}'s fastest", iso.reference);
  const std::string at_energy = iso.iso_energy_time_reduction_pct
                                    ? percent_phrase(*iso.iso_energy_time_reduction_pct, "time") +
                                          " at its lowest energy"
                                    : std::string("no plan as frugal as its lowest energy");
  return fmt::format("{} against {}: {}, {}", iso.method, iso.reference, at_time, at_energy);
}

std::vector<IsoArrow> iso_arrows(const FrontierPlot& plot) {
  if (!plot.iso) return {};
  const PlotSeries* method = find_series(plot.methods, plot.iso->method);
  const PlotSeries* reference = find_series(plot.methods, plot.iso->reference);
  if (!method || !reference) return {};
  std::vector<IsoArrow> arrows;
  // Iso-time: down from the reference's fastest plan to the method's least energy at that time.
  const TimeEnergy fastest = *std::min_element(reference->points.begin(), reference->points.end());
  const auto energy = min_energy_within_time(method->points, fastest.time_s);
  if (plot.iso->iso_time_energy_reduction_pct && energy) {
    arrows.push_back({fastest, {fastest.time_s, *energy},
                      fmt::format("{:+.1f}% energy", -*plot.iso->iso_time_energy_reduction_pct)});
  }
  // Iso-energy: left from the reference's lowest-energy plan to the method's fastest at that energy.
  const TimeEnergy frugal = *std::min_element(
      reference->points.begin(), reference->points.end(), [](const TimeEnergy& x, const TimeEnergy& y) {
        return x.energy_j < y.energy_j || (x.energy_j == y.energy_j && x.time_s < y.time_s);
      });
  const auto time = min_time_within_energy(method->points, frugal.energy_j);
  if (plot.iso->iso_energy_time_reduction_pct && time) {
    arrows.push_back({frugal, {*time, frugal.energy_j},
                      fmt::format("{:+.1f}% time", -*plot.iso->iso_energy_time_reduction_pct)});
  }
  return arrows;
}

std::string frontier_plot_svg(const FrontierPlot& plot) {
  std::vector<PlotSeries> series = plot.methods;
  std::stable_sort(series.begin(), series.end(), [](const PlotSeries& a, const PlotSeries& b) {
    return method_rank(a.title) < method_rank(b.title);
  });
  for (PlotSeries& s : series) {
    const std::size_t rank = method_rank(s.title);
    if (s.color.empty() && rank < std::size(kMethodStyles)) s.color = kMethodStyles[rank].color;
    if (s.points.size() == 1) s.with_points = true;  // one plan (Megatron-LM): a marker, not an invisible line
  }
  if (plot.chosen) series.push_back({"chosen plan", {*plot.chosen}, false, "#d55e00", true});
  // Room around the data, so that no point sits on the border and the arrows' labels fit.
  std::string setup = "set offsets graph 0.04, graph 0.04, graph 0.08, graph 0.06\n";
  for (const IsoArrow& a : iso_arrows(plot)) {
    setup += fmt::format("set arrow from {:.9g},{:.9g} to {:.9g},{:.9g} head filled size screen 0.012,25 lw 1.5 "
                         "lc rgb '#444444' front\n",
                         a.from.time_s, a.from.energy_j, a.to.time_s, a.to.energy_j);
    // A vertical arrow's label left of its middle; a horizontal one's under it, a quarter of the way
    // from the reference, clear of the vertical arrow that usually crosses its middle.
    const bool vertical = a.from.time_s == a.to.time_s;
    const double along = vertical ? 0.5 : 0.25;
    setup += fmt::format("set label {} at {:.9g},{:.9g} {} tc rgb '#444444' front noenhanced\n",
                         gnuplot_string(a.label), a.from.time_s + along * (a.to.time_s - a.from.time_s),
                         a.from.energy_j + along * (a.to.energy_j - a.from.energy_j),
                         vertical ? "right offset -0.8,0" : "center offset 0,-1");
  }
  int height = 600;
  if (plot.iso) {  // the sentence under the x axis, on a taller canvas
    height = 640;
    setup += fmt::format("set bmargin at screen {:.4f}\nset label {} at screen 0.5, screen 0.025 center noenhanced\n",
                         90.0 / height, gnuplot_string(iso_savings_sentence(*plot.iso)));
  }
  return render(series, {plot.title, "iteration time (s)", "iteration energy (J)"}, setup, height);
}

}  // namespace kareus::report
