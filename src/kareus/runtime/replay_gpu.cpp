#include "kareus/runtime/replay_gpu.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "kareus/core/csv.hpp"

namespace kareus::runtime {
namespace {

std::optional<int> gpu_column_index(const std::string& column) {
  if (!column.starts_with("gpu") || !column.ends_with("_energy")) return std::nullopt;
  std::string digits = column.substr(3, column.size() - 3 - 7);
  if (digits.empty() || digits.size() > 6 ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;
  }
  return std::stoi(digits);
}

}  // namespace

std::vector<int> ReplayGpu::gpu_indices_in_log(const std::filesystem::path& csv_path) {
  CsvTable table = read_csv(csv_path);
  std::vector<int> indices;
  for (const auto& column : table.header()) {
    if (auto i = gpu_column_index(column)) indices.push_back(*i);
  }
  return indices;
}

ReplayGpu::ReplayGpu(const std::filesystem::path& csv_path, int cuda_index,
                     ReplayGpuOptions options)
    : index_(cuda_index), options_(std::move(options)) {
  name_ = fmt::format("Replay of {} (gpu{})", csv_path.filename().string(), cuda_index);
  if (!options_.time) options_.time = steady_time_source();
  std::sort(options_.sm_clocks_mhz.rbegin(), options_.sm_clocks_mhz.rend());
  std::sort(options_.memory_clocks_mhz.rbegin(), options_.memory_clocks_mhz.rend());

  CsvTable table = read_csv(csv_path);
  std::size_t start_col = table.require_column("start_time");
  std::size_t elapsed_col = table.require_column("elapsed_time");
  std::size_t energy_col = table.require_column(fmt::format("gpu{}_energy", cuda_index));
  struct Window {
    double start_s, elapsed_s, energy_j;
  };
  std::vector<Window> windows;
  for (std::size_t r = 0; r < table.rows(); ++r) {
    Window w{table.number(r, start_col), table.number(r, elapsed_col), table.number(r, energy_col)};
    if (w.elapsed_s < 0) table.fail(r, elapsed_col, "a window cannot last a negative time");
    if (w.energy_j < 0) table.fail(r, energy_col, "a window cannot use negative energy");
    windows.push_back(w);
  }
  // Outermost first: by start, longer before shorter, so nested windows are skipped.
  std::sort(windows.begin(), windows.end(), [](const Window& a, const Window& b) {
    return a.start_s != b.start_s ? a.start_s < b.start_s : a.elapsed_s > b.elapsed_s;
  });
  double energy_mj = 0;
  for (const Window& w : windows) {
    if (!segments_.empty() && w.start_s < segments_.back().end_s) continue;
    segments_.push_back({w.start_s, w.start_s + w.elapsed_s, energy_mj, w.energy_j * 1000});
    energy_mj += w.energy_j * 1000;
  }
  if (options_.time_offset_s) {
    offset_s_ = *options_.time_offset_s;
  } else {
    offset_s_ = (segments_.empty() ? 0 : segments_.front().start_s) - options_.time->now_s();
  }
}

double ReplayGpu::log_time_s() const {
  return options_.time->now_s() + offset_s_;
}

double ReplayGpu::total_energy_mj() const {
  double t = log_time_s();
  // The last segment starting at or before t.
  auto it = std::upper_bound(segments_.begin(), segments_.end(), t,
                             [](double time, const Segment& s) { return time < s.start_s; });
  if (it == segments_.begin()) return 0;
  const Segment& s = *(it - 1);
  if (t >= s.end_s) return s.energy_before_mj + s.energy_mj;
  return s.energy_before_mj + s.energy_mj * (t - s.start_s) / (s.end_s - s.start_s);
}

double ReplayGpu::instant_power_mw() const {
  double t = log_time_s();
  for (const Segment& s : segments_) {
    if (t >= s.start_s && t < s.end_s) return s.energy_mj / (s.end_s - s.start_s);
  }
  return 0;
}

std::optional<std::pair<int, int>> ReplayGpu::locked_sm_clocks_mhz() const {
  std::lock_guard lock(mutex_);
  return locked_sm_;
}

int ReplayGpu::current_sm_clock_mhz() const {
  std::lock_guard lock(mutex_);
  if (locked_sm_) return locked_sm_->second;
  return options_.sm_clocks_mhz.empty() ? 0 : options_.sm_clocks_mhz.front();
}

void ReplayGpu::set_locked_sm_clocks(int min_clock_mhz, int max_clock_mhz) {
  if (min_clock_mhz <= 0 || max_clock_mhz < min_clock_mhz) {
    throw DeviceError(fmt::format("GPU {}: cannot lock the SM clock to [{}, {}] MHz", index_,
                                  min_clock_mhz, max_clock_mhz));
  }
  std::lock_guard lock(mutex_);
  locked_sm_ = {min_clock_mhz, max_clock_mhz};
}

void ReplayGpu::reset_locked_sm_clocks() {
  std::lock_guard lock(mutex_);
  locked_sm_.reset();
}

void ReplayGpu::lock_memory_clock(int) {}
void ReplayGpu::reset_memory_clock() {}

int ReplayGpu::power_limit_mw() const {
  std::lock_guard lock(mutex_);
  return power_limit_mw_;
}

void ReplayGpu::set_power_limit_mw(int power_limit_mw) {
  std::lock_guard lock(mutex_);
  power_limit_mw_ = power_limit_mw;
}

void ReplayGpu::reset_power_limit() {
  std::lock_guard lock(mutex_);
  power_limit_mw_ = 0;
}

}  // namespace kareus::runtime
