#include "kareus/runtime/nvml_gpu.hpp"

#include <dlfcn.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

namespace kareus::runtime {
namespace {

// The subset of nvml.h Kareus uses, declared here so that no NVML header is needed to build.
// Values and signatures are NVML's stable ABI (nvml.h, API version 2 entry points).
using nvmlReturn_t = int;
using nvmlDevice_t = struct nvmlDevice_st*;
constexpr nvmlReturn_t kNvmlSuccess = 0;
constexpr nvmlReturn_t kNvmlErrorNotSupported = 3;
constexpr nvmlReturn_t kNvmlErrorInsufficientSize = 7;
constexpr int kNvmlClockSm = 1;                     // nvmlClockType_t NVML_CLOCK_SM
constexpr unsigned kNvmlDeviceNameBufferSize = 96;  // NVML_DEVICE_NAME_V2_BUFFER_SIZE
constexpr unsigned kNvmlDeviceUuidBufferSize = 96;  // NVML_DEVICE_UUID_V2_BUFFER_SIZE

// nvmlPciInfo_t as nvmlDeviceGetPciInfo_v3 fills it.
struct NvmlPciInfo {
  char bus_id_legacy[16];
  unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
  char bus_id[32];
};

enum class NvmlErrorKind { kGeneric, kPermission, kNotSupported, kLost };

struct NvmlErrorInfo {
  int code;
  const char* name;
  NvmlErrorKind kind;
  const char* advice;  // appended to the message; empty when NVML's text says enough
};

// The one place NVML's error codes become Kareus errors.
constexpr NvmlErrorInfo kNvmlErrors[] = {
    {1, "NVML_ERROR_UNINITIALIZED", NvmlErrorKind::kGeneric, ""},
    {2, "NVML_ERROR_INVALID_ARGUMENT", NvmlErrorKind::kGeneric, ""},
    {3, "NVML_ERROR_NOT_SUPPORTED", NvmlErrorKind::kNotSupported,
     "this GPU or driver does not support the call"},
    {4, "NVML_ERROR_NO_PERMISSION", NvmlErrorKind::kPermission,
     "changing GPU clocks and power limits needs root or the CAP_SYS_ADMIN capability: run the job "
     "as root, or give its container SYS_ADMIN (docker run --cap-add SYS_ADMIN)"},
    {5, "NVML_ERROR_ALREADY_INITIALIZED", NvmlErrorKind::kGeneric, ""},
    {6, "NVML_ERROR_NOT_FOUND", NvmlErrorKind::kGeneric, ""},
    {7, "NVML_ERROR_INSUFFICIENT_SIZE", NvmlErrorKind::kGeneric, ""},
    {8, "NVML_ERROR_INSUFFICIENT_POWER", NvmlErrorKind::kGeneric, "check the GPU's power cables"},
    {9, "NVML_ERROR_DRIVER_NOT_LOADED", NvmlErrorKind::kGeneric,
     "the NVIDIA kernel driver is not loaded"},
    {10, "NVML_ERROR_TIMEOUT", NvmlErrorKind::kGeneric, ""},
    {11, "NVML_ERROR_IRQ_ISSUE", NvmlErrorKind::kGeneric, ""},
    {12, "NVML_ERROR_LIBRARY_NOT_FOUND", NvmlErrorKind::kGeneric, ""},
    {13, "NVML_ERROR_FUNCTION_NOT_FOUND", NvmlErrorKind::kNotSupported,
     "the installed driver is too old for this call"},
    {14, "NVML_ERROR_CORRUPTED_INFOROM", NvmlErrorKind::kGeneric, ""},
    {15, "NVML_ERROR_GPU_IS_LOST", NvmlErrorKind::kLost,
     "the GPU fell off the bus; it needs a reset or a reboot"},
    {16, "NVML_ERROR_RESET_REQUIRED", NvmlErrorKind::kGeneric, ""},
    {17, "NVML_ERROR_OPERATING_SYSTEM", NvmlErrorKind::kGeneric,
     "the operating system or a cgroup blocked access to the GPU"},
    {18, "NVML_ERROR_LIB_RM_VERSION_MISMATCH", NvmlErrorKind::kGeneric,
     "libnvidia-ml and the kernel driver are different versions; reload the driver or reboot"},
    {19, "NVML_ERROR_IN_USE", NvmlErrorKind::kGeneric, ""},
    {20, "NVML_ERROR_MEMORY", NvmlErrorKind::kGeneric, ""},
    {21, "NVML_ERROR_NO_DATA", NvmlErrorKind::kGeneric, ""},
    {22, "NVML_ERROR_VGPU_ECC_NOT_SUPPORTED", NvmlErrorKind::kNotSupported, ""},
    {23, "NVML_ERROR_INSUFFICIENT_RESOURCES", NvmlErrorKind::kGeneric, ""},
    {24, "NVML_ERROR_FREQ_NOT_SUPPORTED", NvmlErrorKind::kNotSupported,
     "the requested clock is not one the GPU supports"},
    {25, "NVML_ERROR_ARGUMENT_VERSION_MISMATCH", NvmlErrorKind::kGeneric, ""},
    {26, "NVML_ERROR_DEPRECATED", NvmlErrorKind::kNotSupported, ""},
    {27, "NVML_ERROR_NOT_READY", NvmlErrorKind::kGeneric, ""},
    {28, "NVML_ERROR_GPU_NOT_FOUND", NvmlErrorKind::kGeneric, ""},
    {29, "NVML_ERROR_INVALID_STATE", NvmlErrorKind::kGeneric, ""},
    {999, "NVML_ERROR_UNKNOWN", NvmlErrorKind::kGeneric, ""},
};

template <typename Fn>
Fn resolve(void* handle, const char* symbol, const std::string& path) {
  void* address = ::dlsym(handle, symbol);
  if (!address) {
    throw DeviceError(
        fmt::format("NVML not available: {} has no function {} (driver too old?)", path, symbol));
  }
  // dlsym returns an object pointer; copying the bits is the portable way to get a function
  // pointer.
  Fn fn;
  static_assert(sizeof(fn) == sizeof(address));
  std::memcpy(&fn, &address, sizeof(fn));
  return fn;
}

}  // namespace

struct NvmlLibrary::Api {
  nvmlReturn_t (*init_v2)();
  nvmlReturn_t (*shutdown)();
  const char* (*error_string)(nvmlReturn_t);
  nvmlReturn_t (*device_get_count_v2)(unsigned*);
  nvmlReturn_t (*device_get_handle_by_index_v2)(unsigned, nvmlDevice_t*);
  nvmlReturn_t (*device_get_name)(nvmlDevice_t, char*, unsigned);
  nvmlReturn_t (*device_get_supported_memory_clocks)(nvmlDevice_t, unsigned*, unsigned*);
  nvmlReturn_t (*device_get_supported_graphics_clocks)(nvmlDevice_t, unsigned, unsigned*,
                                                       unsigned*);
  nvmlReturn_t (*device_get_clock_info)(nvmlDevice_t, int, unsigned*);
  nvmlReturn_t (*device_set_gpu_locked_clocks)(nvmlDevice_t, unsigned, unsigned);
  nvmlReturn_t (*device_reset_gpu_locked_clocks)(nvmlDevice_t);
  nvmlReturn_t (*device_set_memory_locked_clocks)(nvmlDevice_t, unsigned, unsigned);
  nvmlReturn_t (*device_reset_memory_locked_clocks)(nvmlDevice_t);
  nvmlReturn_t (*device_get_power_management_limit_constraints)(nvmlDevice_t, unsigned*, unsigned*);
  nvmlReturn_t (*device_get_power_management_default_limit)(nvmlDevice_t, unsigned*);
  nvmlReturn_t (*device_get_power_management_limit)(nvmlDevice_t, unsigned*);
  nvmlReturn_t (*device_set_power_management_limit)(nvmlDevice_t, unsigned);
  nvmlReturn_t (*device_get_total_energy_consumption)(nvmlDevice_t, unsigned long long*);
  nvmlReturn_t (*device_get_power_usage)(nvmlDevice_t, unsigned*);
  nvmlReturn_t (*device_get_pci_info_v3)(nvmlDevice_t, NvmlPciInfo*);
  nvmlReturn_t (*device_get_uuid)(nvmlDevice_t, char*, unsigned);
};

void throw_nvml_error(int code, std::string_view error_string, std::string_view operation,
                      int gpu_index) {
  const NvmlErrorInfo* info = nullptr;
  for (const auto& entry : kNvmlErrors) {
    if (entry.code == code) info = &entry;
  }
  std::string message =
      fmt::format("GPU {}: {} failed: {} ({})", gpu_index, operation, error_string,
                  info ? info->name : fmt::format("NVML error {}", code));
  if (info && *info->advice) message += fmt::format("; {}", info->advice);
  NvmlErrorKind kind = info ? info->kind : NvmlErrorKind::kGeneric;
  if (kind == NvmlErrorKind::kPermission) throw GpuPermissionError(message);
  if (kind == NvmlErrorKind::kNotSupported) throw GpuNotSupportedError(message);
  if (kind == NvmlErrorKind::kLost) throw GpuLostError(message);
  throw DeviceError(message);
}

std::shared_ptr<NvmlLibrary> NvmlLibrary::load(const std::string& path) {
  static std::mutex mutex;
  static std::map<std::string, std::weak_ptr<NvmlLibrary>> loaded;
  std::lock_guard lock(mutex);
  if (auto existing = loaded[path].lock()) return existing;

  ::dlerror();
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = ::dlerror();
    throw DeviceError(
        fmt::format("NVML not available: {} (is the NVIDIA driver installed? this "
                    "machine may have no NVIDIA GPU)",
                    why ? why : path));
  }
  auto api = std::make_unique<Api>();
  try {
    api->init_v2 = resolve<decltype(api->init_v2)>(handle, "nvmlInit_v2", path);
    api->shutdown = resolve<decltype(api->shutdown)>(handle, "nvmlShutdown", path);
    api->error_string = resolve<decltype(api->error_string)>(handle, "nvmlErrorString", path);
    api->device_get_count_v2 =
        resolve<decltype(api->device_get_count_v2)>(handle, "nvmlDeviceGetCount_v2", path);
    api->device_get_handle_by_index_v2 = resolve<decltype(api->device_get_handle_by_index_v2)>(
        handle, "nvmlDeviceGetHandleByIndex_v2", path);
    api->device_get_name =
        resolve<decltype(api->device_get_name)>(handle, "nvmlDeviceGetName", path);
    api->device_get_supported_memory_clocks =
        resolve<decltype(api->device_get_supported_memory_clocks)>(
            handle, "nvmlDeviceGetSupportedMemoryClocks", path);
    api->device_get_supported_graphics_clocks =
        resolve<decltype(api->device_get_supported_graphics_clocks)>(
            handle, "nvmlDeviceGetSupportedGraphicsClocks", path);
    api->device_get_clock_info =
        resolve<decltype(api->device_get_clock_info)>(handle, "nvmlDeviceGetClockInfo", path);
    api->device_set_gpu_locked_clocks = resolve<decltype(api->device_set_gpu_locked_clocks)>(
        handle, "nvmlDeviceSetGpuLockedClocks", path);
    api->device_reset_gpu_locked_clocks = resolve<decltype(api->device_reset_gpu_locked_clocks)>(
        handle, "nvmlDeviceResetGpuLockedClocks", path);
    api->device_set_memory_locked_clocks = resolve<decltype(api->device_set_memory_locked_clocks)>(
        handle, "nvmlDeviceSetMemoryLockedClocks", path);
    api->device_reset_memory_locked_clocks =
        resolve<decltype(api->device_reset_memory_locked_clocks)>(
            handle, "nvmlDeviceResetMemoryLockedClocks", path);
    api->device_get_power_management_limit_constraints =
        resolve<decltype(api->device_get_power_management_limit_constraints)>(
            handle, "nvmlDeviceGetPowerManagementLimitConstraints", path);
    api->device_get_power_management_default_limit =
        resolve<decltype(api->device_get_power_management_default_limit)>(
            handle, "nvmlDeviceGetPowerManagementDefaultLimit", path);
    api->device_get_power_management_limit =
        resolve<decltype(api->device_get_power_management_limit)>(
            handle, "nvmlDeviceGetPowerManagementLimit", path);
    api->device_set_power_management_limit =
        resolve<decltype(api->device_set_power_management_limit)>(
            handle, "nvmlDeviceSetPowerManagementLimit", path);
    api->device_get_total_energy_consumption =
        resolve<decltype(api->device_get_total_energy_consumption)>(
            handle, "nvmlDeviceGetTotalEnergyConsumption", path);
    api->device_get_power_usage =
        resolve<decltype(api->device_get_power_usage)>(handle, "nvmlDeviceGetPowerUsage", path);
    api->device_get_pci_info_v3 =
        resolve<decltype(api->device_get_pci_info_v3)>(handle, "nvmlDeviceGetPciInfo_v3", path);
    api->device_get_uuid =
        resolve<decltype(api->device_get_uuid)>(handle, "nvmlDeviceGetUUID", path);
    nvmlReturn_t status = api->init_v2();
    if (status != kNvmlSuccess) {
      throw DeviceError(
          fmt::format("NVML not available: nvmlInit_v2 failed: {}", api->error_string(status)));
    }
  } catch (...) {
    ::dlclose(handle);
    throw;
  }
  std::shared_ptr<NvmlLibrary> library(new NvmlLibrary(handle, std::move(api)));
  loaded[path] = library;
  return library;
}

NvmlLibrary::NvmlLibrary(void* handle, std::unique_ptr<Api> api)
    : handle_(handle), api_(std::move(api)) {}

NvmlLibrary::~NvmlLibrary() {
  api_->shutdown();
  ::dlclose(handle_);
}

int NvmlLibrary::device_count() const {
  unsigned count = 0;
  check(api_->device_get_count_v2(&count), "nvmlDeviceGetCount_v2", -1);
  return static_cast<int>(count);
}

void NvmlLibrary::check(int code, std::string_view operation, int gpu_index) const {
  if (code == kNvmlSuccess) return;
  throw_nvml_error(code, api_->error_string(code), operation, gpu_index);
}

// Energy for GPUs without the counter: power sampled every period, integrated by the trapezoid
// rule on a background thread; a read adds the stretch since the last sample at its power.
struct NvmlGpu::PowerIntegrator {
  std::mutex mutex;
  std::condition_variable wake;
  bool stop = false;
  double energy_mj = 0;
  double last_power_mw = 0;
  std::chrono::steady_clock::time_point last_sample;
  std::thread thread;

  double read_mj() {
    std::lock_guard lock(mutex);
    double since_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - last_sample).count();
    return energy_mj + last_power_mw * since_s;
  }
};

NvmlGpu::NvmlGpu(std::shared_ptr<NvmlLibrary> library, int cuda_index, int nvml_index,
                 NvmlGpuOptions options)
    : library_(std::move(library)),
      cuda_index_(cuda_index),
      nvml_index_(nvml_index),
      options_(options) {
  if (!library_) throw InputError("NvmlGpu: no NVML library");
  const auto& api = library_->api();
  nvmlDevice_t device = nullptr;
  library_->check(api.device_get_handle_by_index_v2(static_cast<unsigned>(nvml_index), &device),
                  "nvmlDeviceGetHandleByIndex_v2", cuda_index_);
  device_ = device;

  char name[kNvmlDeviceNameBufferSize] = {};
  library_->check(api.device_get_name(device, name, kNvmlDeviceNameBufferSize), "nvmlDeviceGetName",
                  cuda_index_);
  name_ = name;

  // NVML's two-call protocol: ask for the count, then fill a buffer of that size.
  auto clock_list = [&](auto&& call, const char* what) {
    unsigned count = 0;
    nvmlReturn_t status = call(&count, nullptr);
    std::vector<unsigned> values;
    if (status == kNvmlErrorInsufficientSize || (status == kNvmlSuccess && count > 0)) {
      values.resize(count);
      status = call(&count, values.data());
      values.resize(count);
    }
    if (status == kNvmlErrorNotSupported) return std::vector<int>{};
    library_->check(status, what, cuda_index_);
    std::vector<int> out(values.begin(), values.end());
    std::sort(out.rbegin(), out.rend());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
  };
  memory_clocks_mhz_ = clock_list(
      [&](unsigned* count, unsigned* values) {
        return api.device_get_supported_memory_clocks(device, count, values);
      },
      "nvmlDeviceGetSupportedMemoryClocks");
  if (!memory_clocks_mhz_.empty()) {
    // The SM clocks the controller can use are those at the highest memory clock, which it locks.
    unsigned memory_mhz = static_cast<unsigned>(memory_clocks_mhz_.front());
    sm_clocks_mhz_ = clock_list(
        [&](unsigned* count, unsigned* values) {
          return api.device_get_supported_graphics_clocks(device, memory_mhz, count, values);
        },
        "nvmlDeviceGetSupportedGraphicsClocks");
  }

  unsigned long long energy = 0;
  nvmlReturn_t status = api.device_get_total_energy_consumption(device, &energy);
  if (status == kNvmlErrorNotSupported) {
    spdlog::info("GPU {} ({}) has no energy counter; integrating its power every {} s instead",
                 cuda_index_, name_, options_.power_sample_period_s);
    integrator_ = std::make_unique<PowerIntegrator>();
    integrator_->last_power_mw = instant_power_mw();
    integrator_->last_sample = std::chrono::steady_clock::now();
    integrator_->thread = std::thread([this] {
      auto& in = *integrator_;
      auto period = std::chrono::duration<double>(options_.power_sample_period_s);
      bool warned = false;
      std::unique_lock lock(in.mutex);
      while (!in.wake.wait_for(lock, period, [&] { return in.stop; })) {
        lock.unlock();
        std::optional<double> power_mw;
        try {
          power_mw = instant_power_mw();
        } catch (const DeviceError& e) {
          if (!warned) spdlog::warn("{}; holding the last power reading", e.what());
          warned = true;
        }
        auto now = std::chrono::steady_clock::now();
        lock.lock();
        double dt_s = std::chrono::duration<double>(now - in.last_sample).count();
        double next_mw = power_mw.value_or(in.last_power_mw);
        in.energy_mj += 0.5 * (in.last_power_mw + next_mw) * dt_s;
        in.last_power_mw = next_mw;
        in.last_sample = now;
      }
    });
  } else {
    library_->check(status, "nvmlDeviceGetTotalEnergyConsumption", cuda_index_);
  }
}

NvmlGpu::~NvmlGpu() {
  if (integrator_) {
    {
      std::lock_guard lock(integrator_->mutex);
      integrator_->stop = true;
    }
    integrator_->wake.notify_all();
    integrator_->thread.join();
  }
}

bool NvmlGpu::has_energy_counter() const {
  return integrator_ == nullptr;
}

int NvmlGpu::current_sm_clock_mhz() const {
  unsigned mhz = 0;
  library_->check(
      library_->api().device_get_clock_info(static_cast<nvmlDevice_t>(device_), kNvmlClockSm, &mhz),
      "nvmlDeviceGetClockInfo", cuda_index_);
  return static_cast<int>(mhz);
}

void NvmlGpu::set_locked_sm_clocks(int min_clock_mhz, int max_clock_mhz) {
  if (min_clock_mhz <= 0 || max_clock_mhz < min_clock_mhz) {
    throw InputError(fmt::format("GPU {}: cannot lock the SM clock to [{}, {}] MHz", cuda_index_,
                                 min_clock_mhz, max_clock_mhz));
  }
  library_->check(library_->api().device_set_gpu_locked_clocks(
                      static_cast<nvmlDevice_t>(device_), static_cast<unsigned>(min_clock_mhz),
                      static_cast<unsigned>(max_clock_mhz)),
                  "nvmlDeviceSetGpuLockedClocks", cuda_index_);
}

void NvmlGpu::reset_locked_sm_clocks() {
  library_->check(
      library_->api().device_reset_gpu_locked_clocks(static_cast<nvmlDevice_t>(device_)),
      "nvmlDeviceResetGpuLockedClocks", cuda_index_);
}

void NvmlGpu::lock_memory_clock(int clock_mhz) {
  if (clock_mhz <= 0) {
    throw InputError(
        fmt::format("GPU {}: cannot lock the memory clock to {} MHz", cuda_index_, clock_mhz));
  }
  auto mhz = static_cast<unsigned>(clock_mhz);
  library_->check(
      library_->api().device_set_memory_locked_clocks(static_cast<nvmlDevice_t>(device_), mhz, mhz),
      "nvmlDeviceSetMemoryLockedClocks", cuda_index_);
}

void NvmlGpu::reset_memory_clock() {
  library_->check(
      library_->api().device_reset_memory_locked_clocks(static_cast<nvmlDevice_t>(device_)),
      "nvmlDeviceResetMemoryLockedClocks", cuda_index_);
}

PowerLimitConstraints NvmlGpu::power_limit_constraints() const {
  unsigned min_mw = 0, max_mw = 0, default_mw = 0;
  auto device = static_cast<nvmlDevice_t>(device_);
  library_->check(
      library_->api().device_get_power_management_limit_constraints(device, &min_mw, &max_mw),
      "nvmlDeviceGetPowerManagementLimitConstraints", cuda_index_);
  library_->check(library_->api().device_get_power_management_default_limit(device, &default_mw),
                  "nvmlDeviceGetPowerManagementDefaultLimit", cuda_index_);
  return {static_cast<int>(min_mw), static_cast<int>(max_mw), static_cast<int>(default_mw)};
}

int NvmlGpu::power_limit_mw() const {
  unsigned limit = 0;
  library_->check(
      library_->api().device_get_power_management_limit(static_cast<nvmlDevice_t>(device_), &limit),
      "nvmlDeviceGetPowerManagementLimit", cuda_index_);
  return static_cast<int>(limit);
}

void NvmlGpu::set_power_limit_mw(int power_limit_mw) {
  if (power_limit_mw <= 0) {
    throw InputError(
        fmt::format("GPU {}: cannot set the power limit to {} mW", cuda_index_, power_limit_mw));
  }
  library_->check(library_->api().device_set_power_management_limit(
                      static_cast<nvmlDevice_t>(device_), static_cast<unsigned>(power_limit_mw)),
                  "nvmlDeviceSetPowerManagementLimit", cuda_index_);
}

void NvmlGpu::reset_power_limit() {
  set_power_limit_mw(power_limit_constraints().default_power_limit_mw);
}

double NvmlGpu::total_energy_mj() const {
  if (integrator_) return integrator_->read_mj();
  unsigned long long energy = 0;
  library_->check(library_->api().device_get_total_energy_consumption(
                      static_cast<nvmlDevice_t>(device_), &energy),
                  "nvmlDeviceGetTotalEnergyConsumption", cuda_index_);
  return static_cast<double>(energy);
}

double NvmlGpu::instant_power_mw() const {
  unsigned power = 0;
  library_->check(
      library_->api().device_get_power_usage(static_cast<nvmlDevice_t>(device_), &power),
      "nvmlDeviceGetPowerUsage", cuda_index_);
  return static_cast<double>(power);
}

std::optional<double> NvmlGpu::energy_counter_wrap_mj() const {
  if (integrator_) return std::nullopt;
  return 18446744073709551616.0;  // 2^64
}

double NvmlGpu::energy_update_period_s() const {
  return integrator_ ? options_.power_sample_period_s : options_.energy_update_period_s;
}

std::vector<NvmlDeviceIdentity> nvml_device_identities(const NvmlLibrary& library) {
  const auto& api = library.api();
  std::vector<NvmlDeviceIdentity> identities;
  for (int index = 0; index < library.device_count(); ++index) {
    nvmlDevice_t device = nullptr;
    library.check(api.device_get_handle_by_index_v2(static_cast<unsigned>(index), &device),
                  "nvmlDeviceGetHandleByIndex_v2", index);
    NvmlPciInfo pci{};
    library.check(api.device_get_pci_info_v3(device, &pci), "nvmlDeviceGetPciInfo_v3", index);
    char uuid[kNvmlDeviceUuidBufferSize] = {};
    library.check(api.device_get_uuid(device, uuid, kNvmlDeviceUuidBufferSize), "nvmlDeviceGetUUID",
                  index);
    char name[kNvmlDeviceNameBufferSize] = {};
    library.check(api.device_get_name(device, name, kNvmlDeviceNameBufferSize), "nvmlDeviceGetName",
                  index);
    pci.bus_id[sizeof(pci.bus_id) - 1] = '\0';
    identities.push_back({index, pci.bus_id, uuid, name});
  }
  return identities;
}

std::vector<int> cuda_visible_nvml_indices(const NvmlLibrary& library) {
  return cuda_to_nvml_indices(CudaEnvironment::from_process(), nvml_device_identities(library),
                              cuda_pci_bus_ids());
}

std::shared_ptr<NvmlGpu> open_nvml_gpu(int cuda_index, NvmlGpuOptions options) {
  auto library = NvmlLibrary::load();
  std::vector<int> physical = cuda_visible_nvml_indices(*library);
  if (cuda_index < 0 || cuda_index >= static_cast<int>(physical.size())) {
    throw InputError(fmt::format("GPU index {} is out of range: this process sees {} GPU{}",
                                 cuda_index, physical.size(), physical.size() == 1 ? "" : "s"));
  }
  return std::make_shared<NvmlGpu>(library, cuda_index,
                                   physical[static_cast<std::size_t>(cuda_index)], options);
}

}  // namespace kareus::runtime
