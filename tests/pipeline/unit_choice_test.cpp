// The default time unit: refined from 1 ms until an operation's adjacent options rarely share a
// unit, within the walk's budget; and where the 1 ms unit hides a clock, the default finds its plan.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "exact_reference.hpp"
#include "kareus/pipeline/frontier_solver.hpp"
#include "kareus/pipeline/unit_choice.hpp"

namespace kareus::pipeline {
namespace {

// Options `spacing_s` apart from `first_s`, each faster one dearer at a rising rate (a convex
// curve, so every option is a hull vertex and the model keeps all of them).
std::vector<StageOption> spaced_options(double first_s, double spacing_s, int count) {
  std::vector<StageOption> options;
  for (int k = 0; k < count; ++k) {
    const double time_s = first_s + spacing_s * k;
    options.push_back({1410.0 - 15 * k, time_s, 10.0 - 2.0 * k + 0.1 * k * k, nullptr});
  }
  return options;
}

OperationCost cost_of(std::span<const StageOption> options) {
  return OperationCost(options, 0, 1e-3, CostModelKind::kHull, "test");
}

// The reference count: adjacent options share a unit when their nearest whole units are equal.
TEST(UnitChoice, SharedFractionCountsAdjacentOptionsInOneUnit) {
  // 20.04, 20.35, 20.66, 20.97 ms: at 1 ms units 20, 20, 21, 21 (2 of 3 pairs); at 0.2 ms 100,
  // 102, 103, 105 (none).
  const auto options = spaced_options(0.02004, 0.00031, 4);
  const std::vector<OperationCost> costs = {cost_of(options), cost_of(spaced_options(0.05, 0.01, 1))};
  EXPECT_NEAR(shared_unit_fraction(costs, 1e-3), 2.0 / 3, 1e-12);
  EXPECT_EQ(shared_unit_fraction(costs, 2e-4), 0.0);
  EXPECT_EQ(shared_unit_fraction(std::span(costs).last(1), 1e-3), 0.0);  // one option: no pairs
}

TEST(UnitChoice, RefinesUntilOptionsRarelyShareAUnit) {
  const std::vector<OperationCost> costs = {cost_of(spaced_options(0.02004, 0.00031, 4))};
  const UnitChoice choice = choose_unit(costs, 0.01, 100);
  EXPECT_EQ(choice.reason, UnitChoice::Reason::kResolves);
  EXPECT_EQ(choice.unit_time_s, 2e-4);  // 0.5 ms still puts 0.31 ms neighbours in one unit
  EXPECT_LE(choice.shared, kSharedLimit);
  EXPECT_GT(shared_unit_fraction(costs, 5e-4), kSharedLimit);
  EXPECT_NEAR(choice.walk_steps, 0.01 / 2e-4, 1e-9);
  EXPECT_EQ(describe(choice).rfind("chosen: 0.0% of adjacent options share a unit, ", 0), 0u) << describe(choice);
}

TEST(UnitChoice, KeepsOneMillisecondWhereOptionsAreFarApart) {
  const std::vector<OperationCost> costs = {cost_of(spaced_options(0.02004, 0.004, 6))};
  const UnitChoice choice = choose_unit(costs, 0.5, 100);
  EXPECT_EQ(choice.unit_time_s, 1e-3);
  EXPECT_EQ(choice.reason, UnitChoice::Reason::kResolves);
  EXPECT_EQ(choice.shared, 0.0);
}

TEST(UnitChoice, StopsWhereTheWalkWouldPassItsBudget) {
  const std::vector<OperationCost> costs = {cost_of(spaced_options(0.02004, 0.00031, 4))};
  // 2 s of walk over 768 instructions: 0.5 ms would be 4,000 steps x 768 > 1e6.
  const UnitChoice big = choose_unit(costs, 2.0, 768);
  EXPECT_EQ(big.unit_time_s, 1e-3);
  EXPECT_EQ(big.reason, UnitChoice::Reason::kWalkBudget);
  EXPECT_EQ(big.finer_unit_s, 5e-4);
  EXPECT_GT(big.finer_walk_steps * 768, kWalkBudget);
  EXPECT_NE(describe(big).find("0.0005 s would walk ~4000 steps x 768 instructions"), std::string::npos) << describe(big);
  // A quarter of the walk affords 0.5 ms, not 0.2 ms.
  const UnitChoice mid = choose_unit(costs, 0.5, 768);
  EXPECT_EQ(mid.unit_time_s, 5e-4);
  EXPECT_EQ(mid.reason, UnitChoice::Reason::kWalkBudget);
}

TEST(UnitChoice, NearDuplicatesStopAtTheFinestUnitOfTheSeries) {
  std::vector<StageOption> options = spaced_options(0.02004, 0.00031, 2);
  options[1].time_s = options[0].time_s * (1 + 1e-12);  // never apart at any unit
  const std::vector<OperationCost> costs = {cost_of(options)};
  const UnitChoice choice = choose_unit(costs, 0.01, 10);
  EXPECT_EQ(choice.reason, UnitChoice::Reason::kFinest);
  EXPECT_EQ(choice.unit_time_s, std::end(kUnitSeries)[-1]);
}

// One stage, two microbatches; the forward's slow clocks 0.16 ms apart, all three within one 1 ms
// unit, where the model keeps only the slowest (and the tight plan the fastest), and a fast clock
// 5 ms off (so the walk's finer last stretch is not where they are). Phillips–Dessouky alone (no
// local search, which would repair it on a table this small) misses the middle clock's plans at
// 1 ms and finds the exact frontier at the default unit.
TEST(UnitChoice, TheDefaultUnitFindsThePlansTheOneMillisecondUnitHides) {
  OptionTable table;
  table.options.resize(1);
  // Energies convex in time, so each option is a vertex of the hull.
  table.at(0, schedule::InstructionType::kForward) = {{1410, 0.015, 20.0, nullptr},
                                            {1200, 0.02002, 10.0, nullptr},
                                            {1185, 0.02018, 9.81, nullptr},
                                            {1170, 0.02034, 9.64, nullptr}};
  table.at(0, schedule::InstructionType::kBackward) = {{1410, 0.040, 16.0, nullptr}};
  const auto schedule = schedule::PipelineSchedule::make(schedule::ScheduleKind::k1F1B, 1, 2);
  const auto exact = testing::enumerated_frontier(table, schedule, 0);
  auto gap_at = [&](std::optional<double> unit) {
    const Frontier front = solve_frontier(table, schedule, {.unit_time_s = unit, .local_search_rounds = 0});
    std::vector<TimeEnergy> ours;
    for (const FrontierPoint& q : front.points) ours.push_back(q.time_energy());
    return std::pair{testing::frontier_gap(ours, exact).relative, front.stats.unit};
  };
  const auto [coarse_gap, coarse] = gap_at(1e-3);
  EXPECT_EQ(coarse.reason, UnitChoice::Reason::kGiven);
  EXPECT_GT(coarse_gap, 1e-3);
  const auto [gap, chosen] = gap_at(std::nullopt);
  EXPECT_EQ(chosen.unit_time_s, 2e-4);  // units 100, 101, 102; at 0.5 ms 40, 40, 41
  EXPECT_EQ(chosen.reason, UnitChoice::Reason::kResolves);
  EXPECT_LE(gap, 1e-12);
}

}  // namespace
}  // namespace kareus::pipeline
