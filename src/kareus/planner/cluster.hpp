// A whole data-parallel job from the frontier of one of its pipelines: DP identical pipelines of
// S stages, each stage TP × CP GPUs that draw alike, so a figure of one GPU per stage scales to all
// GPUs by TP × CP × DP. With a straggler (one pipeline slower by a factor, Perseus's extrinsic
// bloat) every pipeline waits for it at the gradient all-reduce; the others can either run their
// fastest plan and block at P_blocking until it arrives, or follow the frontier to the
// least-energy plan that still meets its time (the deadline selection of plan/select).
//
// Thread-safety: pure functions on values.
// Example:
//   ClusterShape shape{.pipelines = 64, .gpus_per_stage = 8, .stages = 8, .p_blocking_w = 85};
//   StragglerIteration it = straggler_iteration(frontier, shape, 1.2);
#pragma once

#include <span>

#include "kareus/core/pareto.hpp"

namespace kareus::planner {

struct ClusterShape {
  int pipelines = 1;       // DP
  int gpus_per_stage = 1;  // TP × CP
  int stages = 1;
  double p_blocking_w = 0;
  int gpus() const { return pipelines * gpus_per_stage * stages; }
};

// Energy of every GPU of the job for one iteration of each pipeline at (time, energy) of one GPU
// per stage: energy × TP·CP × DP.
double cluster_energy_j(const TimeEnergy& pipeline, const ClusterShape& shape);

struct StragglerIteration {
  double slowdown = 1;
  double iteration_time_s = 0;  // the straggler's: slowdown × the fastest plan's time
  TimeEnergy others_plan;       // the plan the other pipelines follow (one GPU per stage)
  // All GPUs of the job: the straggler runs the fastest plan `slowdown` times slower at the same
  // power (its energy × slowdown); the others block at P_blocking from their end to its.
  double cluster_energy_j = 0;          // the others on `others_plan`
  double cluster_energy_blocking_j = 0; // the others on the fastest plan
  double saving_pct() const { return 100.0 * (1 - cluster_energy_j / cluster_energy_blocking_j); }
};

// `frontier`: Pareto, time ascending, non-empty; slowdown >= 1. InputError otherwise.
StragglerIteration straggler_iteration(std::span<const TimeEnergy> frontier, const ClusterShape& shape,
                                       double slowdown);

}  // namespace kareus::planner
