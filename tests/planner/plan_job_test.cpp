#include "kareus/planner/plan_job.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include "kareus/evaluate/simulated.hpp"

namespace kareus::planner {
namespace {

// The set holds the evenly spaced plans and the chosen one, each the plan of its frontier point.
TEST(PlanJob, TheSetHoldsTheChosenPlanAndAtMostTheAskedCountBesides) {
  const Job job = evaluation_config("llama3.2-3b-tp8-mbs8-seq4096");
  const evaluate::Evaluator evaluator = evaluate::make_simulated_evaluator(hardware::load_gpu_preset("a100-sxm4-40gb"));
  PlannerOptions options;
  options.search.mode = search::SearchMode::kExhaustive;
  for (const char* target : {"max-throughput", "min-energy", "deadline:4.3"}) {
    const JobPlan p = plan_job(job, evaluator, options, {.target = plan::parse_target(target), .set_plans = 5, .baselines = false});
    EXPECT_EQ(p.chosen, plan::select_plan(p.kareus.points(), p.target)) << target;
    EXPECT_NEAR(p.chosen_plan.time_s, p.kareus.frontier[p.chosen].time_s, 1e-12) << target;
    ASSERT_TRUE(std::is_sorted(p.set_indices.begin(), p.set_indices.end())) << target;
    EXPECT_EQ(std::adjacent_find(p.set_indices.begin(), p.set_indices.end()), p.set_indices.end()) << target;
    EXPECT_TRUE(std::binary_search(p.set_indices.begin(), p.set_indices.end(), p.chosen)) << target;
    EXPECT_LE(p.set_indices.size(), 6u) << target;
    ASSERT_EQ(p.set_plans.size(), p.set_indices.size()) << target;
    for (std::size_t i = 0; i < p.set_plans.size(); ++i) {
      EXPECT_NEAR(p.set_plans[i].energy_j, p.kareus.frontier[p.set_indices[i]].energy_j, 1e-9) << target;
    }
    EXPECT_FALSE(p.baselines.has_value());
  }
  const JobPlan with = plan_job(job, evaluator, options, {});
  ASSERT_TRUE(with.baselines.has_value());
  EXPECT_EQ(with.baselines->baselines.size(), 3u);
}

// The baselines costed beside the plan are each method's frontier as it runs alone, though Perseus's
// and Nanobatching+Perseus's come from Kareus's merge, and their knobs from what Kareus's search
// measured.
TEST(PlanJob, TheBaselinesBesideThePlanAreTheirOwnFrontiersAndMeasureNothingKareusMeasured) {
  const Job job = evaluation_config("llama3.2-3b-tp8-mbs8-seq4096");
  PlannerOptions options;
  options.search.mode = search::SearchMode::kExhaustive;
  auto a100 = [] { return evaluate::make_simulated_evaluator(hardware::load_gpu_preset("a100-sxm4-40gb")); };
  const evaluate::Evaluator kareus_alone = a100();
  (void)run_method(Method::kKareus, job, kareus_alone, options);
  const evaluate::Evaluator evaluator = a100();
  const JobPlan p = plan_job(job, evaluator, options, {});
  EXPECT_EQ(evaluator.calls(), kareus_alone.calls());
  ASSERT_TRUE(p.baselines.has_value());
  ASSERT_EQ(p.baselines->baselines.size(), 3u);
  for (const BaselineFrontier& b : p.baselines->baselines) {
    EXPECT_EQ(b.points, run_method(b.method, job, a100(), options).points()) << to_string(b.method);
  }
  ASSERT_EQ(p.kareus.merged_baselines.size(), 2u);
  EXPECT_EQ(p.kareus.merged_baselines[0].method, Method::kPerseus);
  EXPECT_EQ(p.kareus.merged_baselines[1].method, Method::kNanobatching);
}

// Without the relaxation's plans the solves make no bound; the plan's certificate is still the bound
// on Kareus's own table (not a baseline's), computed beside the merge, and no other run pays for it.
TEST(PlanJob, WithoutTheRelaxationsPlansTheCertificateIsTheBoundOnKareussTable) {
  const Job job = evaluation_config("llama3.2-3b-tp8-mbs8-seq4096");
  const evaluate::Evaluator evaluator = evaluate::make_simulated_evaluator(hardware::load_gpu_preset("a100-sxm4-40gb"));
  PlannerOptions options;
  options.search.mode = search::SearchMode::kExhaustive;
  options.relaxation_plans = false;
  const JobPlan p = plan_job(job, evaluator, options, {.baselines = false});
  ASSERT_TRUE(p.kareus.bound.has_value());
  const pipeline::RelaxationBound alone(p.kareus.table, schedule::InstructionDag(p.kareus.pipeline_schedule(job)),
                                        p.kareus.p_static_w);
  for (const TimeEnergy& point : p.kareus.points()) {
    EXPECT_EQ(p.kareus.bound->energy_j(point.time_s), alone.energy_j(point.time_s)) << point.time_s;
  }
  const pipeline::RelaxationBound::Gap gap = alone.worst_gap(p.kareus.points());
  EXPECT_EQ(p.bound_gap.relative, gap.relative);
  EXPECT_EQ(p.bound_gap.time_s, gap.time_s);
  EXPECT_FALSE(run_method(Method::kKareus, job, evaluator, options).bound.has_value());
}

}  // namespace
}  // namespace kareus::planner
