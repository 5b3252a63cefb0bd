// Kareus for one job, as `kareus plan` runs it: the frontier, the plan a target picks, a plan set
// spread over the frontier for a runtime that switches plans, the chosen plan's host-bound
// partitions under the engine, and the baselines beside it.
//
// Thread-safety: run_method's rules.
// Example:
//   JobPlan p = plan_job(job, evaluator, options, {.target = plan::parse_target("min-energy")});
//   plan::write_plan(p.chosen_plan, "plan.json");
#pragma once

#include <optional>
#include <vector>

#include "kareus/pipeline/relaxation_bound.hpp"
#include "kareus/plan/select.hpp"
#include "kareus/planner/baselines.hpp"
#include "kareus/planner/host_bound.hpp"
#include "kareus/planner/planner.hpp"

namespace kareus::planner {

struct PlanRequest {
  plan::Target target{};
  std::optional<std::size_t> set_plans = 200;  // plans in the set besides the chosen one; nullopt: all
  bool baselines = true;                       // cost Megatron-LM, Perseus and Nanobatching+Perseus beside it
};

struct JobPlan {
  MethodResult kareus;
  // How far kareus.frontier can be from the exact frontier of its table: its plan furthest above
  // the linear relaxation's bound.
  pipeline::RelaxationBound::Gap bound_gap;
  plan::Target target;     // what picked the chosen plan
  std::size_t chosen = 0;  // index into kareus.frontier
  plan::Plan chosen_plan;
  std::vector<std::size_t> set_indices;  // ascending into kareus.frontier, the chosen one among them
  std::vector<plan::Plan> set_plans;     // the plans of set_indices, in order
  std::vector<HostBoundPartition> host_bound;
  std::optional<BaselineComparison> baselines;
  double run_time_s = 0;  // the whole of it, baselines included
};

JobPlan plan_job(const Job& job, const evaluate::Evaluator& evaluator, const PlannerOptions& options,
                 const PlanRequest& request);

}  // namespace kareus::planner
