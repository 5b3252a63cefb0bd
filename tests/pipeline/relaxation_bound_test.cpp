// The relaxation's bound: no plan beats it (against enumeration on irregular tables), and it is the
// relaxation's own optimum (against the dual of a chain, computed apart, and at the slow end).
#include "kareus/pipeline/relaxation_bound.hpp"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "exact_reference.hpp"
#include "kareus/core/error.hpp"
#include "kareus/pipeline/frontier_solver.hpp"

namespace kareus::pipeline {
namespace {

// Every plan of the exact discrete front spends at least the bound at its time.
RC_GTEST_PROP(RelaxationBound, NoPlanBeatsIt, ()) {
  std::mt19937_64 rng(*rc::gen::arbitrary<std::uint64_t>());
  const int stages = *rc::gen::inRange(1, 3);
  const int microbatches = *rc::gen::inRange(1, stages == 1 ? 5 : 4);
  const double p = *rc::gen::element(0.0, 60.0, 83.64, 140.0);
  const auto kind = *rc::gen::element(schedule::ScheduleKind::k1F1B, schedule::ScheduleKind::kGPipe,
                                      schedule::ScheduleKind::kZeroBubbleH1);
  const bool split = kind == schedule::ScheduleKind::kZeroBubbleH1;  // B and W, each with options of its own
  const OptionTable table = testing::irregular_table(rng, stages, p, split ? 3 : 4, split);
  const auto schedule = schedule::PipelineSchedule::make(kind, stages, split ? std::min(microbatches, 2) : microbatches);
  RC_PRE(testing::assignment_count(table, schedule) <= 20000.0);
  const RelaxationBound bound(table, schedule::InstructionDag(schedule), p);
  for (const TimeEnergy& q : testing::enumerated_frontier(table, schedule, p)) {
    RC_ASSERT(bound.energy_j(q.time_s) <= q.energy_j * (1 + 1e-9) + 1e-9);
  }
}

// The least effective energy instruction `ins` can spend in `duration_s` if it may run any mix of
// its options (the relaxation's own cost), from the options alone: the mix of an LP with two
// constraints needs two options, one at most as slow as the duration, and a mix slower than the
// duration's time is no cheaper than its two ends. A duration read from the potentials may fall an
// ulp short of the option it is, so an option that much slower fits.
double relaxed_energy_j(const std::vector<StageOption>& options, double p, double duration_s) {
  const double fits_s = duration_s * (1 + 1e-12);
  double best = std::numeric_limits<double>::infinity();
  for (const StageOption& a : options) {
    if (a.time_s > fits_s) continue;
    const double ea = a.energy_j - p * a.time_s;
    best = std::min(best, ea);
    for (const StageOption& b : options) {
      if (b.time_s <= fits_s) continue;
      const double eb = b.energy_j - p * b.time_s;
      best = std::min(best, ea + (eb - ea) * (std::max(duration_s, a.time_s) - a.time_s) / (b.time_s - a.time_s));
    }
  }
  return best;
}

// Where the relaxation's lines meet, the durations the bound's visitor sees are the relaxation's
// optimum: a feasible mix whose energy at its own makespan is the bound there (strong duality,
// checked against the options' mixes computed apart), from the slowest makespan to the fastest. And
// each rounded to a plan (FrontierSolver::relaxation_plan) is no slower than that makespan.
RC_GTEST_PROP(RelaxationBound, VisitsTheRelaxationsOptimaWhereItsLinesMeet, ()) {
  std::mt19937_64 rng(*rc::gen::arbitrary<std::uint64_t>());
  const int stages = *rc::gen::inRange(1, 5);
  const double p = *rc::gen::element(0.0, 60.0, 83.64, 140.0);
  const auto kind = *rc::gen::element(schedule::ScheduleKind::k1F1B, schedule::ScheduleKind::kGPipe,
                                      schedule::ScheduleKind::kZeroBubbleH1);
  const bool split = kind == schedule::ScheduleKind::kZeroBubbleH1;
  const OptionTable table = testing::irregular_table(rng, stages, p, 6, split);
  const auto schedule = schedule::PipelineSchedule::make(kind, stages, *rc::gen::inRange(1, 7));
  const schedule::InstructionDag dag(schedule);
  std::vector<std::vector<double>> optima;
  const RelaxationBound bound(table, dag, p, [&](std::span<const double> d) { optima.emplace_back(d.begin(), d.end()); });
  RC_ASSERT(optima.size() >= 2u);
  const FrontierSolver solver(table, schedule, {.p_blocking_w = p});
  for (const std::vector<double>& durations : optima) {
    const double makespan = dag.makespan<double>(durations);
    double energy = p * table.num_stages() * makespan;
    for (std::size_t v = 0; v < dag.num_nodes(); ++v) {
      energy += relaxed_energy_j(options_of(table, dag.instruction(v)), p, durations[v]);
    }
    RC_ASSERT(std::isfinite(energy));  // no duration faster than the instruction's fastest option
    // At least the bound, as every mix is; and the bound, but for the margin it gives up to rounding,
    // once for its own terms and once for the mix's, which sum the same prices of near-tie options.
    const double lowest = bound.energy_j(makespan), rounding = 1e-8 * std::abs(energy);
    RC_ASSERT(energy >= lowest - rounding);
    RC_ASSERT(energy <= lowest + 2 * bound.rounding_margin_j(makespan) + rounding);
    RC_ASSERT(solver.relaxation_plan(durations).time_s <= makespan * (1 + 1e-9));
  }
  RC_ASSERT(std::abs(dag.makespan<double>(optima.front()) - bound.slowest_time_s()) <= 1e-9 * bound.slowest_time_s());
  RC_ASSERT(std::abs(dag.makespan<double>(optima.back()) - bound.fastest_time_s()) <= 1e-9 * bound.fastest_time_s());
}

// A one-stage pipeline is a chain: its plans' durations add up, so the relaxation's dual is one
// number, the price f of a second, and its optimum is max over f of Σ_v min_k (e_vk + f·t_vk) − f·T.
// That maximum is at f = 0 or where two of an instruction's options tie, so trying every such f
// finds it: no hull, no flow. Also returns the magnitude of the terms the optimum sums (Σ |e + f·t|
// + f·T), which sizes the rounding margin the bound gives up (relaxation_bound.cpp).
std::pair<double, double> chain_relaxation(const OptionTable& table, const schedule::PipelineSchedule& schedule,
                                           double p, double time_s) {
  std::vector<const std::vector<StageOption>*> nodes;
  for (const schedule::Instruction& ins : schedule.stage_order(0)) nodes.push_back(&options_of(table, ins));
  std::vector<double> prices{0.0};
  for (const auto* options : nodes) {
    for (const StageOption& a : *options) {
      for (const StageOption& b : *options) {
        const double ea = a.energy_j - p * a.time_s, eb = b.energy_j - p * b.time_s;
        if (a.time_s > b.time_s && eb > ea) prices.push_back((eb - ea) / (a.time_s - b.time_s));
      }
    }
  }
  double best = -std::numeric_limits<double>::infinity(), magnitude = 0;
  for (double f : prices) {
    double dual = -f * time_s, terms = f * time_s;
    for (const auto* options : nodes) {
      double least = std::numeric_limits<double>::infinity();
      for (const StageOption& o : *options) least = std::min(least, o.energy_j - p * o.time_s + f * o.time_s);
      dual += least;
      terms += std::abs(least) + f * std::ranges::max(*options, {}, &StageOption::time_s).time_s;
    }
    if (dual > best) best = dual, magnitude = terms;
  }
  return {best + p * time_s, magnitude};
}

// Options at distinct times (at least 1% apart) of random power, dominated ones among them: the
// irregular tables' near-ties price a second at up to ~1e10 J/s, past what doubles resolve here.
OptionTable distinct_table(std::mt19937_64& rng, double p, int max_options) {
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  OptionTable table;
  table.options.resize(1);
  for (schedule::InstructionType type : {schedule::InstructionType::kForward, schedule::InstructionType::kBackward}) {
    const int count = std::uniform_int_distribution<int>(1, max_options)(rng);
    const double base_s = 0.005 + 0.045 * unit(rng);
    std::vector<StageOption> options;
    for (int k = 0; k < count; ++k) {
      const double time_s = base_s * (1 + 0.02 * k + 0.01 * unit(rng));
      options.push_back({1410 - 15.0 * k, time_s, (p + 20 + 400 * unit(rng)) * time_s, nullptr});
    }
    table.at(0, type) = std::move(options);
  }
  return table;
}

RC_GTEST_PROP(RelaxationBound, IsTheRelaxationsOptimumOnAChain, ()) {
  std::mt19937_64 rng(*rc::gen::arbitrary<std::uint64_t>());
  const double p = *rc::gen::element(0.0, 60.0, 83.64, 140.0);
  const OptionTable table = distinct_table(rng, p, *rc::gen::inRange(1, 12));
  const auto schedule = schedule::PipelineSchedule::make(schedule::ScheduleKind::k1F1B, 1, *rc::gen::inRange(1, 9));
  const RelaxationBound bound(table, schedule::InstructionDag(schedule), p);
  // The chain's makespans at its fastest options and at its (fastest) options of least effective energy.
  double fastest = 0, slowest = 0;
  for (const schedule::Instruction& ins : schedule.stage_order(0)) {
    const auto& options = options_of(table, ins);
    fastest += std::ranges::min(options, {}, &StageOption::time_s).time_s;
    slowest += std::ranges::min(options, {}, [&](const StageOption& o) {
                 return std::pair(o.energy_j - p * o.time_s, o.time_s);
               }).time_s;
  }
  RC_ASSERT(std::abs(bound.fastest_time_s() - fastest) <= 1e-12 * fastest);
  RC_ASSERT(std::abs(bound.slowest_time_s() - slowest) <= 1e-12 * slowest);
  for (int i = 0; i <= 8; ++i) {
    const double t = fastest + (slowest - fastest) * i / 8.0;
    const auto [reference, magnitude] = chain_relaxation(table, schedule, p, t);
    RC_ASSERT(std::abs(bound.energy_j(t) - reference) <= 1e-9 * std::abs(reference) + 1e-10 * magnitude + 1e-9);
  }
}

// From the slowest relaxed makespan on, every instruction at its option of least effective energy is
// a plan of that time, and the bound is its energy: tight, growing at P_blocking per stage-second.
TEST(RelaxationBound, IsTightWhereEveryInstructionTakesItsLeastEffectiveEnergy) {
  std::mt19937_64 rng(7);
  const double p = 83.64;
  const OptionTable table = testing::irregular_table(rng, 4, p, 8);
  const auto schedule = schedule::PipelineSchedule::make(schedule::ScheduleKind::k1F1B, 4, 8);
  const schedule::InstructionDag dag(schedule);
  std::vector<std::uint16_t> frugal;  // of equal effective energies the fastest
  for (const schedule::Instruction& ins : dag.instructions()) {
    const auto& options = options_of(table, ins);
    const auto least = std::ranges::min_element(options, {}, [&](const StageOption& o) {
      return std::pair(o.energy_j - p * o.time_s, o.time_s);
    });
    frugal.push_back(static_cast<std::uint16_t>(least - options.begin()));
  }
  const TimeEnergy plan = evaluate_assignment(table, dag, frugal, p);
  const RelaxationBound bound(table, dag, p);
  EXPECT_NEAR(bound.slowest_time_s(), plan.time_s, 1e-12);
  EXPECT_NEAR(bound.energy_j(plan.time_s), plan.energy_j, 1e-9 * plan.energy_j);
  EXPECT_NEAR(bound.energy_j(plan.time_s + 1), plan.energy_j + 4 * p, 1e-9 * plan.energy_j);
}

// On a measured profile the solver's front lies above the bound everywhere and near it, where the
// line of no flow (every instruction at its least effective energy at every time) is far below the
// fastest plan.
TEST(RelaxationBound, BoundsGpt3FrontClosely) {
  const OptionTable table =
      read_option_table(KAREUS_DATA_DIR "/perseus-sosp24/stage_profile/gpt3-175b+a100_sxm_bf16.csv", 8);
  const auto schedule = schedule::PipelineSchedule::make(schedule::ScheduleKind::k1F1B, 8, 8);
  const Frontier front = solve_frontier(table, schedule, {.p_blocking_w = 83.64});
  const RelaxationBound bound(table, schedule::InstructionDag(schedule), 83.64);
  double worst = 0;
  for (const FrontierPoint& q : front.points) {
    const double lower = bound.energy_j(q.time_s);
    EXPECT_LE(lower, q.energy_j * (1 + 1e-12));
    worst = std::max(worst, q.energy_j / lower - 1);
  }
  EXPECT_LT(worst, 0.01);
  std::vector<TimeEnergy> plans;
  for (const FrontierPoint& q : front.points) plans.push_back(q.time_energy());
  EXPECT_DOUBLE_EQ(bound.worst_gap(plans).relative, worst);
  const FrontierPoint& fastest = front.points.front();
  // A plan below the bound (here a made-up one) shows as a negative gap, not as none.
  EXPECT_LT(bound.worst_gap(std::vector<TimeEnergy>{{fastest.time_s, fastest.energy_j / 2}}).relative, -0.4);
  const double no_flow = bound.energy_j(bound.slowest_time_s()) - 8 * 83.64 * (bound.slowest_time_s() - fastest.time_s);
  EXPECT_GT(fastest.energy_j / no_flow - 1, 0.05);
}

// Against HiGHS's relaxation of the same deadline problem, recorded (`bench/mip_reference.py --profile
// ... --stages 8 --microbatches M --p-blocking 83.64 --relaxation`, its lp_j at the fastest plan's
// time): where the flows are largest, at the fastest plans, a flow left on a stale segment once
// blocked the longest paths and left the bound up to 0.4% below.
TEST(RelaxationBound, IsHighsRelaxationAtTheFastestPlans) {
  struct Case {
    const char* profile;
    int microbatches;
    double time_s, lp_j;
  };
  for (const Case& c : {Case{"gpt3-175b+a100_sxm_bf16.csv", 12, 2.836510770, 6160.417236},
                        Case{"bloom+a100_sxm_bf16.csv", 8, 2.216813610, 4389.443428},
                        Case{"bloom+a100_sxm_bf16.csv", 24, 4.615503940, 12946.815418}}) {
    const OptionTable table =
        read_option_table(std::string(KAREUS_DATA_DIR "/perseus-sosp24/stage_profile/") + c.profile, 8);
    const auto schedule = schedule::PipelineSchedule::make(schedule::ScheduleKind::k1F1B, 8, c.microbatches);
    const RelaxationBound bound(table, schedule::InstructionDag(schedule), 83.64);
    EXPECT_NEAR(bound.energy_j(c.time_s * (1 + 1e-9)), c.lp_j, 1e-7 * c.lp_j) << c.profile << " M " << c.microbatches;
  }
}

// The relaxation's plans, offered after the local search, only add to its front: every
// plan of the front without them has one with them no slower and no dearer (irregular tables, a
// search of one round, which leaves most fronts short of converged).
RC_GTEST_PROP(RelaxationPlans, OnlyAddWhatBeatsTheFront, ()) {
  std::mt19937_64 rng(*rc::gen::arbitrary<std::uint64_t>());
  const int stages = *rc::gen::inRange(1, 4);
  const double p = *rc::gen::element(0.0, 60.0, 83.64);
  const OptionTable table = testing::irregular_table(rng, stages, p, 5);
  const auto schedule = schedule::PipelineSchedule::make(schedule::ScheduleKind::k1F1B, stages, *rc::gen::inRange(1, 7));
  SolverOptions options{.p_blocking_w = p, .local_search_rounds = 1};
  const Frontier without = solve_frontier(table, schedule, options);
  options.relaxation_plans = true;
  const Frontier with = solve_frontier(table, schedule, options);
  RC_ASSERT(with.bound.has_value());
  RC_ASSERT(!without.bound.has_value());
  for (const FrontierPoint& q : without.points) {
    RC_ASSERT(std::ranges::any_of(with.points, [&](const FrontierPoint& w) {
      return w.time_s <= q.time_s * (1 + 1e-8) && w.energy_j <= q.energy_j * (1 + 1e-9);
    }));
  }
}

// A bound asked for alone is the relaxation's bound on the table, whatever the search (none
// included), and leaves the front as it was: computing it beside the solve offers no plan.
RC_GTEST_PROP(SolverBound, IsTheTablesBoundAndLeavesTheFrontAlone, ()) {
  std::mt19937_64 rng(*rc::gen::arbitrary<std::uint64_t>());
  const int stages = *rc::gen::inRange(1, 4);
  const double p = *rc::gen::element(0.0, 60.0, 83.64);
  const OptionTable table = testing::irregular_table(rng, stages, p, 5);
  const auto schedule = schedule::PipelineSchedule::make(schedule::ScheduleKind::k1F1B, stages, *rc::gen::inRange(1, 7));
  SolverOptions options{.p_blocking_w = p, .local_search_rounds = *rc::gen::inRange(0, 3)};
  const Frontier without = solve_frontier(table, schedule, options);
  options.bound = true;
  const Frontier with = solve_frontier(table, schedule, options);
  RC_ASSERT(with.bound.has_value());
  RC_ASSERT(with.total_points == without.total_points);
  RC_ASSERT(with.points.size() == without.points.size());
  for (std::size_t i = 0; i < with.points.size(); ++i) {
    RC_ASSERT(with.points[i].time_s == without.points[i].time_s);
    RC_ASSERT(with.points[i].energy_j == without.points[i].energy_j);
  }
  const RelaxationBound alone(table, schedule::InstructionDag(schedule), p);
  for (const FrontierPoint& q : with.points) RC_ASSERT(with.bound->energy_j(q.time_s) == alone.energy_j(q.time_s));
}

// Near BLOOM's fastest plans at 8 x 24 the default budget leaves the local search furthest from the
// bound; the relaxation's plans land there and bring the front's mean gap to the bound down from
// 0.26% to about 0.18% (its Lagrangian plans, each instruction at its option of least e + f·t for
// the dual's flows, got 0.21%).
TEST(RelaxationPlans, BringBloomsBudgetedFrontNearerTheBound) {
  const OptionTable table =
      read_option_table(KAREUS_DATA_DIR "/perseus-sosp24/stage_profile/bloom+a100_sxm_bf16.csv", 8);
  const auto schedule = schedule::PipelineSchedule::make(schedule::ScheduleKind::k1F1B, 8, 24);
  auto mean_gap = [&](const Frontier& front) {
    const RelaxationBound bound(table, schedule::InstructionDag(schedule), 83.64);
    double sum = 0;
    for (const FrontierPoint& q : front.points) sum += q.energy_j / bound.energy_j(q.time_s) - 1;
    return sum / static_cast<double>(front.points.size());
  };
  const double with = mean_gap(solve_frontier(table, schedule, {.p_blocking_w = 83.64, .relaxation_plans = true}));
  const double without = mean_gap(solve_frontier(table, schedule, {.p_blocking_w = 83.64}));
  EXPECT_LT(with, without - 0.0006) << with << " against " << without;
}

TEST(RelaxationBound, RejectsNegativeBlockingPower) {
  std::mt19937_64 rng(1);
  const OptionTable table = testing::irregular_table(rng, 1, 0, 3);
  const auto schedule = schedule::PipelineSchedule::make(schedule::ScheduleKind::k1F1B, 1, 2);
  EXPECT_THROW(RelaxationBound(table, schedule::InstructionDag(schedule), -1), InputError);
}

}  // namespace
}  // namespace kareus::pipeline
