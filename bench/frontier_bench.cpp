// Frontier solver speed: `make bench` (or build/bench/kareus_bench). Reports wall time per full
// frontier, the solver steps and max-flow solves, and the process's peak resident memory.
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <algorithm>
#include <filesystem>
#include <optional>
#include <random>

#include "kareus/pipeline/frontier_solver.hpp"
#include "kareus/pipeline/relaxation_bound.hpp"

namespace {

using namespace kareus::pipeline;
const std::filesystem::path kProfiles = std::filesystem::path(KAREUS_DATA_DIR) / "perseus-sosp24" / "stage_profile";

// state.range(0): at most this many rounds of local search after Phillips–Dessouky (0: its plans
// only; 1000, the default, leaves the stop to convergence or the default budget).
// `unit_s` unset: the solver's default unit (1 ms on these, where a finer walk passes its budget).
void run(benchmark::State& state, const OptionTable& table, int stages, int microbatches,
         std::optional<double> unit_s) {
  auto schedule = kareus::schedule::PipelineSchedule::make(kareus::schedule::ScheduleKind::k1F1B, stages, microbatches);
  Frontier frontier;
  const auto rounds = static_cast<int>(state.range(0));
  for (auto _ : state) {
    frontier = solve_frontier(table, schedule,
                              {.p_blocking_w = 83.64, .unit_time_s = unit_s, .local_search_rounds = rounds});
    benchmark::DoNotOptimize(frontier.points.data());
  }
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  state.counters["steps"] = static_cast<double>(frontier.stats.steps);
  state.counters["maxflows"] = static_cast<double>(frontier.stats.cut_computations);
  state.counters["points"] = static_cast<double>(frontier.points.size());
  state.counters["expansions"] = static_cast<double>(frontier.stats.local_search_expansions);
  state.counters["unit_ms"] = 1e3 * frontier.stats.unit.unit_time_s;
  state.counters["peak_rss_MB"] = static_cast<double>(usage.ru_maxrss) / 1024.0;
}

void Gpt3M96(benchmark::State& state) {
  run(state, read_option_table(kProfiles / "gpt3-175b+a100_sxm_bf16.csv", 8), 8, 96, std::nullopt);
}

void BloomM96TenthMs(benchmark::State& state) {
  run(state, read_option_table(kProfiles / "bloom+a100_sxm_bf16.csv", 8), 8, 96, 1e-4);
}

// 8 stages × 128 microbatches with per-stage profiles drawn around the GPT-3 one.
void Synthetic8x128(benchmark::State& state) {
  OptionTable base = read_option_table(kProfiles / "gpt3-175b+a100_sxm_bf16.csv", 8);
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> scale(0.9, 1.1);
  for (auto& stage : base.options) {
    for (auto& options : stage) {
      double s = scale(rng);
      for (auto& o : options) o.time_s *= s, o.energy_j *= s;
    }
  }
  run(state, base, 8, 128, std::nullopt);
}

// `kareus frontier --bound`'s certificate alone, at M = 96 (its cost grows with the DAG and with the
// breakpoints of the relaxation's dual).
void RelaxationBoundM96(benchmark::State& state, const char* profile) {
  const OptionTable table = read_option_table(kProfiles / profile, 8);
  const kareus::schedule::InstructionDag dag(
      kareus::schedule::PipelineSchedule::make(kareus::schedule::ScheduleKind::k1F1B, 8, 96));
  for (auto _ : state) {
    const RelaxationBound bound(table, dag, 83.64);
    benchmark::DoNotOptimize(bound.fastest_time_s());
  }
}

}  // namespace

// Argument: local search rounds; 1000 is the default, 0 times Phillips–Dessouky alone. Each case
// runs three times and reports the median and the minimum: wall times on shared virtual machines
// swing by 20% from run to run. The bound's cases take no argument.
double minimum(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }
#define KAREUS_FRONTIER_BENCHMARK(name)                                                            \
  BENCHMARK(name)->Unit(benchmark::kMillisecond)->Iterations(1)->Repetitions(3)->Arg(0)->Arg(1000) \
      ->ComputeStatistics("min", minimum)->DisplayAggregatesOnly(true)
KAREUS_FRONTIER_BENCHMARK(Gpt3M96);
KAREUS_FRONTIER_BENCHMARK(Synthetic8x128);
KAREUS_FRONTIER_BENCHMARK(BloomM96TenthMs);
BENCHMARK_CAPTURE(RelaxationBoundM96, gpt3, "gpt3-175b+a100_sxm_bf16.csv")
    ->Unit(benchmark::kMillisecond)->Iterations(1)->Repetitions(3)->ComputeStatistics("min", minimum)->DisplayAggregatesOnly(true);
BENCHMARK_CAPTURE(RelaxationBoundM96, bloom, "bloom+a100_sxm_bf16.csv")
    ->Unit(benchmark::kMillisecond)->Iterations(1)->Repetitions(3)->ComputeStatistics("min", minimum)->DisplayAggregatesOnly(true);
BENCHMARK_MAIN();
