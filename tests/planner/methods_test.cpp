#include "kareus/planner/methods.hpp"

#include <gtest/gtest.h>

#include <thread>

#include "kareus/evaluate/simulated.hpp"

namespace kareus::planner {
namespace {

TEST(Methods, EachStrategyIsItsMethodAndMegatronRunsTheTopClockOnly) {
  const Job job = evaluation_config("llama3.2-3b-tp8-mbs8-seq4096");
  const evaluate::Evaluator evaluator = evaluate::make_simulated_evaluator(hardware::load_gpu_preset("a100-sxm4-40gb"));
  const PlannerOptions options;
  for (Method m : kAllMethods) EXPECT_EQ(strategy_for(m).method(), m);
  const std::vector<double> all = strategy_for(Method::kKareus).clocks_mhz(job, evaluator, options);
  EXPECT_EQ(strategy_for(Method::kPerseus).clocks_mhz(job, evaluator, options), all);
  EXPECT_EQ(strategy_for(Method::kMegatron).clocks_mhz(job, evaluator, options),
            std::vector<double>{*std::max_element(all.begin(), all.end())});
  for (Method m : kAllMethods) EXPECT_FALSE(strategy_for(m).unsupported_reason(job, evaluator, options)) << to_string(m);
}

// A run counts the measurements it made itself, so two runs on one evaluator at once count what
// each would alone (the evaluator's own counter sees both).
TEST(Methods, TwoRunsSharingAnEvaluatorCountTheirOwnMeasurements) {
  const Job job = evaluation_config("llama3.2-3b-tp8-mbs8-seq4096");
  PlannerOptions options;
  options.search.mode = search::SearchMode::kMobo;
  options.search.seed = 3;
  std::size_t alone[2];
  const Method methods[2] = {Method::kKareus, Method::kPerseus};
  for (int i = 0; i < 2; ++i) {
    const evaluate::Evaluator own = evaluate::make_simulated_evaluator(hardware::load_gpu_preset("a100-sxm4-40gb"));
    alone[i] = run_method(methods[i], job, own, options).measurements;
    EXPECT_EQ(static_cast<std::int64_t>(alone[i]), own.calls() - own.failures()) << to_string(methods[i]);
  }
  const evaluate::Evaluator shared = evaluate::make_simulated_evaluator(hardware::load_gpu_preset("a100-sxm4-40gb"));
  std::size_t together[2];
  std::thread other([&] { together[1] = run_method(methods[1], job, shared, options).measurements; });
  together[0] = run_method(methods[0], job, shared, options).measurements;
  other.join();
  EXPECT_EQ(together[0], alone[0]);
  EXPECT_EQ(together[1], alone[1]);
  EXPECT_EQ(static_cast<std::int64_t>(alone[0] + alone[1]), shared.calls() - shared.failures());
}

}  // namespace
}  // namespace kareus::planner
