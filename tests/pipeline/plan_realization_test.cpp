// Plans on the true options and slack reclamation (plan_realization.cpp).
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
TEST(FrontierSolver, EnergyChargesIdleTimeAtBlockingPower) {
  // One stage, one microbatch: T = t_f + t_b, energy = E_f + E_b exactly (no idle time).
  OptionTable table;
  table.options.resize(1);
  table.at(0, schedule::InstructionType::kForward) = {{1410, 0.010, 4.0, nullptr}};
  table.at(0, schedule::InstructionType::kBackward) = {{1410, 0.020, 8.0, nullptr}};
  auto schedule = schedule::PipelineSchedule::make(schedule::ScheduleKind::k1F1B, 1, 1);
  schedule::InstructionDag dag(schedule);
  TimeEnergy te = evaluate_assignment(table, dag, std::vector<std::uint16_t>{0, 0}, 50);
  EXPECT_NEAR(te.time_s, 0.030, 1e-12);
  EXPECT_NEAR(te.energy_j, 12.0, 1e-12);
  // Two stages: each GPU idles while the other works; idle time is charged at P.
  table.options.resize(2, table.options[0]);
  auto two = schedule::PipelineSchedule::make(schedule::ScheduleKind::k1F1B, 2, 1);
  schedule::InstructionDag dag2(two);
  TimeEnergy te2 = evaluate_assignment(table, dag2, std::vector<std::uint16_t>(4, 0), 50);
  EXPECT_NEAR(te2.time_s, 0.060, 1e-12);
  EXPECT_NEAR(te2.energy_j, 24.0 + 50 * (2 * 0.060 - 0.060), 1e-9);
}


// Slack reclamation moves instructions with slack to slower options: a step's frugal plan keeps its
// iteration time and never costs more than the same options without it.
RC_GTEST_PROP(FrontierSolver, ReclaimingSlackKeepsTheTimeAndNeverCostsMore, ()) {
  const int stages = *rc::gen::inRange(1, 5);
  const int microbatches = *rc::gen::inRange(1, 7);
  OptionTable table = *testing::random_table(stages, 1, 8);
  auto schedule = schedule::PipelineSchedule::make(*rc::gen::element(schedule::ScheduleKind::k1F1B, schedule::ScheduleKind::kGPipe), stages,
                                         microbatches);
  SolverOptions with{.p_blocking_w = 60, .unit_time_s = 1e-3, .local_search_rounds = 0};
  SolverOptions without = with;
  without.reclaim_slack = false;
  FrontierSolver reclaiming(table, schedule, with), plain(table, schedule, without);
  for (auto a = reclaiming.next(), b = plain.next(); !a.empty() || !b.empty(); a = reclaiming.next(), b = plain.next()) {
    RC_ASSERT(!a.empty() && !b.empty());
    RC_ASSERT(std::abs(a.front().time_s - b.front().time_s) <= 1e-12 * b.front().time_s);
    RC_ASSERT(a.front().energy_j <= b.front().energy_j + 1e-9 * b.front().energy_j);
    const TimeEnergy truth = evaluate_assignment(table, reclaiming.dag(), a.front().assignment, 60);
    RC_ASSERT(std::abs(truth.energy_j - a.front().energy_j) <= 1e-9 * truth.energy_j);
  }
}

}  // namespace
}  // namespace kareus::pipeline
