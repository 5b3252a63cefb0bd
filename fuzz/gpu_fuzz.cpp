// GPU files (data/gpus/*.json, `--gpu FILE`): read by load_gpu_spec; an accepted GPU must write
// back to the same spec, and the simulated evaluator costs the default job's partitions on it at
// its lowest and highest clock.
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "fixtures.hpp"
#include "fuzz_support.hpp"
#include "kareus/evaluate/simulated.hpp"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  kareus::fuzz::quiet_logs();
  kareus::fuzz::default_job();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace kareus;
  const auto path = fuzz::write_input(data, size, "gpu.json");
  hardware::GpuSpec gpu;
  if (!fuzz::holds_contract("gpu.json", [&] { gpu = hardware::load_gpu_spec(path); })) return 0;
  fuzz::holds_contract("gpu.json", [&] {
    if (hardware::gpu_spec_from_json(hardware::to_json(gpu), "gpu.json") != gpu) {
      fuzz::finding("gpu", "to_json does not read back to the same GpuSpec");
    }
  });
  const evaluate::SimulatedEvaluator sim(gpu);
  for (const workload::Partition& p : fuzz::default_job().partitions) {
    for (double freq : {gpu.min_clock_mhz(), gpu.max_clock_mhz}) {
      workload::Knob knob{.freq_mhz = freq};
      if (p.collective) {
        if (gpu.sms < 2) continue;
        knob.sms = std::min(gpu.sms - 1, 16);
        if (!p.slots.empty()) knob.slot = p.slots.front().name;
      }
      fuzz::holds_contract("", [&] { sim.evaluate(p, knob); });
    }
  }
  return 0;
}
