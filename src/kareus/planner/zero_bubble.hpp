// ZB-H1 at Megatron-LM's setting, the one plan of that schedule Kareus can cost today: every
// instruction at the highest clock, collectives not overlapped. Forwards and whole backwards come
// from Megatron-LM's option table; W, each stage's weight-gradient GEMMs (workload::split_backward),
// from the evaluator; B is the backward less W, so the two add up to the backward (the kernel
// launch a split GEMM adds is left out).
// The frontier over clocks needs the solver to read W options of their own, which it does not yet.
//
// Thread-safety: as run_method.
// Example:
//   ZeroBubbleMegatron zb = zero_bubble_megatron(job, evaluator, {});
//   fmt::print("{} s against 1F1B's {} s\n", zb.time_s, zb.one_f_one_b.time_s);
#pragma once

#include <vector>

#include "kareus/planner/planner.hpp"

namespace kareus::planner {

struct ZeroBubbleMegatron {
  double time_s = 0, energy_j = 0;  // ZB-H1, one GPU per stage, idle at P_static
  TimeEnergy one_f_one_b;           // the same costs on 1F1B (Megatron-LM's plan)
  double p_static_w = 0;
  // Per stage at the highest clock: forward, B and W.
  std::vector<pipeline::StageOption> forward, input_gradient, weight_gradient;
};

ZeroBubbleMegatron zero_bubble_megatron(const Job& job, const evaluate::Evaluator& evaluator,
                                        const PlannerOptions& options);

}  // namespace kareus::planner
