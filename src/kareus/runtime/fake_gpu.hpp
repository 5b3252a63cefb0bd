// A simulated GPU for tests, demos and `kareus replay`: clocks and power limits behave like a real
// device's, and its energy counter advances with time (steady or injected) at the power that its
// SM clock and a given load imply. It measures nothing; outputs that use it must say "simulated".
//
// The power comes from a function (sm_clock_mhz, load) -> W, so that any model can drive it. The
// default is the hardware module's DVFS model of a GPU preset (model_power_w below).
//
// Faults (GpuFault, for tests): any call that reaches the driver on a real GPU can be made to fail
// with one of NVML's return codes (thrown exactly as NvmlGpu throws it: GpuPermissionError,
// GpuNotSupportedError, GpuLostError or DeviceError, with NVML's function name and text), to hang
// (the call blocks until release_hangs() or `hang_limit_s` of real time, then completes; the test
// sees which: hangs_timed_out()), to lose
// the device (that call and every later one fail with NVML_ERROR_GPU_IS_LOST), or to kill the
// process (SIGKILL, a rank dying mid-call), each at the n-th call of its kind. The energy counter
// can wrap at a given modulus, from a given start.
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

#include <array>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
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

// The device calls a fault can strike: every Gpu method that asks the driver on a real GPU.
enum class GpuCall {
  kCurrentSmClock,
  kSetSmClocks,
  kResetSmClocks,
  kLockMemoryClock,
  kResetMemoryClock,
  kPowerLimitConstraints,
  kPowerLimit,
  kSetPowerLimit,
  kResetPowerLimit,
  kTotalEnergy,
  kInstantPower,
};
inline constexpr std::size_t kGpuCallKinds = 11;
// "current_sm_clock", "set_sm_clocks", ..., "total_energy", "instant_power".
std::string_view to_string(GpuCall call);
std::optional<GpuCall> parse_gpu_call(std::string_view text);
// The NVML function NvmlGpu calls for it (what its errors name).
std::string_view nvml_function(GpuCall call);

// NVML's return codes (nvml.h, nvmlReturn_t) that faults use most.
inline constexpr int kNvmlErrorNotSupported = 3;
inline constexpr int kNvmlErrorNoPermission = 4;
inline constexpr int kNvmlErrorTimeout = 10;
inline constexpr int kNvmlErrorGpuIsLost = 15;
inline constexpr int kNvmlErrorUnknown = 999;

struct GpuFault {
  enum class Kind {
    kError,  // this call fails with `nvml_code`
    kHang,   // this call blocks (release_hangs() or hang_limit_s), then runs
    kLost,   // this call and every later one fail with NVML_ERROR_GPU_IS_LOST
    kKill,   // the process dies here (SIGKILL)
  };
  GpuCall call = GpuCall::kSetSmClocks;
  long occurrence = 1;  // the n-th call of `call` since the fake was built, from 1
  Kind kind = Kind::kError;
  int nvml_code = kNvmlErrorUnknown;  // kError only
  bool operator==(const GpuFault&) const = default;
};

// "CALL@N:error=CODE", "CALL@N:hang", "CALL@N:lost" or "CALL@N:kill", e.g. "total_energy@3:lost";
// CODE is an nvmlReturn_t number. Throws InputError naming what is wrong.
GpuFault parse_gpu_fault(std::string_view text);
std::string to_string(const GpuFault& fault);

struct FakeGpuConfig {
  int index = 0;
  std::string name = "Fake A100-SXM4-40GB (simulated)";
  std::vector<int> sm_clocks_mhz{};      // any order; must not be empty
  std::vector<int> memory_clocks_mhz{};  // any order; may be empty
  PowerLimitConstraints power_limits{};
  // The limit the board has at start (an administrator's cap); nullopt: the default.
  std::optional<int> start_power_limit_mw{};
  PowerFunction power_w{};
  std::shared_ptr<TimeSource> time{};  // null: the steady clock
  // 0: the counter moves continuously; > 0: it moves only at multiples of this period, like a
  // real counter that the driver updates now and then.
  double energy_update_period_s = 0;
  std::vector<GpuFault> faults{};
  // A hung call gives up waiting for release_hangs() after this much real time.
  double hang_limit_s = 10;
  // > 0: the energy counter reads (energy_counter_start_mj + energy) modulo this, as a counter of
  // that width would.
  double energy_counter_wrap_mj = 0;
  double energy_counter_start_mj = 0;
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
  // The power limit set now, for checks: unlike power_limit_mw(), not a device call (no fault).
  int power_limit_setting_mw() const;
  // How many times set_locked_sm_clocks / reset_locked_sm_clocks were called.
  long sm_clock_calls() const;
  const std::shared_ptr<TimeSource>& time() const { return config_.time; }

  // Faults (see above). add_fault counts occurrences from the fake's construction.
  void add_fault(const GpuFault& fault);
  // Lets every call hung now go on; later hangs do not wait either.
  void release_hangs();
  long calls(GpuCall call) const;  // calls of that kind so far, failed ones included
  long failed_calls() const;       // calls that threw an injected error (lost ones included)
  long hung_calls() const;         // calls blocked in a hang right now
  long hangs_timed_out() const;    // hangs that ended at hang_limit_s, not by release_hangs()
  bool lost() const;
  // The energy the device drew: no wrap, no update period, no faults.
  double true_energy_mj() const;

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
  PowerLimitConstraints power_limit_constraints() const override;
  int power_limit_mw() const override;
  void set_power_limit_mw(int power_limit_mw) override;
  void reset_power_limit() override;
  double total_energy_mj() const override;
  double instant_power_mw() const override;
  double energy_update_period_s() const override { return config_.energy_update_period_s; }
  std::optional<double> energy_counter_wrap_mj() const override;

 private:
  // Counts the call and plays its fault, if any: throws, hangs or kills.
  void strike(GpuCall call) const;
  void set_power_limit_unchecked(int power_limit_mw);
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

  // Faults: their own lock, never held by a hung call's wait, so that other calls go on.
  mutable std::mutex fault_mutex_;
  mutable std::condition_variable released_;
  std::vector<GpuFault> faults_;
  mutable std::array<long, kGpuCallKinds> calls_{};
  mutable long failed_ = 0, hung_ = 0, hangs_timed_out_ = 0;
  bool released_all_ = false;
  mutable bool lost_ = false;
};

}  // namespace kareus::runtime
