// Measures time and per-GPU energy over named windows: an iteration, an instruction, a whole run.
// Windows may nest or overlap; each reads the devices' energy counters at its begin and end. With
// a log path, every ended window appends one CSV row
// `start_time,window_name,elapsed_time,gpu<i>_energy...` (s, s, J; i as CUDA numbers the GPU),
// the format ReplayGpu plays back. start_time is on the monitor's TimeSource (the steady clock by
// default: seconds since an arbitrary origin, not wall time).
//
// A window shorter than a device's counter update period may read zero or a whole update's jump;
// the first such window of each name gets a warning. With `approximate_short_windows`, such a
// window that reads zero energy is estimated as instant power × elapsed time instead.
//
// Thread-safety: all methods may be called from several threads at once.
// Example:
//   EnergyMonitor monitor(gpus.all(), {.log_csv = "energy.csv"});
//   monitor.begin_window("iteration");
//   ... train one step ...
//   Measurement m = monitor.end_window("iteration");   // m.elapsed_s, m.gpu_energy_j[k]
#pragma once

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "kareus/runtime/gpu.hpp"
#include "kareus/runtime/time_source.hpp"

namespace kareus::runtime {

struct Measurement {
  double elapsed_s = 0;
  std::vector<double> gpu_energy_j;  // per monitored GPU, in the monitor's order
  double total_energy_j() const;
};

struct EnergyMonitorOptions {
  std::optional<std::filesystem::path> log_csv{};  // created (truncated) at construction
  std::shared_ptr<TimeSource> time{};              // null: the steady clock
  bool approximate_short_windows = false;
};

class EnergyMonitor {
 public:
  // Throws InputError when `gpus` is empty or holds a null device, or when the log cannot be
  // created.
  explicit EnergyMonitor(std::vector<std::shared_ptr<Gpu>> gpus, EnergyMonitorOptions options = {});

  // Throws InputError when a window of that name is already open.
  void begin_window(const std::string& name);
  // Throws InputError when no window of that name is open.
  Measurement end_window(const std::string& name);
  // Forgets an open window without measuring or logging it; throws InputError when none is open.
  void cancel_window(const std::string& name);
  bool is_open(const std::string& name) const;
  const std::vector<std::shared_ptr<Gpu>>& gpus() const { return gpus_; }

 private:
  struct OpenWindow {
    double start_s = 0;
    std::vector<double> start_energy_mj;
  };
  std::vector<double> read_energy_mj() const;

  std::vector<std::shared_ptr<Gpu>> gpus_;
  EnergyMonitorOptions options_;
  double max_update_period_s_ = 0;
  mutable std::mutex mutex_;
  std::map<std::string, OpenWindow> open_;
  std::set<std::string> warned_short_;
  std::ofstream log_;
};

}  // namespace kareus::runtime
