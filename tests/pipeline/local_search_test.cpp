// The local search's moves (plan_moves.cpp) and what its rounds do to the front.
#include "kareus/pipeline/local_search.hpp"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <set>
#include <tuple>

#include "kareus/core/error.hpp"
#include "exact_reference.hpp"
#include "test_tables.hpp"
#include "test_util.hpp"

namespace kareus::pipeline {
namespace {
// A small random pipeline for the local search properties (1–3 stages, 1–5 microbatches). Half of
// them have every stage like the first, as a pipeline of equal layers does: longest paths then run
// side by side, where the cut move is made (random stages almost never tie).
struct SmallPipeline {
  OptionTable table;
  schedule::PipelineSchedule schedule;
};
SmallPipeline random_small_pipeline() {
  const int stages = *rc::gen::inRange(1, 4);
  const int microbatches = *rc::gen::inRange(1, 6);
  OptionTable table = *testing::random_table(stages, 1, 6);
  if (*rc::gen::arbitrary<bool>()) {
    for (auto& stage : table.options) stage = table.options.front();
  }
  auto kind = *rc::gen::element(schedule::ScheduleKind::k1F1B, schedule::ScheduleKind::kGPipe);
  return {std::move(table), schedule::PipelineSchedule::make(kind, stages, microbatches)};
}

// `a` no slower and no dearer than `b`, up to rounding: the solver and evaluate_assignment sum the
// times and energies differently.
bool dominates_up_to_rounding(const TimeEnergy& a, const TimeEnergy& b) {
  return a.time_s <= b.time_s + 1e-9 && a.energy_j <= b.energy_j + 1e-6;
}

RC_GTEST_PROP(FrontierSolver, LocalSearchMovesCarryTheirTrueTimeAndEnergy, ()) {
  const auto [table, schedule] = random_small_pipeline();
  const double p = 60;
  FrontierSolver solver(table, schedule, {.p_blocking_w = p, .unit_time_s = 1e-3});
  for (auto plans = solver.next(); !plans.empty(); plans = solver.next()) {
    for (const FrontierPoint& plan : plans) {
      for (const Move& m : neighbours(solver, plan, /*with_cut_move=*/true)) {
        TimeEnergy truth = evaluate_assignment(table, solver.dag(), moved(plan, m).assignment, p);
        RC_ASSERT(std::abs(truth.time_s - m.time_s) < 1e-9);
        RC_ASSERT(std::abs(truth.energy_j - m.energy_j) < 1e-6);
      }
    }
  }
}

// A thread keeps its cut move's flow and its exchanges' buffers from one plan to the next, and
// rebuilds the flow's topology for another DAG: a plan's moves must not depend on what the thread
// expanded before. A plan of another pipeline, every plan of the steps in step order (wide moves and
// the cut move), the other plan again, then the steps' plans in reverse order: the same moves, to
// the bit.
RC_GTEST_PROP(FrontierSolver, APlansMovesDoNotDependOnThePlansExpandedBefore, ()) {
  const auto [table, schedule] = random_small_pipeline();
  const auto [other_table, other_schedule] = random_small_pipeline();
  const std::size_t reach = *rc::gen::inRange<std::size_t>(2, 6);
  FrontierSolver solver(table, schedule, {.p_blocking_w = 60, .unit_time_s = 1e-3});
  FrontierSolver other(other_table, other_schedule, {.p_blocking_w = 60, .unit_time_s = 1e-3});
  using Found = std::vector<
      std::tuple<std::size_t, std::uint16_t, double, double, std::vector<std::pair<std::size_t, std::uint16_t>>>>;
  auto moves_of = [&](const FrontierSolver& of, const FrontierPoint& plan) {
    Found found;
    auto record = [&](const std::vector<Move>& moves) {
      for (const Move& m : moves) found.emplace_back(m.node, m.option, m.time_s, m.energy_j, m.also);
    };
    record(wide_neighbours(of, plan, reach));
    record(neighbours(of, plan, /*with_cut_move=*/true));
    return found;
  };
  auto plans_of = [](FrontierSolver& of) {
    std::vector<FrontierPoint> plans;
    for (auto step = of.next(); !step.empty(); step = of.next()) plans.insert(plans.end(), step.begin(), step.end());
    return plans;
  };
  const std::vector<FrontierPoint> plans = plans_of(solver), other_plans = plans_of(other);
  RC_PRE(!plans.empty() && !other_plans.empty());
  const FrontierPoint& other_plan = other_plans[other_plans.size() / 2];
  const Found other_first = moves_of(other, other_plan);
  std::vector<Found> forwards;
  for (const FrontierPoint& plan : plans) forwards.push_back(moves_of(solver, plan));
  RC_ASSERT(moves_of(other, other_plan) == other_first);
  for (std::size_t k = plans.size(); k-- > 0;) RC_ASSERT(moves_of(solver, plans[k]) == forwards[k]);
}

// The faster moves are found through the instructions every critical path runs through and the
// longest path avoiding each, and only the moves no other move dominates are returned. Brute force
// over every move of one instruction one candidate slower or up to two faster must find none that the plan or a returned move does not dominate,
// and no returned move may dominate another.
RC_GTEST_PROP(FrontierSolver, LocalSearchOffersEveryMoveThatCanPay, ()) {
  const auto [table, schedule] = random_small_pipeline();
  const int stages = table.num_stages();
  const double p = 60;
  FrontierSolver solver(table, schedule, {.p_blocking_w = p, .unit_time_s = 1e-3});
  const schedule::InstructionDag& dag = solver.dag();
  std::vector<OperationCost> costs;  // per (stage, type), as the solver builds them
  for (int s = 0; s < stages; ++s) {
    for (schedule::InstructionType type : {schedule::InstructionType::kForward, schedule::InstructionType::kBackward}) {
      costs.emplace_back(table.at(s, type), p, 1e-3, CostModelKind::kHull, "test");
    }
  }
  for (auto plans = solver.next(); !plans.empty(); plans = solver.next()) {
    for (const FrontierPoint& plan : plans) {
      const TimeEnergy origin = evaluate_assignment(table, dag, plan.assignment, p);
      std::vector<TimeEnergy> offered{origin};
      for (const Move& m : neighbours(solver, plan)) {
        const TimeEnergy move{m.time_s, m.energy_j};
        RC_ASSERT(move.time_s < origin.time_s - 1e-9 || move.energy_j < origin.energy_j - 1e-6);
        for (std::size_t k = 1; k < offered.size(); ++k) {  // the moves' own figures: no rounding
          RC_ASSERT(offered[k].time_s > move.time_s || offered[k].energy_j > move.energy_j);
          RC_ASSERT(move.time_s > offered[k].time_s || move.energy_j > offered[k].energy_j);
        }
        offered.push_back(move);
      }
      for (std::size_t v = 0; v < dag.num_nodes(); ++v) {
        const schedule::Instruction& ins = dag.instruction(v);
        const OperationCost& c = costs[static_cast<std::size_t>(ins.stage) * 2 + static_cast<std::size_t>(ins.type)];
        const std::size_t at = c.candidate_of(plan.assignment[v]);
        for (std::size_t to : {at - 2, at - 1, at + 1}) {
          if (to >= c.options().size()) continue;  // at − 1 wraps around at 0
          std::vector<std::uint16_t> moved = plan.assignment;
          moved[v] = static_cast<std::uint16_t>(c.options()[to].option);
          const TimeEnergy move = evaluate_assignment(table, dag, moved, p);
          RC_ASSERT(std::ranges::any_of(offered, [&](const TimeEnergy& o) { return dominates_up_to_rounding(o, move); }));
        }
      }
    }
  }
}

// The slower moves' bound: per node and candidate, the least over that candidate and every slower
// one of effective energy plus the stages' idle power times the time, and one of them attains it.
RC_GTEST_PROP(FrontierSolver, LeastEnergyFromIsTheLeastOverTheSlowerCandidates, ()) {
  const auto [table, schedule] = random_small_pipeline();
  const double p = *rc::gen::element(0.0, 30.0, 60.0);
  FrontierSolver solver(table, schedule, {.p_blocking_w = p, .unit_time_s = 1e-3});
  const auto candidates = solver.candidates();
  const auto least = solver.least_energy_from();
  RC_ASSERT(least.size() == solver.dag().num_nodes());
  const double idle_power_w = p * table.num_stages();
  for (std::size_t v = 0; v < least.size(); ++v) {
    RC_ASSERT(least[v].size() == candidates[v].size());
    for (std::size_t k = 0; k < least[v].size(); ++k) {
      bool attained = false;
      for (std::size_t j = k; j < candidates[v].size(); ++j) {
        const double cost = candidates[v][j].effective_energy_j + idle_power_w * candidates[v][j].time_s;
        RC_ASSERT(least[v][k] <= cost);
        attained = attained || least[v][k] == cost;
      }
      RC_ASSERT(attained);
    }
  }
}

// Wide moves, brute force: each carries its true time and energy; every move of one instruction up to
// `reach` candidates either way is dominated by the plan or a returned move; and so is every move
// neighbours() offers with the cut move (wide moves are a superset).
RC_GTEST_PROP(FrontierSolver, WideMovesOfferEveryMoveWithinTheirReachThatCanPay, ()) {
  const auto [table, schedule] = random_small_pipeline();
  const double p = 60;
  const std::size_t reach = *rc::gen::inRange<std::size_t>(2, 6);
  FrontierSolver solver(table, schedule, {.p_blocking_w = p, .unit_time_s = 1e-3});
  const schedule::InstructionDag& dag = solver.dag();
  const auto candidates = solver.candidates();
  for (auto plans = solver.next(); !plans.empty(); plans = solver.next()) {
    for (const FrontierPoint& plan : plans) {
      const TimeEnergy origin = evaluate_assignment(table, dag, plan.assignment, p);
      std::vector<TimeEnergy> offered{origin};
      for (const Move& m : wide_neighbours(solver, plan, reach)) {
        const TimeEnergy truth = evaluate_assignment(table, dag, moved(plan, m).assignment, p);
        RC_ASSERT(std::abs(truth.time_s - m.time_s) < 1e-9);
        RC_ASSERT(std::abs(truth.energy_j - m.energy_j) < 1e-6);
        offered.push_back({m.time_s, m.energy_j});
      }
      auto covered = [&](const TimeEnergy& move) {
        return std::ranges::any_of(offered, [&](const TimeEnergy& o) { return dominates_up_to_rounding(o, move); });
      };
      for (std::size_t v = 0; v < dag.num_nodes(); ++v) {
        const std::size_t at = solver.candidate_index(v, plan.assignment[v]);
        for (std::size_t to = at - std::min(at, reach); to < std::min(candidates[v].size(), at + reach + 1); ++to) {
          std::vector<std::uint16_t> changed = plan.assignment;
          changed[v] = static_cast<std::uint16_t>(candidates[v][to].option);
          const TimeEnergy move = evaluate_assignment(table, dag, changed, p);
          RC_ASSERT(covered(move));
        }
      }
      for (const Move& m : neighbours(solver, plan, /*with_cut_move=*/true)) RC_ASSERT(covered({m.time_s, m.energy_j}));
    }
  }
}

RC_GTEST_PROP(FrontierSolver, LocalSearchOnlyImprovesTheFront, ()) {
  const int stages = *rc::gen::inRange(1, 4);
  const int microbatches = *rc::gen::inRange(1, 6);
  OptionTable table = *testing::random_table(stages, 2, 6);
  auto schedule = schedule::PipelineSchedule::make(schedule::ScheduleKind::k1F1B, stages, microbatches);
  Frontier plain = solve_frontier(table, schedule, {.p_blocking_w = 60, .local_search_rounds = 0});
  Frontier searched = solve_frontier(table, schedule, {.p_blocking_w = 60});
  std::vector<TimeEnergy> points;
  for (const FrontierPoint& q : searched.points) {
    TimeEnergy truth = evaluate_assignment(table, schedule::InstructionDag(schedule), q.assignment, 60);
    RC_ASSERT(std::abs(truth.time_s - q.time_s) < 1e-9);
    RC_ASSERT(std::abs(truth.energy_j - q.energy_j) < 1e-6);
    points.push_back(q.time_energy());
  }
  for (const FrontierPoint& q : plain.points) {
    // The front counts times within 1e-8 of each other as equal.
    auto energy = min_energy_within_time(points, q.time_s * (1 + 1e-8));
    RC_ASSERT(energy.has_value());
    RC_ASSERT(*energy <= q.energy_j);
  }
}

// run_local_search on its own: run without a budget it reports convergence, and then no plan of
// the front has a move the front would take, one-option, cut or wide (the definition of converged; wide
// moves include the others); it never loses a plan
// Phillips–Dessouky's steps gave it.
RC_GTEST_PROP(FrontierSolver, ConvergedRoundsLeaveNoPlanWithAnEnteringMove, ()) {
  const auto [table, schedule] = random_small_pipeline();
  const SolverOptions options{.p_blocking_w = 60, .unit_time_s = 1e-3, .local_search_budget = 1e15};
  FrontierSolver solver(table, schedule, options);
  SearchFront front;
  std::vector<TimeEnergy> stepped;
  for (auto plans = solver.next(); !plans.empty(); plans = solver.next()) {
    for (FrontierPoint& plan : plans) {
      stepped.push_back(plan.time_energy());
      front.offer(std::move(plan));
    }
  }
  const LocalSearchOutcome outcome = run_local_search(solver, front, options, {});
  RC_ASSERT(outcome.converged);
  RC_ASSERT(outcome.rounds >= 1);
  std::vector<TimeEnergy> kept;
  for (const auto& [time_s, plan] : front.plans()) {
    kept.push_back(plan.point.time_energy());
    for (const Move& m : wide_neighbours(solver, plan.point, options.wide_move_reach)) {
      RC_ASSERT(front.dominated(m.time_s, m.energy_j));
    }
  }
  for (const TimeEnergy& p : stepped) {
    // Within the front's tolerances, which a chain of replacements can take twice (plan_front.hpp).
    auto energy = min_energy_within_time(kept, p.time_s * (1 + 2e-8));
    RC_ASSERT(energy.has_value());
    RC_ASSERT(*energy <= p.energy_j * (1 + 1e-8));
  }
}


// Where two longest paths run side by side, no one instruction shortens both: 1F1B on 2 stages and
// 2 microbatches with stage 0's backward of microbatch 0 (30 ms) beside stage 1's forward and
// backward of microbatch 1 (15 + 15 ms). From the plan below (80 ms, 13 J, on the exact frontier)
// no one-option move is faster, and the search from it alone stops above the exact frontier; the
// cut move speeds up both paths at once (80 -> 75 ms), and with it the search finds every exact
// point (checked against enumeration, tests/pipeline/exact_reference.hpp).
TEST(FrontierSolver, CutMoveLeavesALocalOptimumOfOneOptionMoves) {
  auto option = [](double time_s, double energy_j) { return StageOption{1410, time_s, energy_j, nullptr}; };
  OptionTable table;
  table.options.resize(2);
  table.at(0, schedule::OptionSlot::kForward) = {option(0.010, 1)};
  table.at(0, schedule::OptionSlot::kBackward) = {option(0.020, 3), option(0.030, 2)};
  table.at(1, schedule::OptionSlot::kForward) = {option(0.010, 2), option(0.015, 1)};
  table.at(1, schedule::OptionSlot::kBackward) = {option(0.010, 2), option(0.015, 1)};
  const auto schedule = schedule::PipelineSchedule::make(schedule::ScheduleKind::k1F1B, 2, 2);
  const std::vector<TimeEnergy> exact = testing::enumerated_frontier(table, schedule, 0);
  const schedule::InstructionDag dag(schedule);
  // Stage 0 runs F0 F1 B0 B1, stage 1 F0 B0 F1 B1: B0 on stage 0 slow, stage 1's microbatch 1 slow.
  const std::vector<std::uint16_t> assignment{0, 0, 1, 0, 0, 0, 1, 1};
  const TimeEnergy plan_te = evaluate_assignment(table, dag, assignment, 0);
  ASSERT_NEAR(plan_te.time_s, 0.080, 1e-12);
  ASSERT_NEAR(plan_te.energy_j, 13, 1e-12);
  ASSERT_NEAR(*min_energy_within_time(exact, 0.080 + 1e-12), 13, 1e-12);
  const FrontierPoint plan{.time_s = plan_te.time_s, .energy_j = plan_te.energy_j, .assignment = assignment};
  const double fastest_exact_s = exact.front().time_s;
  ASSERT_LT(fastest_exact_s, 0.075);

  for (const bool cut_moves : {false, true}) {
    // One-option moves alone: no cut move, nor the wide moves that carry it.
    const SolverOptions options{.p_blocking_w = 0,
                                .unit_time_s = 1e-3,
                                .local_search_budget = 1e15,
                                .cut_moves = cut_moves,
                                .wide_move_reach = cut_moves ? SolverOptions{}.wide_move_reach : 0};
    FrontierSolver solver(table, schedule, options);
    const std::vector<Move> moves = neighbours(solver, plan, cut_moves);
    const bool faster = std::ranges::any_of(moves, [&](const Move& m) { return m.time_s < plan.time_s - 1e-12; });
    EXPECT_EQ(faster, cut_moves);
    for (const Move& m : moves) {  // every move, compound or not, carries its true time and energy
      const TimeEnergy truth = evaluate_assignment(table, dag, moved(plan, m).assignment, 0);
      EXPECT_NEAR(truth.time_s, m.time_s, 1e-12);
      EXPECT_NEAR(truth.energy_j, m.energy_j, 1e-9);
    }
    SearchFront front;
    front.offer(plan);
    const LocalSearchOutcome outcome = run_local_search(solver, front, options, {});
    EXPECT_TRUE(outcome.converged);
    std::vector<TimeEnergy> ours;
    for (const auto& [time_s, kept] : front.plans()) ours.push_back(kept.point.time_energy());
    const double gap = testing::frontier_gap(ours, exact).relative;
    if (cut_moves) {
      EXPECT_LT(gap, 1e-12) << "with the cut move";
    } else {
      EXPECT_GT(gap, 0.05) << "one-option moves alone";  // the fastest exact plans are out of reach
      EXPECT_GT(ours.front().time_s, fastest_exact_s);
    }
  }
}

}  // namespace
}  // namespace kareus::pipeline
