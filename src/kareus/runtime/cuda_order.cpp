#include "kareus/runtime/cuda_order.hpp"

#include <dlfcn.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>

#include "kareus/core/error.hpp"

namespace kareus::runtime {
namespace {

std::string_view trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// The CUDA driver API subset used (cuda.h's stable ABI), resolved at run time.
using CUresult = int;
constexpr CUresult kCudaSuccess = 0;
constexpr CUresult kCudaErrorNoDevice = 100;

template <typename Fn>
Fn symbol(void* handle, const char* name) {
  void* address = ::dlsym(handle, name);
  Fn fn = nullptr;
  if (address) std::memcpy(&fn, &address, sizeof(fn));
  return fn;
}

std::optional<std::vector<std::string>> query_cuda_pci_bus_ids() {
  void* handle = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!handle) return std::nullopt;  // never closed: the driver does not like being unloaded
  auto init = symbol<CUresult (*)(unsigned)>(handle, "cuInit");
  auto count_of = symbol<CUresult (*)(int*)>(handle, "cuDeviceGetCount");
  auto get = symbol<CUresult (*)(int*, int)>(handle, "cuDeviceGet");
  auto bus_id_of = symbol<CUresult (*)(char*, int, int)>(handle, "cuDeviceGetPCIBusId");
  if (!init || !count_of || !get || !bus_id_of) return std::nullopt;
  CUresult status = init(0);
  if (status == kCudaErrorNoDevice) return std::vector<std::string>{};
  if (status != kCudaSuccess) {
    spdlog::debug("cuInit failed ({}); mapping CUDA ordinals from the environment", status);
    return std::nullopt;
  }
  int count = 0;
  if (count_of(&count) != kCudaSuccess) return std::nullopt;
  std::vector<std::string> ids;
  for (int ordinal = 0; ordinal < count; ++ordinal) {
    int device = 0;
    char bus_id[32] = {};
    if (get(&device, ordinal) != kCudaSuccess ||
        bus_id_of(bus_id, static_cast<int>(sizeof(bus_id)), device) != kCudaSuccess) {
      return std::nullopt;
    }
    ids.emplace_back(bus_id);
  }
  return ids;
}

}  // namespace

CudaEnvironment CudaEnvironment::from_process() {
  CudaEnvironment environment;
  if (const char* value = std::getenv("CUDA_VISIBLE_DEVICES")) environment.visible_devices = value;
  if (const char* value = std::getenv("CUDA_DEVICE_ORDER")) environment.device_order = value;
  return environment;
}

std::optional<std::vector<std::string>> cuda_pci_bus_ids() {
  static std::once_flag once;
  static std::optional<std::vector<std::string>> ids;
  std::call_once(once, [] { ids = query_cuda_pci_bus_ids(); });
  return ids;
}

std::string normalize_pci_bus_id(std::string_view bus_id) {
  std::string text(trim(bus_id));
  unsigned domain = 0, bus = 0, device = 0, function = 0;
  char tail = 0;
  if (std::sscanf(text.c_str(), "%x:%x:%x.%x%c", &domain, &bus, &device, &function, &tail) == 4) {
    return fmt::format("{:04x}:{:02x}:{:02x}.{:x}", domain, bus, device, function);
  }
  return lower(text);
}

std::vector<int> cuda_to_nvml_indices(const CudaEnvironment& environment,
                                      const std::vector<NvmlDeviceIdentity>& nvml,
                                      const std::optional<std::vector<std::string>>& cuda_bus_ids) {
  std::vector<int> mapped;
  if (cuda_bus_ids) {
    for (std::size_t ordinal = 0; ordinal < cuda_bus_ids->size(); ++ordinal) {
      std::string wanted = normalize_pci_bus_id((*cuda_bus_ids)[ordinal]);
      std::vector<int> matches;
      for (const auto& d : nvml) {
        if (normalize_pci_bus_id(d.pci_bus_id) == wanted) matches.push_back(d.nvml_index);
      }
      if (matches.size() != 1) {
        throw InputError(
            {"", 0, 0, "CUDA_VISIBLE_DEVICES"},
            fmt::format("CUDA device {} (PCI {}) matches {} of NVML's {} devices; "
                        "which GPU it is cannot be told, so its clocks are not touched",
                        ordinal, wanted, matches.size(), nvml.size()));
      }
      mapped.push_back(matches.front());
    }
    return mapped;
  }

  // No CUDA driver to ask: CUDA's own enumeration order, where the environment fixes it.
  std::vector<NvmlDeviceIdentity> by_bus = nvml;
  std::sort(by_bus.begin(), by_bus.end(), [](const auto& a, const auto& b) {
    return normalize_pci_bus_id(a.pci_bus_id) < normalize_pci_bus_id(b.pci_bus_id);
  });
  const bool pci_order =
      environment.device_order && trim(*environment.device_order) == "PCI_BUS_ID";
  // FASTEST_FIRST (the default) ranks by speed and breaks ties by PCI bus id, so identical GPUs
  // come in bus order; different ones come in an order only the driver knows.
  const bool identical = std::all_of(nvml.begin(), nvml.end(),
                                     [&](const auto& d) { return d.name == nvml.front().name; });
  const bool order_known = pci_order || identical || nvml.size() <= 1;
  auto unknown_order = [&](std::string_view why) {
    std::set<std::string> names;
    for (const auto& d : nvml) names.insert(d.name);
    return InputError(
        {"", 0, 0, "CUDA_DEVICE_ORDER"},
        fmt::format("{}: CUDA numbers these different GPUs ({}) fastest first, and without the "
                    "CUDA driver (libcuda.so.1) which ordinal is which GPU cannot be told; set "
                    "CUDA_DEVICE_ORDER=PCI_BUS_ID, or list the GPUs by UUID in "
                    "CUDA_VISIBLE_DEVICES (nvidia-smi -L shows them)",
                    why, fmt::join(names, ", ")));
  };
  if (!environment.visible_devices) {
    if (!order_known) throw unknown_order("CUDA_VISIBLE_DEVICES is unset");
    for (const auto& d : by_bus) mapped.push_back(d.nvml_index);
    return mapped;
  }
  const std::string& value = *environment.visible_devices;
  std::string_view rest = value;
  std::set<int> seen;
  auto stop_at = [&](std::string_view entry, std::string_view why) {
    // CUDA itself stops at the first invalid entry; do the same so both agree on the numbering.
    spdlog::warn(
        "CUDA_VISIBLE_DEVICES='{}': entry '{}' {}; it and the entries after it are "
        "ignored, as CUDA does",
        value, entry, why);
  };
  while (!rest.empty()) {
    std::size_t comma = rest.find(',');
    std::string_view entry = trim(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    if (entry.starts_with("MIG-")) {
      throw InputError({"", 0, 0, "CUDA_VISIBLE_DEVICES"},
                       fmt::format("MIG instance '{}' can be mapped to its GPU only through the "
                                   "CUDA driver (libcuda.so.1), which is not loadable here",
                                   entry));
    }
    int nvml_index = -1;
    if (entry.starts_with("GPU-")) {
      std::vector<int> matches;
      for (const auto& d : nvml) {
        if (lower(d.uuid).starts_with(lower(entry))) matches.push_back(d.nvml_index);
      }
      if (matches.size() > 1) {
        throw InputError({"", 0, 0, "CUDA_VISIBLE_DEVICES"},
                         fmt::format("UUID prefix '{}' names {} GPUs; give more of the UUID", entry,
                                     matches.size()));
      }
      if (matches.empty()) {
        stop_at(entry, "is no GPU's UUID");
        break;
      }
      nvml_index = matches.front();
    } else {
      bool is_number =
          !entry.empty() && entry.size() < 9 &&
          std::all_of(entry.begin(), entry.end(), [](char c) { return c >= '0' && c <= '9'; });
      int ordinal = is_number ? std::stoi(std::string(entry)) : -1;
      if (!is_number || ordinal >= static_cast<int>(nvml.size())) {
        stop_at(entry, fmt::format("is not a valid device index (the driver has {})", nvml.size()));
        break;
      }
      if (!order_known) throw unknown_order(fmt::format("CUDA_VISIBLE_DEVICES='{}'", value));
      nvml_index = by_bus[static_cast<std::size_t>(ordinal)].nvml_index;
    }
    if (!seen.insert(nvml_index).second) {
      stop_at(entry, "repeats a device");
      break;
    }
    mapped.push_back(nvml_index);
  }
  return mapped;
}

}  // namespace kareus::runtime
