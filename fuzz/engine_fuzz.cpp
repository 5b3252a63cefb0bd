// Engine files (data/engines/*.json, `--engine FILE`): read by load_engine_spec; an accepted engine
// gives every partition of the default job its host time under a sequential and an overlapped
// knob (and the overlapped one's host time exposed on the GPU), and an instruction its time from
// its GPU and host sums.
#include <cstddef>
#include <cstdint>

#include "fixtures.hpp"
#include "fuzz_support.hpp"
#include "kareus/engine/engine.hpp"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  kareus::fuzz::quiet_logs();
  kareus::fuzz::default_job();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace kareus;
  const auto path = fuzz::write_input(data, size, "engine.json");
  engine::EngineSpec spec;
  if (!fuzz::holds_contract("engine.json", [&] { spec = engine::load_engine_spec(path); })) return 0;
  fuzz::holds_contract("", [&] {
    double host_s = 0;
    for (const workload::Partition& p : fuzz::default_job().partitions) {
      host_s += engine::host_time_s(spec, p, {.freq_mhz = 1410});
      engine::exposed_host_time_s(spec, p, engine::IssuePath::kModules);
      if (p.collective && !p.slots.empty()) {
        const workload::Knob overlapped{1410, 16, p.slots.front().name};
        host_s += engine::host_time_s(spec, p, overlapped);
        engine::exposed_host_time_s(spec, p, engine::IssuePath::kLoop);
      }
    }
    engine::instruction_time_s(spec, 0.05, host_s);
  });
  return 0;
}
