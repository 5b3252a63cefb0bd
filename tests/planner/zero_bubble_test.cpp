// ZB-H1 at Megatron-LM's setting on the simulated A100: B and W add up to Megatron-LM's backward,
// and deferring W shortens the iteration (and so its idle energy) against 1F1B on the same costs.
#include "kareus/planner/zero_bubble.hpp"

#include <gtest/gtest.h>

#include "kareus/evaluate/simulated.hpp"

namespace kareus::planner {
namespace {

TEST(ZeroBubbleMegatron, SplitsTheBackwardAndFillsTheCoolDown) {
  evaluate::Evaluator evaluator = evaluate::make_simulated_evaluator(hardware::load_gpu_preset("a100-sxm4-40gb"));
  for (int pp : {2, 4}) {
    Job job;
    job.model = workload::load_model("llama-3.2-3b");
    workload::ParallelConfig p;
    p.pp = pp;
    p.microbatches = 8;
    job.parallel = workload::validated(job.model, p);
    const ZeroBubbleMegatron zb = zero_bubble_megatron(job, evaluator, {});
    const MethodResult megatron = run_method(Method::kMegatron, job, evaluator, {});
    ASSERT_EQ(zb.forward.size(), static_cast<std::size_t>(pp));
    for (int s = 0; s < pp; ++s) {
      const auto& backward = megatron.table.at(s, pipeline::InstructionType::kBackward).front();
      const auto i = static_cast<std::size_t>(s);
      EXPECT_NEAR(zb.input_gradient[i].time_s + zb.weight_gradient[i].time_s, backward.time_s, 1e-12);
      EXPECT_NEAR(zb.input_gradient[i].energy_j + zb.weight_gradient[i].energy_j, backward.energy_j, 1e-9);
      // W runs the forward's GEMM FLOPs and none of its attention, norms or collectives.
      EXPECT_GT(zb.weight_gradient[i].time_s, 0);
      EXPECT_LT(zb.weight_gradient[i].time_s, zb.forward[i].time_s);
    }
    EXPECT_DOUBLE_EQ(zb.one_f_one_b.time_s, megatron.frontier.front().time_s);
    EXPECT_LT(zb.time_s, zb.one_f_one_b.time_s) << "PP " << pp;
    EXPECT_LT(zb.energy_j, zb.one_f_one_b.energy_j) << "PP " << pp;
  }
}

}  // namespace
}  // namespace kareus::planner
