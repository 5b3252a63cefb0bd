// plan.json and plans.json (docs/plan-format.md): read as `kareus simulate` and `kareus replay` read
// them (read_plan_set, which takes a plan or a plan set, and read_plan), validated by the one
// validator every consumer calls, and each accepted plan replayed by the event simulator.
#include <cstddef>
#include <cstdint>

#include "fuzz_support.hpp"
#include "kareus/plan/validate.hpp"
#include "kareus/sim/simulator.hpp"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  kareus::fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace kareus;
  const auto path = fuzz::write_input(data, size, "plans.json");
  std::vector<plan::Plan> plans;
  if (!fuzz::holds_contract("plans.json", [&] {
        plans = plan::read_plan_set(path);
        plan::validate_set(plans, "plans.json");
      })) {
    return 0;
  }
  fuzz::holds_contract("plans.json", [&] { plan::validate(plan::read_plan(path, std::size_t{0}), "plans.json"); });
  for (const plan::Plan& p : plans) {
    // The plain replay, which must give the plan's own figures, then one with everything the DAG
    // leaves out.
    fuzz::holds_contract("plans.json", [&] {
      const sim::SimulationResult exact = sim::simulate(p, {.plan_source = "plans.json", .alignment = sim::Alignment::kSync});
      if (exact.instructions.size() == 0) fuzz::finding("simulate", "no instructions replayed");
      sim::simulate(p, {.transfer_bytes = 32e6,
                        .link = [](int, int) { return sim::Link{.bandwidth_bps = 25e9, .latency_s = 5e-6}; },
                        .clock_switch_latency_s = 1e-3,
                        .jitter = 0.05,
                        .seed = 7,
                        .plan_source = "plans.json",
                        .alignment = sim::Alignment::kHostTimed});
    });
  }
  return 0;
}
