#include "kareus/planner/zero_bubble.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "kareus/core/error.hpp"
#include "kareus/pipeline/dag.hpp"
#include "kareus/pipeline/frontier_solver.hpp"
#include "kareus/search/partition_search.hpp"
#include "kareus/workload/zero_bubble.hpp"

namespace kareus::planner {

ZeroBubbleMegatron zero_bubble_megatron(const Job& job, const evaluate::Evaluator& evaluator,
                                        const PlannerOptions& options) {
  PlannerOptions one_f_one_b = options;
  one_f_one_b.schedule = pipeline::ScheduleKind::k1F1B;
  one_f_one_b.virtual_stages = 1;
  const MethodResult megatron = run_method(Method::kMegatron, job, evaluator, one_f_one_b);
  ZeroBubbleMegatron zb;
  zb.p_static_w = megatron.p_static_w;
  zb.one_f_one_b = megatron.frontier.front().time_energy();

  // One nanobatch's weight-gradient GEMMs of a layer; both nanobatches run them.
  workload::Partition weights;
  weights.key = "bwd_wgrad";
  weights.pass = workload::Pass::kBackward;
  weights.ops = workload::split_backward(workload::layer_ops(job.model, job.parallel)).weight_gradient;
  weights.count = 2;
  const search::KnobSpace space = search::knob_space_for(weights, evaluator.gpu(), options.search.grid);
  const double clock = megatron.table.at(0, pipeline::InstructionType::kForward).front().freq_mhz;
  const evaluate::EvalResult w = evaluator.evaluate(weights, space.knob(space.sequential_knob(clock)));
  if (!w.ok()) throw InputError(fmt::format("{} cannot evaluate the weight gradients: {}", evaluator.name(), w.message));

  for (int s = 0; s < job.parallel.pp; ++s) {
    const pipeline::StageOption& f = megatron.table.at(s, pipeline::InstructionType::kForward).front();
    const pipeline::StageOption& b = megatron.table.at(s, pipeline::InstructionType::kBackward).front();
    const double scale = job.parallel.layers_per_stage[static_cast<std::size_t>(s)] * weights.count * options.overhead_factor;
    pipeline::StageOption wo{clock, w.time_s * scale, w.energy_j * scale, nullptr};
    KAREUS_CHECK(wo.time_s < b.time_s && wo.energy_j < b.energy_j, "weight gradients cost more than the backward");
    zb.forward.push_back(f);
    zb.weight_gradient.push_back(wo);
    zb.input_gradient.push_back({clock, b.time_s - wo.time_s, b.energy_j - wo.energy_j, nullptr});
  }

  const auto schedule = pipeline::PipelineSchedule::make(pipeline::ScheduleKind::kZeroBubbleH1, job.parallel.pp,
                                                         job.parallel.microbatches);
  const pipeline::InstructionDag dag(schedule);
  std::vector<double> durations;
  double sum_time_s = 0, sum_energy_j = 0;
  for (const pipeline::Instruction& ins : dag.instructions()) {
    const auto s = static_cast<std::size_t>(ins.stage);
    const pipeline::StageOption& o = ins.type == pipeline::InstructionType::kForward ? zb.forward[s]
                                     : ins.part == pipeline::BackwardPart::kWeightGradient ? zb.weight_gradient[s]
                                                                                           : zb.input_gradient[s];
    durations.push_back(o.time_s);
    sum_time_s += o.time_s;
    sum_energy_j += o.energy_j;
  }
  zb.time_s = dag.makespan<double>(durations);
  zb.energy_j = pipeline::iteration_energy_j(sum_energy_j, sum_time_s, job.parallel.pp, zb.time_s, zb.p_static_w);
  return zb;
}

}  // namespace kareus::planner
