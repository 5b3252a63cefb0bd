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
// Counter wraps: every reading of a GPU's counter is unwrapped against the one before (under one
// lock, so readings from several threads stay in order): a reading lower than the last is a wrap
// of the device's energy_counter_wrap_mj(), counted through, with one warning per GPU; on a counter
// that claims never to wrap, a drop is a counter reset, counted as a restart from 0 (the energy
// between the last reading and the reset is lost), with one warning per GPU. Every window's energy
// is therefore >= 0 and windows nest consistently. A wrap is missed only if a whole modulus of
// energy passes between two readings of one GPU (NVML's 64-bit mJ counter: never).
//
// Device faults: a failed reading throws the device's error once; the GPUs after it go unread that
// time, so their next gap (for the wraps above) spans two. At begin_window the window is not
// opened; at end_window it is closed unmeasured, so the loop's next begin_window of that name
// works. Readings are made on the caller's thread: a device call that hangs holds the caller as
// long as the driver takes.
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
  // Every GPU's counter, unwrapped (see above).
  std::vector<double> read_energy_mj();

  struct Counter {
    std::optional<double> wrap_mj;      // the device's modulus; nullopt: it never wraps
    std::optional<double> last_raw_mj;  // the last reading, as the device gave it
    double offset_mj = 0;               // added to raw readings: the wraps and resets so far
    bool warned = false;
  };

  std::vector<std::shared_ptr<Gpu>> gpus_;
  EnergyMonitorOptions options_;
  double max_update_period_s_ = 0;
  mutable std::mutex mutex_;
  std::mutex read_mutex_;  // held across a reading of every counter and its unwrapping
  std::vector<Counter> counters_;
  std::map<std::string, OpenWindow> open_;
  std::set<std::string> warned_short_;
  std::ofstream log_;
};

}  // namespace kareus::runtime
