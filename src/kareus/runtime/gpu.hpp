// The GPU device interface of the runtime: one thin method per management call, the unit in every
// name, and a collection of the GPUs a CUDA process sees, in CUDA's numbering (cuda_order.hpp
// translates it to the driver's).
//
// Implementations: NvmlGpu (a real GPU through NVML, loaded at run time), FakeGpu (a simulated
// device for tests and demos) and ReplayGpu (a recorded energy log played back).
//
// Thread-safety: every implementation may be called from several threads at once (the frequency
// controller's worker sets clocks while the energy monitor reads energy on the caller's thread).
// Example:
//   GpuCollection gpus = GpuCollection::open_nvml();      // indices as CUDA numbers them
//   Gpu& gpu = gpus.at(0);
//   gpu.set_locked_sm_clocks(1200, 1200);
//   double energy_mj = gpu.total_energy_mj();
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kareus/core/error.hpp"

namespace kareus::runtime {

// The device refused because the process lacks the privilege (clock and power-limit setters need
// root or CAP_SYS_ADMIN). Distinct so that callers can say so once and carry on measuring.
class GpuPermissionError : public DeviceError {
 public:
  using DeviceError::DeviceError;
};

// The device does not have the feature (e.g. no total-energy counter, no memory-clock locking).
class GpuNotSupportedError : public DeviceError {
 public:
  using DeviceError::DeviceError;
};

// The device is gone (NVML_ERROR_GPU_IS_LOST: it fell off the bus): every later call fails too, so
// callers stop calling it rather than retrying, and a search stops rather than failing knobs.
class GpuLostError : public EnvironmentError {
 public:
  using EnvironmentError::EnvironmentError;
};

struct PowerLimitConstraints {
  int min_power_limit_mw = 0;
  int max_power_limit_mw = 0;
  int default_power_limit_mw = 0;
  bool operator==(const PowerLimitConstraints&) const = default;
};

class Gpu {
 public:
  virtual ~Gpu() = default;

  // The index as this process's CUDA runtime numbers it (after CUDA_VISIBLE_DEVICES).
  virtual int index() const = 0;
  virtual std::string name() const = 0;

  // Clocks the device can be locked to, highest first; empty when the device does not say (then
  // any clock is passed through unchanged).
  virtual std::vector<int> supported_sm_clocks_mhz() const = 0;
  virtual std::vector<int> supported_memory_clocks_mhz() const = 0;
  // The SM clock the device runs at now.
  virtual int current_sm_clock_mhz() const = 0;

  // Locks the SM clock into [min_clock_mhz, max_clock_mhz]; equal bounds pin it.
  virtual void set_locked_sm_clocks(int min_clock_mhz, int max_clock_mhz) = 0;
  // Returns the SM clock to the driver's own management.
  virtual void reset_locked_sm_clocks() = 0;
  virtual void lock_memory_clock(int clock_mhz) = 0;
  virtual void reset_memory_clock() = 0;

  virtual PowerLimitConstraints power_limit_constraints() const = 0;
  virtual int power_limit_mw() const = 0;
  virtual void set_power_limit_mw(int power_limit_mw) = 0;
  // Sets the power limit back to the device's default.
  virtual void reset_power_limit() = 0;

  // Energy since an arbitrary origin fixed for the device's lifetime; never decreases, except
  // where the counter wraps (energy_counter_wrap_mj).
  virtual double total_energy_mj() const = 0;
  // Where the energy counter wraps back to 0 (its modulus); nullopt where it never does. A reading
  // lower than the one before is a wrap, which EnergyMonitor counts through.
  virtual std::optional<double> energy_counter_wrap_mj() const { return std::nullopt; }
  virtual double instant_power_mw() const = 0;
  // How often the energy counter moves: a window shorter than this may read zero or a jump.
  virtual double energy_update_period_s() const = 0;
};

// The supported clock nearest to `clock_mhz` (ties go to the higher clock, the safe side for
// time); `clock_mhz` itself when `supported_mhz` is empty.
int nearest_clock_mhz(const std::vector<int>& supported_mhz, int clock_mhz);

// The GPUs of this process, indexed as CUDA indexes them.
//
// Thread-safety: immutable after construction; the devices themselves are thread-safe.
// Example:
//   GpuCollection gpus = GpuCollection::open_nvml();
//   for (std::size_t i = 0; i < gpus.size(); ++i) fmt::print("{}\n", gpus.at(i).name());
class GpuCollection {
 public:
  GpuCollection() = default;
  // Position k must hold the device whose index() is k.
  explicit GpuCollection(std::vector<std::shared_ptr<Gpu>> gpus);

  // Every GPU this process may use, through NVML, honouring CUDA_VISIBLE_DEVICES. Throws
  // DeviceError ("NVML not available: ...") where there is no NVIDIA driver.
  static GpuCollection open_nvml();

  std::size_t size() const { return gpus_.size(); }
  // Throws InputError naming the index and the count when out of range.
  Gpu& at(std::size_t cuda_index) const { return *shared(cuda_index); }
  std::shared_ptr<Gpu> shared(std::size_t cuda_index) const;
  const std::vector<std::shared_ptr<Gpu>>& all() const { return gpus_; }

 private:
  std::vector<std::shared_ptr<Gpu>> gpus_;
};

}  // namespace kareus::runtime
