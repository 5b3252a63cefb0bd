// Simulated partition evaluations per second on one core: build/bench/kareus_evaluate_bench.
// Target (issue 3): at least 100,000 per second, so that an exhaustive search of every knob of
// every partition of a config (clocks 900-1410 MHz step 30, SMs 3-30 step 3 for TP collectives and
// 1-20 for CP ones, every slot) takes well under a second. items_per_second is the figure.
#include <benchmark/benchmark.h>

#include "kareus/evaluate/simulated.hpp"
#include "kareus/workload/partition.hpp"

namespace {

using namespace kareus;

struct Grid {
  std::vector<workload::Partition> partitions;
  std::vector<std::pair<std::size_t, workload::Knob>> knobs;  // (partition index, knob)
};

// Every knob of every partition on the search's grid.
Grid grid(const std::string& model_name, int tp, int cp) {
  const auto model = workload::load_model(model_name);
  workload::ParallelConfig p;
  p.tp = tp;
  p.cp = cp;
  Grid g;
  g.partitions = workload::build_partitions(model, workload::validated(model, p));
  for (std::size_t i = 0; i < g.partitions.size(); ++i) {
    const auto& part = g.partitions[i];
    std::vector<int> sms;
    if (part.collective && part.collective->group == workload::ParallelGroup::kContext) {
      for (int s = 1; s <= 20; ++s) sms.push_back(s);
    } else {
      for (int s = 3; s <= 30; s += 3) sms.push_back(s);
    }
    for (double f = 900; f <= 1410; f += 30) {
      for (const auto& slot : part.slot_names()) {
        for (int s : sms) g.knobs.push_back({i, {f, s, slot}});
      }
    }
  }
  return g;
}

void run(benchmark::State& state, const Grid& g, bool wrapped) {
  const auto gpu = hardware::load_gpu_preset("a100-sxm4-40gb");
  evaluate::SimulatedEvaluator sim(gpu);
  evaluate::Evaluator evaluator = evaluate::make_simulated_evaluator(gpu);
  std::size_t next = 0;
  double sink = 0;
  for (auto _ : state) {
    const auto& [index, knob] = g.knobs[next];
    next = next + 1 == g.knobs.size() ? 0 : next + 1;
    const auto r = wrapped ? evaluator.evaluate(g.partitions[index], knob)
                           : sim.evaluate(g.partitions[index], knob);
    sink += r.time_s;
    benchmark::DoNotOptimize(sink);
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["grid_knobs"] = static_cast<double>(g.knobs.size());
}

void Llama3bTp8(benchmark::State& state) {
  run(state, grid("llama-3.2-3b", 8, 1), false);
}
void Llama3bTp8ThroughEvaluator(benchmark::State& state) {
  run(state, grid("llama-3.2-3b", 8, 1), true);
}
void Qwen17bCp2Tp4ThroughEvaluator(benchmark::State& state) {
  run(state, grid("qwen3-1.7b", 4, 2), true);
}

// The whole grid of a config, evaluated once: the exhaustive search's floor.
void Llama3bTp8WholeGrid(benchmark::State& state) {
  const Grid g = grid("llama-3.2-3b", 8, 1);
  evaluate::Evaluator evaluator =
      evaluate::make_simulated_evaluator(hardware::load_gpu_preset("a100-sxm4-40gb"));
  for (auto _ : state) {
    double sink = 0;
    for (const auto& [index, knob] : g.knobs)
      sink += evaluator.evaluate(g.partitions[index], knob).time_s;
    benchmark::DoNotOptimize(sink);
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(g.knobs.size()));
  state.counters["grid_knobs"] = static_cast<double>(g.knobs.size());
}

}  // namespace

BENCHMARK(Llama3bTp8);
BENCHMARK(Llama3bTp8ThroughEvaluator);
BENCHMARK(Qwen17bCp2Tp4ThroughEvaluator);
BENCHMARK(Llama3bTp8WholeGrid)->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
