// A simulated GPU for tests, demos and `kareus replay`: clocks and power limits behave like a real
// device's, and its energy counter advances with time (steady or injected) at the power that its
// SM clock and a given load imply. It measures nothing; outputs that use it must say "simulated".
//
// The power comes from a function (sm_clock_mhz, load) -> W, so that any model can drive it. The
// default is the hardware module's DVFS model of a GPU preset (model_power_w below).
//
// Thread-safety: every method may be called from several threads at once.
// Example:
//   auto time = std::make_shared<ManualTimeSource>();
//   FakeGpu gpu(make_fake_gpu_config(0, time));
//   gpu.set_locked_sm_clocks(1005, 1005);
//   gpu.set_load(1.0);
//   time->advance_s(2.0);                      // 2 s at full load and 1005 MHz
//   double energy_mj = gpu.total_energy_mj();
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kareus/hardware/gpu.hpp"
#include "kareus/runtime/gpu.hpp"
#include "kareus/runtime/time_source.hpp"

namespace kareus::runtime {

// Board power (W) at an SM clock (MHz) and a load in [0, 1] (the fraction of the GPU busy).
using PowerFunction = std::function<double(double sm_clock_mhz, double load)>;

// Board power of `gpu` under a steady load in [0, 1]: that share of the full load TDP is specified
// for (hardware::full_load_activity: every SM computing at intensity 1, HBM at full bandwidth).
// Load 0 draws the static power; load 1 at the max clock draws the TDP.
double model_power_w(const hardware::GpuSpec& gpu, double sm_clock_mhz, double load);

struct FakeGpuConfig {
  int index = 0;
  std::string name = "Fake A100-SXM4-40GB (simulated)";
  std::vector<int> sm_clocks_mhz{};      // any order; must not be empty
  std::vector<int> memory_clocks_mhz{};  // any order; may be empty
  PowerLimitConstraints power_limits{};
  PowerFunction power_w{};
  std::shared_ptr<TimeSource> time{};  // null: the steady clock
  // 0: the counter moves continuously; > 0: it moves only at multiples of this period, like a
  // real counter that the driver updates now and then.
  double energy_update_period_s = 0;
};

// A fake of `gpu`: its SM clocks, one memory clock (1215 MHz), power limits from a quarter of the
// TDP up to the TDP (default the TDP), model_power_w power.
FakeGpuConfig make_fake_gpu_config(const hardware::GpuSpec& gpu, int index = 0,
                                   std::shared_ptr<TimeSource> time = nullptr);
// A fake of the bundled A100 SXM4 40GB preset (loaded once).
FakeGpuConfig make_fake_gpu_config(int index = 0, std::shared_ptr<TimeSource> time = nullptr);

class FakeGpu : public Gpu {
 public:
  // Throws InputError on an empty clock list, a missing power function or a bad power limit.
  explicit FakeGpu(FakeGpuConfig config);

  // The simulated work's share of the GPU, in [0, 1]; 0 is idle (static power only).
  void set_load(double load);
  double load() const;
  // The configured power function, for checks: what the device draws at (clock, load).
  double power_w(double sm_clock_mhz, double load) const {
    return config_.power_w(sm_clock_mhz, load);
  }
  std::optional<std::pair<int, int>> locked_sm_clocks_mhz() const;
  std::optional<int> locked_memory_clock_mhz() const;
  // How many times set_locked_sm_clocks / reset_locked_sm_clocks were called.
  long sm_clock_calls() const;
  const std::shared_ptr<TimeSource>& time() const { return config_.time; }

  int index() const override { return config_.index; }
  std::string name() const override { return config_.name; }
  std::vector<int> supported_sm_clocks_mhz() const override { return config_.sm_clocks_mhz; }
  std::vector<int> supported_memory_clocks_mhz() const override {
    return config_.memory_clocks_mhz;
  }
  // The locked clock (highest supported inside the lock), else the highest, lowered while the
  // power at the current load would exceed the power limit.
  int current_sm_clock_mhz() const override;
  void set_locked_sm_clocks(int min_clock_mhz, int max_clock_mhz) override;
  void reset_locked_sm_clocks() override;
  void lock_memory_clock(int clock_mhz) override;
  void reset_memory_clock() override;
  PowerLimitConstraints power_limit_constraints() const override { return config_.power_limits; }
  int power_limit_mw() const override;
  void set_power_limit_mw(int power_limit_mw) override;
  void reset_power_limit() override;
  double total_energy_mj() const override;
  double instant_power_mw() const override;
  double energy_update_period_s() const override { return config_.energy_update_period_s; }

 private:
  int effective_clock_locked() const;
  double power_w_locked() const;
  void advance_locked() const;  // integrates energy up to now at the current state

  FakeGpuConfig config_;
  mutable std::mutex mutex_;
  std::optional<std::pair<int, int>> locked_sm_;
  std::optional<int> locked_memory_;
  int power_limit_mw_ = 0;
  double load_ = 0;
  long sm_clock_calls_ = 0;
  mutable double energy_mj_ = 0;
  mutable double published_energy_mj_ = 0;
  mutable double last_time_s_ = 0;
};

}  // namespace kareus::runtime
