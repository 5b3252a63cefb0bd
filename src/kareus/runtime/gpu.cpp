#include "kareus/runtime/gpu.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <set>

#include "kareus/runtime/nvml_gpu.hpp"

namespace kareus::runtime {

int nearest_clock_mhz(const std::vector<int>& supported_mhz, int clock_mhz) {
  int best = clock_mhz;
  long best_distance = -1;
  for (int c : supported_mhz) {
    long distance = std::labs(static_cast<long>(c) - clock_mhz);
    if (best_distance < 0 || distance < best_distance || (distance == best_distance && c > best)) {
      best = c;
      best_distance = distance;
    }
  }
  return best;
}

namespace {

std::string_view trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

}  // namespace

std::vector<int> visible_device_indices(const std::optional<std::string_view>& cuda_visible_devices,
                                        int device_count) {
  std::vector<int> visible;
  if (!cuda_visible_devices) {
    for (int i = 0; i < device_count; ++i) visible.push_back(i);
    return visible;
  }
  std::string_view rest = *cuda_visible_devices;
  std::set<int> seen;
  while (!rest.empty()) {
    std::size_t comma = rest.find(',');
    std::string_view entry = trim(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    if (entry.starts_with("GPU-") || entry.starts_with("MIG-")) {
      throw InputError({"", 0, 0, "CUDA_VISIBLE_DEVICES"},
                       fmt::format("device UUID '{}' is not supported; list device indices instead "
                                   "(nvidia-smi -L shows both)",
                                   entry));
    }
    int value = -1;
    bool is_number =
        !entry.empty() && entry.size() < 9 &&
        std::all_of(entry.begin(), entry.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (is_number) value = std::stoi(std::string(entry));
    if (!is_number || value >= device_count || seen.count(value)) {
      // CUDA itself stops at the first invalid entry; do the same so both agree on the numbering.
      spdlog::warn(
          "CUDA_VISIBLE_DEVICES='{}': entry '{}' is not a valid device index (the driver "
          "has {}); it and the entries after it are ignored, as CUDA does",
          *cuda_visible_devices, entry, device_count);
      break;
    }
    seen.insert(value);
    visible.push_back(value);
  }
  return visible;
}

GpuCollection::GpuCollection(std::vector<std::shared_ptr<Gpu>> gpus) : gpus_(std::move(gpus)) {
  for (std::size_t k = 0; k < gpus_.size(); ++k) {
    if (!gpus_[k]) throw InputError(fmt::format("GpuCollection: device {} is null", k));
    if (gpus_[k]->index() != static_cast<int>(k)) {
      throw InputError(fmt::format("GpuCollection: position {} holds the device with index {}", k,
                                   gpus_[k]->index()));
    }
  }
}

GpuCollection GpuCollection::open_nvml() {
  auto library = NvmlLibrary::load();
  std::vector<int> physical = cuda_visible_nvml_indices(*library);
  std::vector<std::shared_ptr<Gpu>> gpus;
  for (std::size_t k = 0; k < physical.size(); ++k) {
    gpus.push_back(std::make_shared<NvmlGpu>(library, static_cast<int>(k), physical[k]));
  }
  return GpuCollection(std::move(gpus));
}

std::shared_ptr<Gpu> GpuCollection::shared(std::size_t cuda_index) const {
  if (cuda_index >= gpus_.size()) {
    throw InputError(fmt::format("GPU index {} is out of range: this process sees {} GPU{}",
                                 cuda_index, gpus_.size(), gpus_.size() == 1 ? "" : "s"));
  }
  return gpus_[cuda_index];
}

}  // namespace kareus::runtime
