// A frontier point of the solver as a plan document: every stage's instructions in run order with
// the clock, knob, time and energy of the option the point assigns them. The plan format
// (plan/plan.hpp) knows no solver; this is where the two meet.
//
// Example:
//   plan::Plan plan = make_plan(kareus, job, kareus.frontier.front());
//   plan::write_plan(plan, "plan.json");
#pragma once

#include <nlohmann/json.hpp>

#include "kareus/pipeline/frontier_point.hpp"
#include "kareus/pipeline/option_table.hpp"
#include "kareus/plan/plan.hpp"
#include "kareus/planner/planner.hpp"
#include "kareus/schedule/dag.hpp"

namespace kareus::planner {

// What a plan records beside its instructions.
struct PlanContext {
  schedule::ScheduleKind schedule = schedule::ScheduleKind::k1F1B;
  int num_microbatches = 0;
  double p_blocking_w = 0;
  double unit_time_s = 0;
  nlohmann::json source;
};

// The plan of `point` over `table` on the schedule `dag` was built from.
plan::Plan make_plan(const pipeline::OptionTable& table, const schedule::InstructionDag& dag,
                     const pipeline::FrontierPoint& point, const PlanContext& context);

// The plan of one frontier point of a method's result, with the job and method recorded as its
// source (and the engine, the GPU and every partition's launch slots, which consumers check).
plan::Plan make_plan(const MethodResult& result, const Job& job, const pipeline::FrontierPoint& point);

}  // namespace kareus::planner
