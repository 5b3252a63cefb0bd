// ZB-H1 planned by every method on the simulated A100: the option table's W slot is the workload's
// weight-gradient GEMMs as the evaluator costs them, B is the backward less W at the same clock
// and knob, deferring W shortens Megatron-LM's iteration against 1F1B on the same costs, and the
// frontier gives W clocks of its own.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "kareus/evaluate/simulated.hpp"
#include "kareus/planner/make_plan.hpp"
#include "kareus/planner/planner.hpp"
#include "kareus/search/partition_search.hpp"
#include "kareus/workload/zero_bubble.hpp"

namespace kareus::planner {
namespace {

using schedule::OptionSlot;

Job job_of(int pp) {
  Job job;
  job.model = workload::load_model("llama-3.2-3b");
  workload::ParallelConfig p;
  p.pp = pp;
  p.microbatches = 8;
  job.parallel = workload::validated(job.model, p);
  return job;
}

PlannerOptions zero_bubble() {
  PlannerOptions options;
  options.schedule = schedule::ScheduleKind::kZeroBubbleH1;
  return options;
}

TEST(ZeroBubblePlanner, WSlotIsTheWeightGradientGemmsAndBIsTheBackwardLessW) {
  const evaluate::Evaluator evaluator = evaluate::make_simulated_evaluator(hardware::load_gpu_preset("a100-sxm4-40gb"));
  const Job job = job_of(2);
  const MethodResult perseus = run_method(Method::kPerseus, job, evaluator, zero_bubble());
  // W, costed here on its own: the split's weight GEMMs, both nanobatches, every layer of the stage.
  const workload::Partition weights = workload::weight_gradient_partition(job.model, job.parallel);
  ASSERT_FALSE(weights.ops.empty());
  for (const workload::ComputeOp& op : weights.ops) EXPECT_TRUE(op.name.ends_with("_wgrad")) << op.name;
  EXPECT_FALSE(weights.collective.has_value());
  const search::KnobSpace space = search::knob_space_for(weights, evaluator.gpu(), {});
  for (int s = 0; s < job.parallel.pp; ++s) {
    const double layers = job.parallel.layers_per_stage[static_cast<std::size_t>(s)];
    const auto& w = perseus.table.at(s, OptionSlot::kBackwardWeight);
    const auto& b = perseus.table.at(s, OptionSlot::kBackwardInput);
    const auto& whole = perseus.table.at(s, OptionSlot::kBackward);
    ASSERT_EQ(w.size(), whole.size()) << "stage " << s;
    ASSERT_EQ(b.size(), whole.size()) << "stage " << s;
    for (std::size_t k = 0; k < w.size(); ++k) {
      const evaluate::EvalResult alone = evaluator.evaluate(weights, space.knob(space.sequential_knob(w[k].freq_mhz)));
      ASSERT_TRUE(alone.ok());
      EXPECT_NEAR(w[k].time_s, layers * weights.count * alone.time_s, 1e-12 * w[k].time_s);
      EXPECT_NEAR(w[k].energy_j, layers * weights.count * alone.energy_j, 1e-9 * w[k].energy_j);
      EXPECT_EQ(b[k].freq_mhz, whole[k].freq_mhz);
      // B + W is the backward at its clock, recompute included.
      const auto at_clock = std::find_if(w.begin(), w.end(), [&](const auto& o) { return o.freq_mhz == b[k].freq_mhz; });
      ASSERT_NE(at_clock, w.end());
      EXPECT_NEAR(b[k].time_s + at_clock->time_s, whole[k].time_s, 1e-12 * whole[k].time_s);
      EXPECT_NEAR(b[k].energy_j + at_clock->energy_j, whole[k].energy_j, 1e-9 * whole[k].energy_j);
      EXPECT_EQ(b[k].knob, whole[k].knob);
      EXPECT_LT(at_clock->time_s, perseus.table.at(s, OptionSlot::kForward)[k].time_s);
    }
  }
}

TEST(ZeroBubblePlanner, MegatronDefersWAndBeatsOneFOneBOnTheSameCosts) {
  const evaluate::Evaluator evaluator = evaluate::make_simulated_evaluator(hardware::load_gpu_preset("a100-sxm4-40gb"));
  for (int pp : {2, 4}) {
    const Job job = job_of(pp);
    const MethodResult zb = run_method(Method::kMegatron, job, evaluator, zero_bubble());
    const MethodResult one_f_one_b = run_method(Method::kMegatron, job, evaluator, {});
    ASSERT_EQ(zb.frontier.size(), 1u);
    EXPECT_LT(zb.frontier.front().time_s, one_f_one_b.frontier.front().time_s) << "PP " << pp;
    EXPECT_LT(zb.frontier.front().energy_j, one_f_one_b.frontier.front().energy_j) << "PP " << pp;
  }
}

// For every method that plans clocks, some frontier plan runs a W at a clock other than its B's,
// and each instruction of the written plan carries the option of its own slot.
TEST(ZeroBubblePlanner, WInstructionsTakeClocksOfTheirOwn) {
  const evaluate::Evaluator evaluator = evaluate::make_simulated_evaluator(hardware::load_gpu_preset("a100-sxm4-40gb"));
  const Job job = job_of(4);
  for (Method method : {Method::kPerseus, Method::kNanobatching, Method::kKareus}) {
    const MethodResult result = run_method(method, job, evaluator, zero_bubble());
    ASSERT_GT(result.frontier.size(), 1u) << to_string(method);
    std::size_t differing = 0;
    const std::size_t stride = std::max<std::size_t>(1, result.frontier.size() / 40);  // 40 plans along the front
    for (std::size_t i = 0; i < result.frontier.size(); i += stride) {
      const plan::Plan plan = make_plan(result, job, result.frontier[i]);
      for (int s = 0; s < plan.num_stages; ++s) {
        std::map<int, double> b_clock;
        for (const plan::PlannedInstruction& ins : plan.stages[static_cast<std::size_t>(s)]) {
          const OptionSlot slot = schedule::option_slot({s, ins.type, ins.microbatch, ins.chunk, ins.part});
          ASSERT_NE(slot, OptionSlot::kBackward) << "zb-h1 runs no whole backward";
          const auto& options = result.table.at(s, slot);
          EXPECT_TRUE(std::any_of(options.begin(), options.end(), [&](const auto& o) {
            return o.freq_mhz == ins.freq_mhz && o.time_s == ins.time_s && o.energy_j == ins.energy_j;
          })) << "stage " << s << " microbatch " << ins.microbatch;
          if (slot == OptionSlot::kBackwardInput) b_clock[ins.microbatch] = ins.freq_mhz;
          if (slot == OptionSlot::kBackwardWeight) {
            ASSERT_TRUE(b_clock.contains(ins.microbatch)) << "W before its B";
            differing += b_clock[ins.microbatch] != ins.freq_mhz;
          }
        }
      }
    }
    EXPECT_GT(differing, 0u) << to_string(method) << ": every W runs at its B's clock";
  }
}

}  // namespace
}  // namespace kareus::planner
