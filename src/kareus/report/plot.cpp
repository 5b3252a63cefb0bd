#include "kareus/report/plot.hpp"

#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

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

std::string render_svg(const std::vector<PlotSeries>& series, const PlotLabels& labels) {
  std::string gnuplot = find_gnuplot();
  if (gnuplot.empty()) return {};
  auto temp_dir = std::filesystem::temp_directory_path();
  auto stem = fmt::format("kareus-plot-{}-{}", ::getpid(), reinterpret_cast<std::uintptr_t>(&series));
  auto script_path = temp_dir / (stem + ".gp");
  auto svg_path = temp_dir / (stem + ".svg");

  std::string script = fmt::format(
      "set terminal svg size 900,600 dynamic enhanced font 'sans,12' background rgb 'white'\n"
      "set output {}\nset title {} noenhanced\nset xlabel {}\nset ylabel {}\n"
      "set grid\nset key top right noenhanced\n",
      gnuplot_string(svg_path.string()), gnuplot_string(wrapped(labels.title, 90)), gnuplot_string(labels.x_label),
      gnuplot_string(labels.y_label));
  std::string plot = "plot ";
  std::string data;
  for (std::size_t i = 0; i < series.size(); ++i) {
    plot += fmt::format("{}'-' using 1:2 with {} lw 2 title {}", i ? ", " : "",
                        series[i].with_points ? "linespoints pt 7 ps 0.6" : "lines",
                        gnuplot_string(series[i].title));
    for (const TimeEnergy& p : series[i].points) data += fmt::format("{:.9g} {:.9g}\n", p.time_s, p.energy_j);
    if (series[i].points.empty()) data += "NaN NaN\n";
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

bool plot_svg(const std::vector<PlotSeries>& series, const PlotLabels& labels,
              const std::filesystem::path& path) {
  std::string svg = render_svg(series, labels);
  if (svg.empty()) return false;
  write_file_atomic(path, svg);
  return true;
}

}  // namespace kareus::report
