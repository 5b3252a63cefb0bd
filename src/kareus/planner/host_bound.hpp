// Which partitions of a plan the host slows, under an engine: those whose host issue time
// (engine::host_time_s) under the plan's knob exceeds their GPU time, and those whose host time the
// engine adds to their GPU time (engine::exposed_host_time_s: it waits for the GPU at each op of
// the path they take). A host-bound one alone does not slow an instruction (the host may carry a lead from earlier
// partitions; the instruction's time takes both sums, engine::instruction_time_s), but it is where
// the host starts to matter, and what a user of a smaller model or a slower host should look at
// first; an exposed one is slower by its host time.
//
// Thread-safety: pure; calls the evaluator from this thread only.
// Example:
//   for (const auto& p : host_bound_partitions(job, plan, evaluator, engine)) fmt::print("{}\n", p.key);
#pragma once

#include <string>
#include <vector>

#include "kareus/engine/engine.hpp"
#include "kareus/evaluate/evaluator.hpp"
#include "kareus/plan/plan.hpp"
#include "kareus/planner/planner.hpp"

namespace kareus::planner {

struct HostBoundPartition {
  std::string key;
  workload::Knob knob;
  double gpu_time_s = 0;   // the evaluator's time for the knob
  double host_time_s = 0;     // engine::host_time_s for it, on its instruction's issue path
  double exposed_host_s = 0;  // engine::exposed_host_time_s for it there: added to the GPU time

  bool host_bound() const { return host_time_s > gpu_time_s; }
};

// Each (partition, knob, issue path) of the plan's instructions once, in plan order, where host >
// GPU time or the engine exposes host time; an instruction runs the nanobatched loop when any of its
// partitions overlaps. A plan without partition knobs (a baseline's) is read at its
// method's knobs: none here.
std::vector<HostBoundPartition> host_bound_partitions(const Job& job, const plan::Plan& plan,
                                                      const evaluate::Evaluator& evaluator,
                                                      const engine::EngineSpec& engine);

}  // namespace kareus::planner
