// `kareus plan` end to end without the CLI's file writing: build/bench/kareus_planner_bench.
// Target (issue 5): the default job (Llama 3.2 3B, TP 8, PP 2, 8 microbatches, simulated A100,
// exhaustive per-partition search) plans in under 10 s on 2 cores. Also the default job with the
// Bayesian search, and the largest of the ten evaluation configs.
#include <benchmark/benchmark.h>

#include "kareus/evaluate/simulated.hpp"
#include "kareus/planner/planner.hpp"

namespace {

using namespace kareus;

void plan(benchmark::State& state, const std::string& config, search::SearchMode mode) {
  const planner::Job job = planner::evaluation_config(config);
  const evaluate::Evaluator evaluator = evaluate::make_simulated_evaluator(hardware::load_gpu_preset("a100-sxm4-40gb"));
  planner::PlannerOptions options;
  options.search.mode = mode;
  std::size_t points = 0, measurements = 0;
  for (auto _ : state) {
    planner::MethodResult result = planner::run_method(planner::Method::kKareus, job, evaluator, options);
    benchmark::DoNotOptimize(result.frontier.data());
    points = result.frontier.size();
    measurements = result.measurements;
  }
  state.counters["frontier_points"] = static_cast<double>(points);
  state.counters["measurements"] = static_cast<double>(measurements);
}

void BM_PlanDefaultExhaustive(benchmark::State& state) {
  plan(state, "llama3.2-3b-tp8-mbs8-seq4096", search::SearchMode::kExhaustive);
}
void BM_PlanDefaultMobo(benchmark::State& state) {
  plan(state, "llama3.2-3b-tp8-mbs8-seq4096", search::SearchMode::kMobo);
}
void BM_PlanQwenCp2Tp4Seq8192Exhaustive(benchmark::State& state) {
  plan(state, "qwen3-1.7b-cp2tp4-mbs8-seq8192", search::SearchMode::kExhaustive);
}

BENCHMARK(BM_PlanDefaultExhaustive)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_PlanDefaultMobo)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_PlanQwenCp2Tp4Seq8192Exhaustive)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
