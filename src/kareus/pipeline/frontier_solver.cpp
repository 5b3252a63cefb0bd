// solve_frontier: Phillips–Dessouky's steps on this thread, their plans on a second one a batch
// behind, the local search's moves found ahead while it waits, then the local search's rounds with
// each chunk's moves found on all cores; the front that gathers them all.
#include <tbb/parallel_for.h>
#include <tbb/task_group.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <optional>
#include <utility>

#include "kareus/pipeline/frontier_solver.hpp"

namespace kareus::pipeline {

Frontier solve_frontier(const OptionTable& table, const PipelineSchedule& schedule,
                        const SolverOptions& options,
                        const std::function<void(const SolverProgress&)>& progress) {
  FrontierSolver solver(table, schedule, options);
  // Online Pareto set keyed by time: energies strictly fall as time grows. A plan may carry its
  // local search moves, found ahead (see below), and, per move, those of the plan it leads to.
  using Moves = std::vector<FrontierSolver::Move>;
  struct Kept {
    FrontierPoint point;
    std::optional<Moves> moves;
    std::vector<std::optional<Moves>> next_moves;  // empty, or one per move
    double anchor_s = 0;  // the fastest time of the plans it stands for (itself, or those it dropped)
  };
  std::map<double, Kept> front;
  Frontier result;
  // Keeps `point` if no plan in the front is as fast and as frugal; drops those it dominates.
  // A plan at most a relative 1e-8 slower counts as fast enough: the local search otherwise fills
  // the front with plans nanoseconds apart, which no measurement resolves and no output format
  // tells apart. A plan dropped for a slower one is remembered by the time of the fastest plan it
  // stood for (its anchor), and only dropped while that is within 1e-8: so every plan offered keeps
  // one in the front within 1e-8 of its time and no costlier. (Without anchors such drops chain,
  // and the front drifted from the fastest plan by many steps of 1e-8.) Likewise a slower plan
  // must save more than a relative 1e-9 of energy to enter: printed to nine digits, nanojoule
  // savings would read as a slower plan of the same energy.
  auto same_time_s = [](double time_s) { return 1e-8 * time_s; };
  auto dominated = [&](double time_s, double energy_j) {
    auto after = front.upper_bound(time_s + same_time_s(time_s));
    return after != front.begin() && std::prev(after)->second.point.energy_j <= energy_j * (1 + 1e-9);
  };
  auto offer = [&](FrontierPoint point, std::optional<Moves> moves = std::nullopt) {
    ++result.total_points;
    if (dominated(point.time_s, point.energy_j)) return false;
    const double time_s = point.time_s;
    double anchor_s = time_s;
    auto after = front.lower_bound(time_s - same_time_s(time_s));
    while (after != front.end() && after->second.point.energy_j * (1 + 1e-9) >= point.energy_j) {
      if (after->first < time_s && after->second.anchor_s < time_s - same_time_s(time_s)) {
        ++after;  // faster, and standing for a plan too much faster: it stays
        continue;
      }
      anchor_s = std::min(anchor_s, after->second.anchor_s);
      after = front.erase(after);
    }
    front.insert_or_assign(time_s, Kept{std::move(point), std::move(moves), {}, anchor_s});
    return true;
  };
  const bool local_search = options.local_search_rounds > 0;
  // The plan a local search move leads to.
  auto moved = [](const FrontierPoint& origin, const FrontierSolver::Move& m) {
    FrontierPoint plan = origin;
    plan.assignment[m.node] = m.option;
    plan.time_s = m.time_s;
    plan.energy_j = m.energy_j;
    return plan;
  };

  // Phillips–Dessouky steps run on this thread; batches of their planned durations are turned into
  // plans and offered to the front on another, one batch behind. Evaluation is about half the work
  // of the steps, and in step order, so the result is the same as one thread's. Until the next
  // batch is ready, that thread goes on to find local search moves, which depend on the plan alone,
  // and which it would otherwise find after the steps: first those of the plans that entered the
  // front, then, for a second round, those of the plans their faster moves lead to (the moves the
  // second round expands, when they enter; one not on the front now never will be).
  constexpr std::size_t kStepBatch = 32;
  std::vector<FrontierSolver::PlannedStep> batch, evaluating;
  // Evaluating side only: plans that entered, and those of them whose moves it found.
  std::vector<double> entered_in_steps, expanded_in_steps;
  std::size_t next_ahead = 0, next_expanded = 0, next_move = 0;
  std::atomic<bool> batch_ready{false};
  tbb::task_group evaluation;
  // Finds one plan's moves ahead; false when there is nothing left to find.
  auto find_moves_ahead = [&] {
    while (next_ahead < entered_in_steps.size()) {
      auto it = front.find(entered_in_steps[next_ahead++]);
      if (it == front.end() || it->second.moves) continue;
      it->second.moves = solver.neighbours(it->second.point);
      if (options.local_search_rounds > 1) expanded_in_steps.push_back(it->first);
      return true;
    }
    for (; next_expanded < expanded_in_steps.size(); ++next_expanded, next_move = 0) {
      auto it = front.find(expanded_in_steps[next_expanded]);
      if (it == front.end() || !it->second.moves) continue;
      Kept& kept = it->second;
      kept.next_moves.resize(kept.moves->size());
      for (; next_move < kept.moves->size(); ++next_move) {
        const FrontierSolver::Move& m = (*kept.moves)[next_move];
        if (m.time_s >= kept.point.time_s || dominated(m.time_s, m.energy_j)) continue;
        kept.next_moves[next_move++] = solver.neighbours(moved(kept.point, m));
        return true;
      }
    }
    return false;
  };
  auto evaluate_batch = [&] {
    for (const FrontierSolver::PlannedStep& step : evaluating) {
      for (FrontierPoint& point : solver.evaluate(step)) {
        const double time_s = point.time_s;
        if (offer(std::move(point)) && local_search) entered_in_steps.push_back(time_s);
      }
    }
    while (!batch_ready.load(std::memory_order_relaxed) && find_moves_ahead()) {}
  };
  auto finish_evaluation = [&] {
    batch_ready = true;
    evaluation.wait();
    batch_ready = false;
  };
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
  } catch (...) {
    try {
      finish_evaluation();  // it refers to this frame
    } catch (...) {         // the first error is the one to report
    }
    throw;
  }
  finish_evaluation();
  // Pareto local search: each plan of the front is expanded into its one-option neighbours, and
  // each neighbour that enters the front is expanded in the next round. Phillips–Dessouky works on
  // the options' convex hull; this recovers discrete combinations between its plans. Every plan
  // that enters is expanded, by a faster move or a slower one: expanding only those a faster move
  // found (as two rounds once did) left gaps of up to 11% to the exact frontier on irregular tables.
  // The rounds end when none enters (no plan of the front has an improving move), or at the budget.
  //
  // Plans are expanded in chunks, taken from the front as it stands and copied: a chunk's moves are
  // found in parallel while this thread offers the previous chunk's, in order. So the result does
  // not depend on the number of threads, and two chunks of plans are copied at a time.
  constexpr std::size_t kChunk = 64;
  struct Chunk {
    std::vector<FrontierPoint> origins;
    std::vector<std::optional<Moves>> moves;  // per origin; some found ahead
    std::vector<std::vector<std::optional<Moves>>> next_moves;  // per origin, as in Kept
  };
  long expansions = 0;
  int rounds = 0;
  std::vector<double> pending;
  for (const auto& [time, kept] : front) pending.push_back(time);
  // The plans of pending[first, first + kChunk) still in the front, with the moves found ahead.
  auto take_chunk = [&](std::size_t first, Chunk& chunk) {
    chunk.origins.clear();
    chunk.moves.clear();
    chunk.next_moves.clear();
    for (std::size_t k = first; k < std::min(first + kChunk, pending.size()); ++k) {
      auto it = front.find(pending[k]);
      if (it == front.end()) continue;  // dominated since
      chunk.origins.push_back(it->second.point);
      chunk.moves.push_back(std::exchange(it->second.moves, std::nullopt));
      chunk.next_moves.push_back(std::exchange(it->second.next_moves, {}));
    }
  };
  auto find_moves = [&solver](Chunk& chunk) {
    tbb::parallel_for(std::size_t{0}, chunk.origins.size(), [&](std::size_t k) {
      if (!chunk.moves[k]) chunk.moves[k] = solver.neighbours(chunk.origins[k]);
    });
  };
  Chunk chunks[2];  // the one being offered, the one whose moves are being found
  tbb::task_group expansion;
  try {
    // The budget is counted in expansions times instructions (an expansion's cost grows with the
    // DAG), and checked before each round after the first: a round starts only if it fits.
    const double instructions = static_cast<double>(solver.dag().num_nodes());
    for (int round = 0; round < options.local_search_rounds && !pending.empty(); ++round) {
      if (round > 0 && static_cast<double>(expansions + static_cast<long>(pending.size())) * instructions >
                           options.local_search_budget) {
        break;
      }
      std::vector<double> entered;
      take_chunk(0, chunks[0]);
      expansion.run([&find_moves, &chunks] { find_moves(chunks[0]); });
      for (std::size_t c = 0; c * kChunk < pending.size(); ++c) {
        if (progress) {
          progress({solver.stats().steps, solver.planned_time_s(), &solver.stats(), round + 1, c * kChunk,
                    pending.size()});
        }
        expansion.wait();
        if ((c + 1) * kChunk < pending.size()) {
          Chunk* next = &chunks[(c + 1) % 2];
          take_chunk((c + 1) * kChunk, *next);
          expansion.run([&find_moves, next] { find_moves(*next); });
        }
        Chunk& ready = chunks[c % 2];
        for (std::size_t k = 0; k < ready.origins.size(); ++k) {
          const Moves& moves = *ready.moves[k];
          for (std::size_t i = 0; i < moves.size(); ++i) {
            const FrontierSolver::Move& m = moves[i];
            if (dominated(m.time_s, m.energy_j)) {  // spare the copy
              ++result.total_points;
              continue;
            }
            std::optional<Moves> next_moves;
            if (i < ready.next_moves[k].size()) next_moves = std::move(ready.next_moves[k][i]);
            if (offer(moved(ready.origins[k], m), std::move(next_moves))) entered.push_back(m.time_s);
          }
        }
      }
      expansions += static_cast<long>(pending.size());
      rounds = round + 1;
      // A time enters twice when a plan replaces one of the same time that entered before it.
      std::ranges::sort(entered);
      entered.erase(std::unique(entered.begin(), entered.end()), entered.end());
      pending = std::move(entered);
    }
  } catch (...) {
    try {
      expansion.wait();  // it refers to this frame
    } catch (...) {
    }
    throw;
  }
  for (auto& [time, kept] : front) result.points.push_back(std::move(kept.point));
  result.stats = solver.stats();
  result.stats.local_search_expansions = expansions;
  result.stats.local_search_rounds = rounds;
  result.stats.local_search_converged = local_search && pending.empty();
  return result;
}

}  // namespace kareus::pipeline
