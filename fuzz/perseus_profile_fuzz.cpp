// Perseus-format profiles (`stage,instruction,frequency,time,energy`, `kareus frontier
// --profile`, `hw check`): read as an option table for a two-stage pipeline (read_option_table) and
// as the stage curves `hw check` compares (read_stage_profile); an accepted table is solved for 1F1B
// over four microbatches with a small budget: the first 64 steps of the frontier, two rounds of
// local search. Every plan the solver finds is a real plan, so none may spend less than the
// relaxation's bound at its time: two independent computations held against each other. The same
// holds for the relaxation's optima rounded to plans, each also no slower than its optimum.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "fuzz_support.hpp"
#include "kareus/calibrate/power_fit.hpp"
#include "kareus/pipeline/frontier_solver.hpp"
#include "kareus/pipeline/relaxation_bound.hpp"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  kareus::fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace kareus;
  const auto path = fuzz::write_input(data, size, "profile.csv");
  fuzz::holds_contract("profile.csv", [&] { calibrate::read_stage_profile(path); });
  pipeline::OptionTable table;
  if (!fuzz::holds_contract("profile.csv", [&] { table = pipeline::read_option_table(path, 2); })) return 0;
  fuzz::holds_contract("", [&] {
    constexpr double kPBlocking = 60;
    const auto schedule = schedule::PipelineSchedule::make(schedule::ScheduleKind::k1F1B, 2, 4);
    pipeline::FrontierSolver solver(table, schedule,
                                    {.p_blocking_w = kPBlocking, .local_search_rounds = 2, .local_search_budget = 1e4});
    std::vector<pipeline::FrontierPoint> rounded;
    const pipeline::RelaxationBound bound(table, solver.dag(), kPBlocking, [&](std::span<const double> durations) {
      rounded.push_back(solver.relaxation_plan(durations));
      const double makespan = solver.dag().makespan<double>(durations);
      if (!(rounded.back().time_s <= makespan * (1 + 1e-9))) {
        fuzz::finding("relaxation plan", "slower than its optimum: " + std::to_string(rounded.back().time_s) + " s > " +
                                             std::to_string(makespan) + " s");
      }
    });
    auto check = [&](const pipeline::FrontierPoint& point) {
      if (!(point.time_s > 0) || !std::isfinite(point.energy_j)) fuzz::finding("solver", "a plan without finite time and energy");
      const double lower = bound.energy_j(point.time_s);
      if (!(lower <= point.energy_j + 1e-9 * (std::abs(point.energy_j) + kPBlocking * 2 * point.time_s))) {
        fuzz::finding("relaxation bound", "above a plan the solver found: " + std::to_string(lower) + " J > " +
                                              std::to_string(point.energy_j) + " J at " + std::to_string(point.time_s) + " s");
      }
    };
    for (const auto& point : rounded) check(point);
    int steps = 0;
    for (auto points = solver.next(); !points.empty() && steps < 64; points = solver.next(), ++steps) {
      for (const auto& point : points) check(point);
    }
  });
  return 0;
}
