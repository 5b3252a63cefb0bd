#include "kareus/planner/methods.hpp"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
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

// Kareus's front thinned to a few plans at random stands for an own solve that missed most of the
// frontier: the baselines' plans joined back make it weakly dominate theirs again, each plan it
// then holds is a plan of Kareus's table at the time and energy it states, it is a Pareto set, and
// every thinned plan it let go is dominated by one it holds. (On the jobs of the tests Kareus's own
// front already dominates every mapped plan, so only a thinned one shows the join at work.)
RC_GTEST_PROP(BaselinePlansJoin, AThinnedFrontWithTheBaselinesPlansJoinedDominatesThemAgain, ()) {
  struct Results {
    Job job = evaluation_config("llama3.2-3b-tp8-mbs8-seq4096");
    MethodResult kareus, perseus, nanobatching;
  };
  static const Results r = [] {
    Results results;
    const evaluate::Evaluator evaluator =
        evaluate::make_simulated_evaluator(hardware::load_gpu_preset("a100-sxm4-40gb"));
    const PlannerOptions options;
    results.kareus = run_method(Method::kKareus, results.job, evaluator, options);
    results.perseus = run_method(Method::kPerseus, results.job, evaluator, options);
    results.nanobatching = run_method(Method::kNanobatching, results.job, evaluator, options);
    return results;
  }();
  const std::size_t size = r.kareus.frontier.size();
  const auto picked = *rc::gen::container<std::set<std::size_t>>(
      *rc::gen::inRange<std::size_t>(0, 6), rc::gen::inRange<std::size_t>(0, size));
  MethodResult thinned = r.kareus;
  thinned.frontier.clear();
  for (std::size_t i : picked) thinned.frontier.push_back(r.kareus.frontier[i]);
  const std::vector<TimeEnergy> kept = thinned.points();

  const schedule::InstructionDag dag(thinned.pipeline_schedule(r.job));
  BaselinePlansJoin join(thinned, dag);
  join.add(r.perseus);
  join.add(r.nanobatching);
  join.finish();

  const std::vector<TimeEnergy> joined = thinned.points();
  RC_ASSERT(!joined.empty());
  for (std::size_t i = 0; i < joined.size(); ++i) {
    const TimeEnergy te = pipeline::evaluate_assignment(thinned.table, dag, thinned.frontier[i].assignment,
                                                        thinned.p_static_w);
    RC_ASSERT(std::abs(te.time_s - joined[i].time_s) <= 1e-12 * te.time_s);
    RC_ASSERT(std::abs(te.energy_j - joined[i].energy_j) <= 1e-12 * te.energy_j);
    if (i > 0) RC_ASSERT(joined[i - 1].time_s < joined[i].time_s && joined[i - 1].energy_j > joined[i].energy_j);
  }
  auto dominated = [&](const TimeEnergy& p) {
    const auto energy = min_energy_within_time(joined, p.time_s * (1 + 1e-9));
    return energy && *energy <= p.energy_j * (1 + 1e-9);
  };
  for (const MethodResult* baseline : {&r.perseus, &r.nanobatching}) {
    for (const TimeEnergy& p : baseline->points()) RC_ASSERT(dominated(p));
  }
  for (const TimeEnergy& p : kept) RC_ASSERT(dominated(p));
}

}  // namespace
}  // namespace kareus::planner
