// A real NVIDIA GPU through NVML. libnvidia-ml.so.1 is opened at run time with dlopen and the few
// functions used are declared here (nvml_gpu.cpp), so Kareus builds without the CUDA toolkit or
// nvml.h and fails cleanly at run time where there is no driver ("NVML not available: ...").
//
// Every NVML error becomes a DeviceError with nvmlErrorString's text, mapped in one table:
// NVML_ERROR_NO_PERMISSION is a GpuPermissionError saying clock setting needs root or
// CAP_SYS_ADMIN; NVML_ERROR_NOT_SUPPORTED is a GpuNotSupportedError; NVML_ERROR_GPU_IS_LOST is a
// GpuLostError (the device is gone; callers stop calling it). A GPU without the total-energy
// counter (pre-Volta) gets its energy by integrating sampled power on a background thread.
//
// Thread-safety: NVML is thread-safe; an NvmlGpu may be used from several threads at once.
// Example:
//   auto nvml = NvmlLibrary::load();
//   NvmlGpu gpu(nvml, /*cuda_index=*/0, /*nvml_index=*/0);
//   gpu.set_locked_sm_clocks(1005, 1005);
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "kareus/runtime/cuda_order.hpp"
#include "kareus/runtime/gpu.hpp"

namespace kareus::runtime {

inline constexpr const char* kNvmlLibraryName = "libnvidia-ml.so.1";

// Throws the error NVML's `code` maps to: the operation, the GPU, NVML's own text and, for a
// missing privilege, what to do about it. `error_string` is nvmlErrorString's text.
[[noreturn]] void throw_nvml_error(int code, std::string_view error_string,
                                   std::string_view operation, int gpu_index);

// The loaded and initialised NVML library; shared by every NvmlGpu, shut down with the last one.
class NvmlLibrary {
 public:
  struct Api;  // the resolved function table (nvml_gpu.cpp)

  // Loads `path` (default libnvidia-ml.so.1) and calls nvmlInit_v2. Throws DeviceError beginning
  // "NVML not available: " when the library is missing, lacks a function, or fails to initialise.
  // Loads of the same path share one instance while it lives.
  static std::shared_ptr<NvmlLibrary> load(const std::string& path = kNvmlLibraryName);
  ~NvmlLibrary();
  NvmlLibrary(const NvmlLibrary&) = delete;
  NvmlLibrary& operator=(const NvmlLibrary&) = delete;

  int device_count() const;
  const Api& api() const { return *api_; }
  // Throws the mapped error unless `code` is NVML_SUCCESS.
  void check(int code, std::string_view operation, int gpu_index) const;

 private:
  NvmlLibrary(void* handle, std::unique_ptr<Api> api);
  void* handle_ = nullptr;
  std::unique_ptr<Api> api_;
};

struct NvmlGpuOptions {
  // NVML does not publish how often the energy counter moves; 100 ms is a conservative bound
  // (Zeus uses the same figure). Only the energy monitor's short-window warning reads it.
  double energy_update_period_s = 0.1;
  // Power sampling period when the GPU has no energy counter.
  double power_sample_period_s = 0.01;
};

class NvmlGpu final : public Gpu {
 public:
  // Opens the driver's device `nvml_index`, which CUDA calls `cuda_index` in this process.
  NvmlGpu(std::shared_ptr<NvmlLibrary> library, int cuda_index, int nvml_index,
          NvmlGpuOptions options = {});
  ~NvmlGpu() override;

  int nvml_index() const { return nvml_index_; }
  // False when energy comes from integrating sampled power.
  bool has_energy_counter() const;

  int index() const override { return cuda_index_; }
  std::string name() const override { return name_; }
  std::vector<int> supported_sm_clocks_mhz() const override { return sm_clocks_mhz_; }
  std::vector<int> supported_memory_clocks_mhz() const override { return memory_clocks_mhz_; }
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
  double energy_update_period_s() const override;
  // nvmlDeviceGetTotalEnergyConsumption's counter is an unsigned long long of mJ: 2^64 mJ. The
  // integrated energy of a GPU without the counter never wraps.
  std::optional<double> energy_counter_wrap_mj() const override;

 private:
  struct PowerIntegrator;
  std::shared_ptr<NvmlLibrary> library_;
  void* device_ = nullptr;  // nvmlDevice_t
  int cuda_index_ = 0;
  int nvml_index_ = 0;
  NvmlGpuOptions options_;
  std::string name_;
  std::vector<int> sm_clocks_mhz_, memory_clocks_mhz_;
  std::unique_ptr<PowerIntegrator> integrator_;  // only without an energy counter
};

// PCI bus id, UUID and name of every device NVML has, by NVML index.
std::vector<NvmlDeviceIdentity> nvml_device_identities(const NvmlLibrary& library);

// The driver indices of the GPUs this process sees, in CUDA order, matched by PCI bus id
// (cuda_order.hpp: CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER are honoured, ambiguity refused).
std::vector<int> cuda_visible_nvml_indices(const NvmlLibrary& library);

// The GPU CUDA calls `cuda_index` in this process. Throws DeviceError ("NVML not available: ...")
// without a driver, InputError when the index is out of range.
std::shared_ptr<NvmlGpu> open_nvml_gpu(int cuda_index, NvmlGpuOptions options = {});

}  // namespace kareus::runtime
