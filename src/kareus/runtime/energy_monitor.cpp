#include "kareus/runtime/energy_monitor.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <numeric>

namespace kareus::runtime {
namespace {

// RFC 4180: quote a field holding a comma, a quote or a line break.
std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
  std::string out = "\"";
  for (char c : text) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

}  // namespace

double Measurement::total_energy_j() const {
  return std::accumulate(gpu_energy_j.begin(), gpu_energy_j.end(), 0.0);
}

EnergyMonitor::EnergyMonitor(std::vector<std::shared_ptr<Gpu>> gpus, EnergyMonitorOptions options)
    : gpus_(std::move(gpus)), options_(std::move(options)) {
  if (gpus_.empty()) throw InputError("EnergyMonitor: no GPUs to monitor");
  for (const auto& gpu : gpus_) {
    if (!gpu) throw InputError("EnergyMonitor: a GPU is null");
    max_update_period_s_ = std::max(max_update_period_s_, gpu->energy_update_period_s());
    counters_.push_back({gpu->energy_counter_wrap_mj(), std::nullopt, 0, false});
  }
  if (!options_.time) options_.time = steady_time_source();
  if (options_.log_csv) {
    if (options_.log_csv->has_parent_path()) {
      std::error_code ignored;
      std::filesystem::create_directories(options_.log_csv->parent_path(), ignored);
    }
    log_.open(*options_.log_csv, std::ios::out | std::ios::trunc);
    if (!log_) {
      throw InputError({options_.log_csv->string(), 0, 0, ""}, "cannot create the energy log");
    }
    log_ << "start_time,window_name,elapsed_time";
    for (const auto& gpu : gpus_) log_ << fmt::format(",gpu{}_energy", gpu->index());
    log_ << "\n";
    log_.flush();
  }
}

std::vector<double> EnergyMonitor::read_energy_mj() {
  std::lock_guard lock(read_mutex_);
  std::vector<double> energy;
  energy.reserve(gpus_.size());
  for (std::size_t k = 0; k < gpus_.size(); ++k) {
    const double raw_mj = gpus_[k]->total_energy_mj();
    Counter& c = counters_[k];
    if (c.last_raw_mj && raw_mj < *c.last_raw_mj) {
      const bool wrapped = c.wrap_mj.has_value();
      // A wrap goes on from 0 where the modulus was; a reset restarts from 0 where the counter was.
      c.offset_mj += wrapped ? *c.wrap_mj : *c.last_raw_mj;
      if (!c.warned) {
        c.warned = true;
        if (wrapped) {
          spdlog::warn(
              "GPU {}'s energy counter wrapped (at {} mJ); windows across it are counted through "
              "the wrap",
              gpus_[k]->index(), *c.wrap_mj);
        } else {
          spdlog::warn(
              "GPU {}'s energy counter went back from {} to {} mJ (a driver reset?); windows "
              "across it miss the energy between the last reading and the reset",
              gpus_[k]->index(), *c.last_raw_mj, raw_mj);
        }
      }
    }
    c.last_raw_mj = raw_mj;
    energy.push_back(c.offset_mj + raw_mj);
  }
  return energy;
}

void EnergyMonitor::begin_window(const std::string& name) {
  std::lock_guard lock(mutex_);
  if (open_.count(name)) {
    throw InputError(
        fmt::format("energy window '{}' is already open; end or cancel it first", name));
  }
  // Energy first, then time: the begin reading is never later than the time stamp it pairs with.
  OpenWindow window;
  window.start_energy_mj = read_energy_mj();
  window.start_s = options_.time->now_s();
  open_.emplace(name, std::move(window));
}

Measurement EnergyMonitor::end_window(const std::string& name) {
  double end_s = options_.time->now_s();
  std::vector<double> end_energy_mj;
  try {
    end_energy_mj = read_energy_mj();
  } catch (...) {
    // The window cannot be measured any more: closed, so that one failure is one report.
    std::lock_guard lock(mutex_);
    open_.erase(name);
    throw;
  }
  std::lock_guard lock(mutex_);
  auto it = open_.find(name);
  if (it == open_.end()) throw InputError(fmt::format("no energy window named '{}' is open", name));
  OpenWindow window = std::move(it->second);
  open_.erase(it);

  Measurement m;
  m.elapsed_s = std::max(0.0, end_s - window.start_s);
  bool short_window = m.elapsed_s < max_update_period_s_;
  for (std::size_t k = 0; k < gpus_.size(); ++k) {
    double energy_j = std::max(0.0, end_energy_mj[k] - window.start_energy_mj[k]) / 1000;
    if (short_window && options_.approximate_short_windows && energy_j == 0) {
      energy_j = gpus_[k]->instant_power_mw() / 1000 * m.elapsed_s;
    }
    m.gpu_energy_j.push_back(energy_j);
  }
  if (short_window && warned_short_.insert(name).second) {
    spdlog::warn(
        "energy window '{}' lasted {:.4f} s, shorter than the energy counter's update "
        "period ({} s): its energy may read zero or a whole update{}",
        name, m.elapsed_s, max_update_period_s_,
        options_.approximate_short_windows ? " (zero readings are estimated from power)" : "");
  }
  if (log_.is_open()) {
    // Shortest round-trip text: a replay reads back exactly what was measured.
    log_ << fmt::format("{},{},{}", window.start_s, csv_field(name), m.elapsed_s);
    for (double e : m.gpu_energy_j) log_ << fmt::format(",{}", e);
    log_ << "\n";
    log_.flush();
  }
  return m;
}

void EnergyMonitor::cancel_window(const std::string& name) {
  std::lock_guard lock(mutex_);
  if (open_.erase(name) == 0)
    throw InputError(fmt::format("no energy window named '{}' is open", name));
}

bool EnergyMonitor::is_open(const std::string& name) const {
  std::lock_guard lock(mutex_);
  return open_.count(name) > 0;
}

}  // namespace kareus::runtime
