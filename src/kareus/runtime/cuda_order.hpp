// Which driver (NVML) device each CUDA ordinal of this process is. CUDA numbers devices fastest
// first unless CUDA_DEVICE_ORDER=PCI_BUS_ID, and CUDA_VISIBLE_DEVICES may list indices in that
// order or device UUIDs; NVML numbers them by PCI bus. So the ordinals are matched by PCI bus id,
// asked of the CUDA driver (libcuda.so.1, loaded at run time) where it loads; without it, the
// order is derived from the environment where that is unambiguous (PCI_BUS_ID order, identical
// GPUs, or UUIDs) and refused with an InputError saying what to set otherwise.
//
// Loading the CUDA driver calls cuInit(0) in this process (no context, no device memory); CUDA
// frameworks do the same at start-up.
//
// Thread-safety: pure functions, except cuda_pci_bus_ids (safe to call from any thread).
// Example:
//   std::vector<int> nvml = cuda_to_nvml_indices(environment, identities, cuda_pci_bus_ids());
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kareus::runtime {

// What NVML says of one device.
struct NvmlDeviceIdentity {
  int nvml_index = 0;
  std::string pci_bus_id;  // any case and domain width: "00000000:3B:00.0" or "0000:3b:00.0"
  std::string uuid;        // "GPU-8932f937-..."
  std::string name;        // "NVIDIA A100-SXM4-40GB"
};

struct CudaEnvironment {
  std::optional<std::string> visible_devices;  // CUDA_VISIBLE_DEVICES, when set
  std::optional<std::string> device_order;     // CUDA_DEVICE_ORDER, when set
  static CudaEnvironment from_process();
};

// The PCI bus id of each device this process's CUDA sees, in CUDA order (the driver applies
// CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER itself); nullopt when libcuda.so.1 cannot be loaded
// or initialised for a reason other than having no device.
std::optional<std::vector<std::string>> cuda_pci_bus_ids();

// "0000:3b:00.0" for any spelling of the same PCI address; the text itself when it is not one.
std::string normalize_pci_bus_id(std::string_view bus_id);

// The NVML index of each CUDA ordinal, in CUDA order. With `cuda_bus_ids` (from the CUDA driver)
// every ordinal is matched by PCI bus id; one matching no NVML device or several is an InputError.
// Without them, see the file comment. Entries of CUDA_VISIBLE_DEVICES are read up to the first
// invalid one, as CUDA does (with a warning).
std::vector<int> cuda_to_nvml_indices(const CudaEnvironment& environment,
                                      const std::vector<NvmlDeviceIdentity>& nvml,
                                      const std::optional<std::vector<std::string>>& cuda_bus_ids);

}  // namespace kareus::runtime
