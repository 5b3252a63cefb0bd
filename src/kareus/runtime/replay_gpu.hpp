// A GPU that plays back an energy log written by EnergyMonitor (columns
// `start_time,window_name,elapsed_time,gpu<i>_energy...`), so that tests and demos can re-run a
// real job's measurements without the hardware.
//
// The log holds windows, not raw counter readings, so the counter is rebuilt from the outermost
// windows that do not overlap (nested ones are already inside them): within a window energy
// accrues at the window's mean power; between windows the device is taken to draw nothing. A
// replayed window that matches a logged one (same start and length) reads exactly the logged
// energy. Clock and power-limit setters are accepted and remembered but change nothing.
//
// Thread-safety: every method may be called from several threads at once.
// Example:
//   auto time = std::make_shared<ManualTimeSource>();
//   ReplayGpu gpu("energy.csv", /*cuda_index=*/0, {.time = time, .time_offset_s = 0.0});
//   time->set_s(12.5);
//   double energy_mj = gpu.total_energy_mj();   // the log's energy up to t = 12.5 s
#pragma once

#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kareus/runtime/gpu.hpp"
#include "kareus/runtime/time_source.hpp"

namespace kareus::runtime {

struct ReplayGpuOptions {
  std::shared_ptr<TimeSource> time{};  // null: the steady clock
  // The log's time is time->now_s() + time_offset_s. nullopt: the log's first window starts at
  // the moment the ReplayGpu is built.
  std::optional<double> time_offset_s{};
  std::vector<int> sm_clocks_mhz{};  // reported as supported; empty: any clock passes
  std::vector<int> memory_clocks_mhz{};
};

class ReplayGpu final : public Gpu {
 public:
  // Throws InputError naming the file and line on a malformed log or a missing
  // gpu<cuda_index>_energy column.
  ReplayGpu(const std::filesystem::path& csv_path, int cuda_index, ReplayGpuOptions options = {});

  // The GPU indices a log has columns for.
  static std::vector<int> gpu_indices_in_log(const std::filesystem::path& csv_path);

  std::optional<std::pair<int, int>> locked_sm_clocks_mhz() const;

  int index() const override { return index_; }
  std::string name() const override { return name_; }
  std::vector<int> supported_sm_clocks_mhz() const override { return options_.sm_clocks_mhz; }
  std::vector<int> supported_memory_clocks_mhz() const override {
    return options_.memory_clocks_mhz;
  }
  int current_sm_clock_mhz() const override;
  void set_locked_sm_clocks(int min_clock_mhz, int max_clock_mhz) override;
  void reset_locked_sm_clocks() override;
  void lock_memory_clock(int clock_mhz) override;
  void reset_memory_clock() override;
  PowerLimitConstraints power_limit_constraints() const override { return {}; }
  int power_limit_mw() const override;
  void set_power_limit_mw(int power_limit_mw) override;
  void reset_power_limit() override;
  double total_energy_mj() const override;
  double instant_power_mw() const override;
  double energy_update_period_s() const override { return 0; }

 private:
  struct Segment {
    double start_s, end_s, energy_before_mj, energy_mj;
  };
  double log_time_s() const;

  int index_ = 0;
  std::string name_;
  ReplayGpuOptions options_;
  double offset_s_ = 0;
  std::vector<Segment> segments_;  // by start, disjoint
  mutable std::mutex mutex_;
  std::optional<std::pair<int, int>> locked_sm_;
  int power_limit_mw_ = 0;
};

}  // namespace kareus::runtime
