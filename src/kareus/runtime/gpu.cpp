#include "kareus/runtime/gpu.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>

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
