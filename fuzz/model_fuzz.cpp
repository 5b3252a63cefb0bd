// Model files (data/models/*.json, `--model FILE`): read by load_model; an accepted model is split
// over the default parallel configuration and each parallel shape it takes (TP 1, PP 1 and the
// default TP 8, PP 2), its partitions built and each costed by the simulated evaluator.
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
  const auto path = fuzz::write_input(data, size, "model.json");
  workload::ModelSpec model;
  if (!fuzz::holds_contract("model.json", [&] { model = workload::load_model(path.string()); })) return 0;
  const hardware::GpuSpec& gpu = fuzz::default_job().gpu;
  const evaluate::SimulatedEvaluator sim(gpu);
  workload::ParallelConfig small;
  small.tp = 1;
  small.pp = 1;
  small.microbatch_size = 2;
  small.seq_len = 512;
  for (const workload::ParallelConfig& shape : {workload::ParallelConfig{}, small}) {
    fuzz::holds_contract("", [&] {
      const workload::ParallelConfig parallel = workload::validated(model, shape);
      std::vector<workload::Partition> parts = workload::build_partitions(model, parallel);
      for (int s = 0; s < parallel.pp; ++s) {
        for (auto& p : workload::non_partition_work(model, parallel, s)) parts.push_back(std::move(p));
      }
      for (const workload::Partition& p : parts) {
        workload::Knob knob{.freq_mhz = gpu.max_clock_mhz};
        if (p.collective) knob.sms = 16;
        if (p.collective && !p.slots.empty()) knob.slot = p.slots.back().name;
        sim.evaluate(p, knob);
      }
    });
  }
  return 0;
}
