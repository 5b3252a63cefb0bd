// Cluster files (data/clusters/*.json, `kareus simulate --cluster FILE`): read by
// load_cluster_preset; the default plan is then replayed over an accepted cluster's links and
// clock-switch latency, as `kareus simulate` does.
#include <cstddef>
#include <cstdint>

#include "fixtures.hpp"
#include "fuzz_support.hpp"
#include "kareus/sim/simulator.hpp"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  kareus::fuzz::quiet_logs();
  kareus::fuzz::default_plan();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace kareus;
  const auto path = fuzz::write_input(data, size, "cluster.json");
  sim::ClusterSpec cluster;
  if (!fuzz::holds_contract("cluster.json", [&] { cluster = sim::load_cluster_preset(path.string()); })) return 0;
  for (int gpus_per_stage : {1, 8, 64}) {
    fuzz::holds_contract("", [&] {
      sim::simulate(fuzz::default_plan(),
                    {.transfer_bytes = 64e6,
                     .link = [&](int a, int b) { return cluster.link_between(a, b, gpus_per_stage); },
                     .clock_switch_latency_s = cluster.clock_switch_latency_s,
                     .plan_source = "plan.json"});
    });
  }
  return 0;
}
