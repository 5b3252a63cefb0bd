// The fastest plan on a table Kareus really makes for a long pipeline: Perseus's table of Llama 3.3
// 70B, 16 stages of 5 layers, 64 microbatches (2,048 instructions), on the simulated A100. Scaling
// every option's time and energy by s scales the problem exactly (iteration energy Σ E +
// P·(S·T − Σ t) scales with them), so the fastest plan's energy over s must not depend on s beyond
// what the solver's time unit resolves. Before the last step's plans were fitted to the fastest
// time (FrontierSolver::fitted), it did by 16%: at some scales the all-fastest plan's own
// reclamation was all the front had there, while a plan a millisecond slower saved 14% more.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "kareus/evaluate/simulated.hpp"
#include "kareus/pipeline/frontier_solver.hpp"
#include "kareus/planner/planner.hpp"

namespace kareus::planner {
namespace {

TEST(FastestPlan, ItsEnergyOnAScaledTableScalesWithTheTable) {
  Job job;
  job.model = workload::load_model("llama-3.3-70b");
  workload::ParallelConfig p;
  p.tp = 8;
  p.pp = 16;
  p.microbatch_size = 4;
  p.microbatches = 64;
  p.layers_per_stage = std::vector<int>(16, 5);
  job.parallel = workload::validated(job.model, p);
  hardware::GpuSpec gpu = hardware::load_gpu_preset("a100-sxm4-40gb");
  gpu.time_scale = 1;
  const evaluate::Evaluator evaluator = evaluate::make_simulated_evaluator(gpu);
  const pipeline::OptionTable table = baseline_option_table(Method::kPerseus, job, evaluator, {});
  const auto schedule = schedule::PipelineSchedule::make(schedule::ScheduleKind::k1F1B, p.pp, p.microbatches);
  const double p_blocking_w = gpu.static_power_w;

  std::vector<double> normalized;
  for (double scale : {1.0, 1.03, 1.0970580029381634, 1.15}) {
    pipeline::OptionTable scaled = table;
    for (auto& options : scaled.options)
      for (auto& slot : options)
        for (pipeline::StageOption& o : slot) o.time_s *= scale, o.energy_j *= scale;
    const pipeline::Frontier f = pipeline::solve_frontier(scaled, schedule, {.p_blocking_w = p_blocking_w});
    ASSERT_FALSE(f.points.empty());
    EXPECT_NEAR(f.points.front().time_s, f.stats.fastest_time_s, 1e-9 * f.stats.fastest_time_s);
    normalized.push_back(f.points.front().energy_j / scale);
  }
  const auto [lo, hi] = std::minmax_element(normalized.begin(), normalized.end());
  EXPECT_LT(*hi / *lo - 1, 0.015) << "fastest plan's energy over the scale: " << normalized[0] << ", " << normalized[1]
                                  << ", " << normalized[2] << ", " << normalized[3] << " J";
}

}  // namespace
}  // namespace kareus::planner
