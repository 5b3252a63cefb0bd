#include "kareus/planner/host_bound.hpp"

#include <set>
#include <tuple>

namespace kareus::planner {

std::vector<HostBoundPartition> host_bound_partitions(const Job& job, const plan::Plan& plan,
                                                      const evaluate::Evaluator& evaluator,
                                                      const engine::EngineSpec& engine) {
  const std::vector<workload::Partition> partitions = job_partitions(job, plan.schedule);
  std::set<std::tuple<std::string, workload::Knob, engine::IssuePath>> seen;
  std::vector<HostBoundPartition> out;
  for (const auto& stage : plan.stages) {
    for (const plan::PlannedInstruction& ins : stage) {
      const plan::InstructionKnobs knobs = plan::instruction_knobs(*ins.knob, "knob", "plan");
      bool overlaps = false;
      for (const auto* list : {&knobs.recompute, &knobs.partitions}) {
        for (const plan::PartitionKnob& k : *list) overlaps = overlaps || k.slot != workload::kSequentialSlot;
      }
      for (const auto* list : {&knobs.recompute, &knobs.partitions}) {
        for (const plan::PartitionKnob& k : *list) {
          const workload::Knob knob{ins.freq_mhz, k.sms, k.slot};
          const engine::IssuePath path = engine::issue_path(engine, knob, overlaps);
          if (!seen.emplace(k.key, knob, path).second) continue;
          const workload::Partition& partition = workload::find_partition(partitions, k.key);
          const evaluate::EvalResult r = evaluator.evaluate(partition, knob);
          const HostBoundPartition p{k.key, knob, r.time_s, engine::host_time_s(engine, partition, path),
                                     engine::exposed_host_time_s(engine, partition, path)};
          if (r.ok() && (p.host_bound() || p.exposed_host_s > 0)) out.push_back(p);
        }
      }
    }
  }
  return out;
}

}  // namespace kareus::planner
