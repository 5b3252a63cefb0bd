#include "kareus/planner/comparison.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <iterator>
#include <memory>
#include <mutex>
#include <thread>

#include "kareus/core/error.hpp"
#include "kareus/evaluate/simulated.hpp"

namespace kareus::planner {
namespace {

evaluate::Evaluator a100() {
  return evaluate::make_simulated_evaluator(hardware::load_gpu_preset("a100-sxm4-40gb"));
}

// The comparison against each method run on its own, and the iso rules of core/pareto.hpp.
TEST(Comparison, HoldsEachMethodsOwnFrontierAndItsIsoFiguresAgainstPerseus) {
  const Job job = evaluation_config("llama3.2-3b-tp8-mbs8-seq4096");
  const evaluate::Evaluator evaluator = a100();
  PlannerOptions options;
  options.search.mode = search::SearchMode::kExhaustive;
  const std::vector<double> slowdowns = {1.0, 1.2};
  const JobComparison c = compare_methods(job, evaluator, options, slowdowns);

  ASSERT_EQ(c.methods.size(), 4u);
  EXPECT_TRUE(c.left_out.empty());
  ASSERT_EQ(c.reference, Method::kPerseus);
  const std::vector<TimeEnergy> perseus = run_method(Method::kPerseus, job, evaluator, options).points();
  for (std::size_t i = 0; i < c.methods.size(); ++i) {
    const MethodComparison& m = c.methods[i];
    EXPECT_EQ(m.method, kAllMethods[i]);
    const std::vector<TimeEnergy> alone = run_method(m.method, job, evaluator, options).points();
    ASSERT_EQ(m.points.size(), alone.size()) << to_string(m.method);
    EXPECT_DOUBLE_EQ(m.points.front().energy_j, alone.front().energy_j) << to_string(m.method);
    if (m.method == Method::kPerseus) {
      EXPECT_FALSE(m.iso_time_energy_reduction_pct.has_value()) << "the reference has no iso figure of its own";
    } else {
      EXPECT_EQ(m.iso_time_energy_reduction_pct, iso_time_energy_reduction_pct(alone, perseus)) << to_string(m.method);
      EXPECT_EQ(m.iso_energy_time_reduction_pct, iso_energy_time_reduction_pct(alone, perseus)) << to_string(m.method);
    }
    EXPECT_DOUBLE_EQ(m.cluster_energy_j, m.points.front().energy_j * job.parallel.tp * job.parallel.cp * job.parallel.dp);
    ASSERT_EQ(m.stragglers.size(), slowdowns.size());
    EXPECT_NEAR(m.stragglers[0].saving_pct(), 0, 1e-9) << "without a straggler the others run their fastest plan";
    EXPECT_EQ(m.sequential_share.has_value(), m.method == Method::kKareus);
    EXPECT_EQ(m.clocks_mhz.empty(), m.method == Method::kKareus);
  }
  // Kareus's frontier weakly dominates Perseus's, so it saves at both ends.
  EXPECT_GE(*c.methods[3].iso_time_energy_reduction_pct, -1e-9);
  ASSERT_EQ(c.methods[0].clocks_mhz.size(), 1u) << "Megatron-LM runs the highest clock only";
  EXPECT_EQ(c.methods[0].clocks_mhz[0], *std::max_element(c.methods[1].clocks_mhz.begin(), c.methods[1].clocks_mhz.end()));
  EXPECT_EQ(c.shape.gpus(), job.parallel.tp * job.parallel.cp * job.parallel.pp * job.parallel.dp);
}

// The simulated GPU, saying it may or may not be asked from several threads, taking a moment per
// knob as a device does, and counting how many ask at once.
class CountingEvaluator : public evaluate::EvaluatorImpl {
 public:
  explicit CountingEvaluator(bool thread_safe) : thread_safe_(thread_safe) {}
  std::string name() const override { return inner_.name(); }
  evaluate::Provenance provenance() const override { return inner_.provenance(); }
  bool thread_safe() const override { return thread_safe_; }
  const hardware::GpuSpec& gpu() const override { return inner_.gpu(); }
  evaluate::EvalResult evaluate(const workload::Partition& partition, const workload::Knob& knob) const override {
    const int now = ++in_flight_;
    int seen = most_;
    while (now > seen && !most_.compare_exchange_weak(seen, now)) {
    }
    evaluate::EvalResult r = inner_.evaluate(partition, knob);
    std::this_thread::sleep_for(std::chrono::microseconds(100));  // as a device takes its time
    --in_flight_;
    return r;
  }
  int most_at_once() const { return most_; }

 private:
  bool thread_safe_;
  evaluate::Evaluator inner_ = a100();
  mutable std::atomic<int> in_flight_{0}, most_{0};
};

TEST(Comparison, MethodsRunSideBySideOnlyWhereTheEvaluatorMayBeAskedAtOnce) {
  const Job job = evaluation_config("llama3.2-3b-tp8-mbs8-seq4096");
  PlannerOptions options;
  options.search.mode = search::SearchMode::kExhaustive;
  for (bool thread_safe : {false, true}) {
    auto counting = std::make_unique<CountingEvaluator>(thread_safe);
    const CountingEvaluator& counts = *counting;
    const evaluate::Evaluator evaluator(std::move(counting));
    const MethodRuns runs = run_methods(kAllMethods, job, evaluator, options);
    if (!thread_safe) {
      EXPECT_EQ(counts.most_at_once(), 1) << "a device is asked one knob at a time";
    }
    ASSERT_EQ(runs.results.size(), std::size(kAllMethods));
    for (std::size_t i = 0; i < runs.results.size(); ++i) {
      EXPECT_EQ(runs.results[i].method, kAllMethods[i]) << "in the order asked";
      const MethodResult alone = run_method(kAllMethods[i], job, a100(), options);
      EXPECT_EQ(runs.results[i].points(), alone.points()) << to_string(kAllMethods[i]) << " " << thread_safe;
    }
  }
}

// A caller that keeps only part of each result gets each once, at its place, as run_methods would hold it.
TEST(Comparison, EachMethodsResultIsHandedOverOnceAtItsPlace) {
  const Job job = evaluation_config("llama3.2-3b-tp8-mbs8-seq4096");
  PlannerOptions options;
  options.search.mode = search::SearchMode::kExhaustive;
  const evaluate::Evaluator evaluator = a100();
  std::mutex mutex;
  std::vector<std::vector<TimeEnergy>> points(std::size(kAllMethods));
  std::vector<int> handed(std::size(kAllMethods), 0);
  const std::vector<LeftOut> left_out =
      for_each_method(kAllMethods, job, evaluator, options, [&](std::size_t i, MethodResult&& result) {
        std::lock_guard lock(mutex);
        ASSERT_LT(i, handed.size());
        ++handed[i];
        EXPECT_EQ(result.method, kAllMethods[i]);
        points[i] = result.points();
      });
  EXPECT_TRUE(left_out.empty());
  const MethodRuns runs = run_methods(kAllMethods, job, evaluator, options);
  for (std::size_t i = 0; i < handed.size(); ++i) {
    EXPECT_EQ(handed[i], 1) << to_string(kAllMethods[i]);
    EXPECT_EQ(points[i], runs.results[i].points()) << to_string(kAllMethods[i]);
  }
}

TEST(Comparison, ASlowdownBelowOneIsRefusedBeforeAnyMeasurement) {
  const evaluate::Evaluator evaluator = a100();
  const std::vector<double> slowdowns = {1.1, 0.9};
  try {
    (void)compare_methods(evaluation_config("llama3.2-3b-tp8-mbs8-seq4096"), evaluator, {}, slowdowns);
    FAIL() << "a slowdown of 0.9 was taken";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--straggler"), std::string::npos) << e.what();
  }
  EXPECT_EQ(evaluator.calls(), 0);
}

TEST(Comparison, TheReferenceIsPerseusElseTheFirstBaselineThatRan) {
  const Method all[] = {Method::kMegatron, Method::kPerseus, Method::kNanobatching, Method::kKareus};
  EXPECT_EQ(reference_method(all), Method::kPerseus);
  const Method no_perseus[] = {Method::kMegatron, Method::kNanobatching, Method::kKareus};
  EXPECT_EQ(reference_method(no_perseus), Method::kNanobatching);
  const Method megatron[] = {Method::kMegatron, Method::kKareus};
  EXPECT_EQ(reference_method(megatron), Method::kMegatron);
  const Method kareus[] = {Method::kKareus};
  EXPECT_EQ(reference_method(kareus), std::nullopt);
}

// Kareus's search measures the baselines' knobs too (they are among its options), so a comparison
// asks the evaluator (on a GPU, ten seconds a knob) no more than Kareus alone does, while each method
// still reports the measurements it needed, as it would alone.
TEST(Comparison, EachKnobIsMeasuredOnceAcrossTheMethods) {
  const Job job = evaluation_config("llama3.2-3b-tp8-mbs8-seq4096");
  PlannerOptions options;
  options.search.mode = search::SearchMode::kExhaustive;
  const evaluate::Evaluator kareus_alone = a100();
  (void)run_method(Method::kKareus, job, kareus_alone, options);
  const evaluate::Evaluator evaluator = a100();
  const JobComparison c = compare_methods(job, evaluator, options, {});
  EXPECT_EQ(evaluator.calls(), kareus_alone.calls());
  ASSERT_EQ(c.methods.size(), std::size(kAllMethods));
  for (const MethodComparison& m : c.methods) {
    EXPECT_EQ(m.measurements, run_method(m.method, job, a100(), options).measurements) << to_string(m.method);
  }
}

}  // namespace
}  // namespace kareus::planner
