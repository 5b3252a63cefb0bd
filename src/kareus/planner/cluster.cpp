#include "kareus/planner/cluster.hpp"

#include <fmt/format.h>

#include "kareus/core/error.hpp"
#include "kareus/plan/select.hpp"

namespace kareus::planner {

double cluster_energy_j(const TimeEnergy& pipeline, const ClusterShape& shape) {
  return pipeline.energy_j * shape.gpus_per_stage * shape.pipelines;
}

StragglerIteration straggler_iteration(std::span<const TimeEnergy> frontier, const ClusterShape& shape,
                                       double slowdown) {
  if (frontier.empty()) throw InputError("the frontier is empty");
  if (!(slowdown >= 1)) throw InputError({"", 0, 0, "--straggler"}, fmt::format("a slowdown must be at least 1, got {}", slowdown));
  if (shape.pipelines < 1) throw InputError({"", 0, 0, "--dp"}, "needs at least one pipeline");
  StragglerIteration it;
  it.slowdown = slowdown;
  const TimeEnergy fastest = frontier.front();
  it.iteration_time_s = slowdown * fastest.time_s;
  it.others_plan = frontier[plan::select_plan(frontier, {plan::Target::Kind::kDeadline, it.iteration_time_s})];
  // A pipeline that ends before the straggler blocks, one GPU per stage at P_blocking, until it.
  auto waiting = [&](const TimeEnergy& p) {
    return p.energy_j + shape.p_blocking_w * shape.stages * (it.iteration_time_s - p.time_s);
  };
  const double per_gpu_row = shape.gpus_per_stage;
  const double straggler_j = slowdown * fastest.energy_j * per_gpu_row;
  const double others = shape.pipelines - 1;
  it.cluster_energy_j = straggler_j + others * waiting(it.others_plan) * per_gpu_row;
  it.cluster_energy_blocking_j = straggler_j + others * waiting(fastest) * per_gpu_row;
  return it;
}

}  // namespace kareus::planner
