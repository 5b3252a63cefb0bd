// solve_frontier: Phillips–Dessouky's steps on this thread, their plans on a second one a batch
// behind, the first round's moves found ahead while it waits; then the local search's rounds; and
// beside all of them the relaxation's bound and its optima rounded to plans, offered at the end.

#include <atomic>
#include <future>
#include <optional>
#include <utility>
#include <variant>

#include "kareus/pipeline/frontier_solver.hpp"
#include "kareus/core/parallel.hpp"
#include "kareus/pipeline/local_search.hpp"
#include "kareus/pipeline/plan_front.hpp"
#include "kareus/pipeline/relaxation_bound.hpp"

namespace kareus::pipeline {

Frontier solve_frontier(const OptionTable& table, const schedule::PipelineSchedule& schedule,
                        const SolverOptions& options,
                        const std::function<void(const SolverProgress&)>& progress) {
  FrontierSolver solver(table, schedule, options);
  SearchFront front;
  const bool local_search = options.local_search_rounds > 0;

  // The relaxation's bound depends on the table alone, and on a long pipeline costs as much as the
  // steps and the search together: it runs beside them. Its optima, rounded to plans, are gathered
  // in a front of their own and offered once the search ends: where longest paths run side by side
  // (near the fastest plans) the budget stops the local search furthest from the exact front, and
  // the steps' unit rounding leaves the fastest plans' slack unspent; the rounded optima land there.
  // Offered after the search, they only add what beats its front.
  // A thread of its own, not a task: a thread waiting in the steps' task group may pick up a task of
  // the pool, and would then run the whole bound before it steps on. The future's destructor waits
  // for it, so an error leaving this frame, which it refers to, waits too.
  std::optional<RelaxationBound> bound;
  PlanFront<std::monostate> relaxed;
  std::future<void> bounding;
  const bool relaxation_plans = local_search && options.relaxation_plans;
  if (relaxation_plans || options.bound) {
    bounding = std::async(std::launch::async, [&] {
      RelaxationBound::OptimumVisitor offer;
      if (relaxation_plans) {
        offer = [&](std::span<const double> durations) { relaxed.offer(solver.relaxation_plan(durations)); };
      }
      bound.emplace(table, solver.dag(), options.p_blocking_w, offer);
    });
  }

  // Phillips–Dessouky steps run on this thread; batches of their planned durations are turned into
  // plans and offered to the front on another, one batch behind. Evaluation is about half the work
  // of the steps, and in step order, so the result is the same as one thread's. Until the next
  // batch is ready, that thread goes on to find the local search's moves of the plans that entered
  // the front (they depend on the plan alone), which the first round would otherwise find after
  // the steps. (Finding ahead, too, those of the plans the faster moves lead to, which the second
  // round expands when they enter, spent 2% more instructions on GPT-3 8 × 48 on plans that never
  // entered, and saved no time.)
  constexpr std::size_t kStepBatch = 32;
  std::vector<FrontierSolver::PlannedStep> batch, evaluating;
  std::vector<double> entered_in_steps;  // evaluating side only: plans that entered
  std::size_t next_ahead = 0;
  std::atomic<bool> batch_ready{false};
  TaskGroup evaluation;
  // Finds one plan's moves ahead; false when there is nothing left to find.
  auto find_moves_ahead = [&] {
    while (next_ahead < entered_in_steps.size()) {
      SearchFront::Kept* kept = front.find(entered_in_steps[next_ahead++]);
      if (kept == nullptr || kept->extra.moves) continue;
      kept->extra.moves = neighbours(solver, kept->point);
      return true;
    }
    return false;
  };
  auto evaluate_batch = [&] {
    for (const FrontierSolver::PlannedStep& step : evaluating) {
      for (FrontierPoint& point : solver.evaluate(step)) {
        const double time_s = point.time_s;
        if (front.offer(std::move(point)) && local_search) entered_in_steps.push_back(time_s);
      }
    }
    while (!batch_ready.load(std::memory_order_relaxed) && find_moves_ahead()) {}
  };
  auto finish_evaluation = [&] {
    batch_ready = true;
    evaluation.wait();
    batch_ready = false;
  };
  LocalSearchOutcome searched;
  try {
    for (bool more = true; more;) {
      std::optional<FrontierSolver::PlannedStep> step = solver.advance();
      more = step.has_value();
      if (more) batch.push_back(std::move(*step));
      if (batch.size() == kStepBatch || (!more && !batch.empty())) {
        finish_evaluation();
        std::swap(batch, evaluating);
        batch.clear();
        evaluation.run(evaluate_batch);
      }
      if (progress && more && solver.stats().steps % 256 == 0) {
        progress({solver.stats().steps, solver.planned_time_s(), &solver.stats()});
      }
    }
    finish_evaluation();
    if (local_search) searched = run_local_search(solver, front, options, progress);
  } catch (...) {
    try {
      finish_evaluation();  // it refers to this frame
    } catch (...) {         // the first error is the one to report
    }
    throw;
  }
  if (bounding.valid()) bounding.get();
  Frontier result;
  result.bound = std::move(bound);
  for (auto& [time, kept] : relaxed.plans()) front.offer(std::move(kept.point));
  for (auto& [time, kept] : front.plans()) result.points.push_back(std::move(kept.point));
  // Every plan offered, once: a rounded optimum was offered to `relaxed`, and again to the front
  // only if it stayed there.
  result.total_points = front.offered() + relaxed.offered() - static_cast<long>(relaxed.plans().size());
  result.stats = solver.stats();
  result.stats.local_search_expansions = searched.expansions;
  result.stats.local_search_rounds = searched.rounds;
  result.stats.local_search_converged = local_search && searched.converged;
  result.stats.wide_move_expansions = searched.wide_expansions;
  return result;
}

}  // namespace kareus::pipeline
