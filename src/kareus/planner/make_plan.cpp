#include "kareus/planner/make_plan.hpp"

#include <algorithm>
#include <string>

#include "kareus/core/error.hpp"

namespace kareus::planner {

plan::Plan make_plan(const pipeline::OptionTable& table, const schedule::InstructionDag& dag,
                     const pipeline::FrontierPoint& point, const PlanContext& context) {
  KAREUS_CHECK(point.assignment.size() == dag.num_nodes(), "plan assignment size differs from DAG");
  plan::Plan plan;
  plan.schedule = context.schedule;
  plan.num_stages = table.num_stages();
  plan.num_microbatches = context.num_microbatches;
  plan.p_blocking_w = context.p_blocking_w;
  plan.unit_time_s = context.unit_time_s;
  plan.energy_scope = plan::energy_scope_for(plan.num_stages);
  plan.time_s = point.time_s;
  plan.energy_j = point.energy_j;
  plan.source = context.source;
  plan.stages.resize(static_cast<std::size_t>(plan.num_stages));
  for (std::size_t v = 0; v < dag.num_nodes(); ++v) {
    const schedule::Instruction& ins = dag.instruction(v);
    const pipeline::StageOption& o = pipeline::options_of(table, ins).at(point.assignment[v]);
    plan.virtual_stages = std::max(plan.virtual_stages, ins.chunk + 1);
    plan.stages[static_cast<std::size_t>(ins.stage)].push_back(
        {ins.type, ins.microbatch, o.freq_mhz, o.knob, o.time_s, o.energy_j, ins.chunk, ins.part});
  }
  return plan;
}

plan::Plan make_plan(const MethodResult& result, const Job& job, const pipeline::FrontierPoint& point) {
  schedule::InstructionDag dag(result.pipeline_schedule(job));
  PlanContext context{result.schedule, job.parallel.microbatches, result.p_static_w, result.unit_time_s,
                      {{"method", std::string(to_string(result.method))}, {"job", job.name}}};
  // Which host the instruction times assume: `kareus simulate` replays the plan under it.
  if (!result.engine.empty()) context.source["engine"] = result.engine;
  // What every consumer holds the plan's clocks and knobs to (plan/validate.hpp).
  if (!result.gpu.is_null()) context.source["gpu"] = result.gpu;
  nlohmann::json slots = nlohmann::json::object();
  for (const workload::Partition& p : job_partitions(job, result.schedule)) {
    nlohmann::json names = nlohmann::json::array();
    for (const auto& slot : p.slots) names.push_back(slot.name);
    slots[p.key] = std::move(names);
  }
  context.source["launch_slots"] = std::move(slots);
  return make_plan(result.table, dag, point, context);
}

}  // namespace kareus::planner
