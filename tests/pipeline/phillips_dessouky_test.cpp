// Phillips–Dessouky steps (phillips_dessouky.cpp).
#include "kareus/pipeline/frontier_solver.hpp"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <set>

#include "kareus/core/error.hpp"
#include "test_tables.hpp"
#include "test_util.hpp"

namespace kareus::pipeline {
namespace {
RC_GTEST_PROP(FrontierSolver, EveryStepShortensByOneUnitAndModelCostNeverFalls, ()) {
  const int stages = *rc::gen::inRange(1, 5);
  const int microbatches = *rc::gen::inRange(1, 7);
  OptionTable table = *testing::random_table(stages, 2, 8);
  auto kind = *rc::gen::element(schedule::ScheduleKind::k1F1B, schedule::ScheduleKind::kGPipe);
  auto model = *rc::gen::element(CostModelKind::kHull, CostModelKind::kExponential);
  auto schedule = schedule::PipelineSchedule::make(kind, stages, microbatches);
  SolverOptions options{.p_blocking_w = 60, .unit_time_s = 1e-3, .cost_model = model,
                        .reclaim_slack = true, .refine_fast_end = false};
  FrontierSolver solver(table, schedule, options);
  // The model's energy of the planned durations, from the operations' costs directly.
  std::vector<OperationCost> costs;
  for (const schedule::Instruction& ins : solver.dag().instructions()) {
    costs.emplace_back(table.at(ins.stage, ins.type), 60, 1e-3, model, "operation");
  }
  auto model_energy_j = [&](double planned_time_s) {
    double sum = 60 * stages * planned_time_s;
    for (std::size_t v = 0; v < costs.size(); ++v) sum += costs[v].model_cost_j(solver.durations()[v]);
    return sum;
  };
  double previous_time = -1;
  std::int64_t previous_cost = -1;
  for (auto plans = solver.next(); !plans.empty(); plans = solver.next()) {
    if (previous_time >= 0 && solver.stats().steps > 0 && plans.front().planned_time_s < previous_time) {
      RC_ASSERT(std::abs(previous_time - plans.front().planned_time_s - 1e-3) < 1e-9);
      RC_ASSERT(solver.model_cost_units() >= previous_cost);
    }
    const double expected_model_energy_j = model_energy_j(plans.front().planned_time_s);
    for (const FrontierPoint& p : plans) {
      RC_ASSERT(std::abs(p.model_energy_j - expected_model_energy_j) <= 1e-9 * expected_model_energy_j);
    }
    previous_time = plans.front().planned_time_s;
    previous_cost = solver.model_cost_units();
    for (const FrontierPoint& p : plans) {
      // Each plan's reported figures are its true evaluation.
      TimeEnergy truth = evaluate_assignment(table, solver.dag(), p.assignment, 60);
      RC_ASSERT(std::abs(truth.time_s - p.time_s) < 1e-9);
      RC_ASSERT(std::abs(truth.energy_j - p.energy_j) < 1e-6);
    }
  }
}

}  // namespace
}  // namespace kareus::pipeline
