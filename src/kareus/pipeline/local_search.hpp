// Pareto local search after Phillips–Dessouky, which is exact on the options' convex hull only:
// discrete combinations between its plans can be cheaper. Each plan of the front is expanded into
// its one-option neighbours, and each neighbour that enters the front is expanded in the next round,
// until none enters (no plan of the front has an improving move) or the budget is spent. Then every
// plan is expanded once more with the cut move too (several instructions at once, where longest
// paths run side by side), and the rounds go on until neither kind enters; then once more with wide
// moves (each instruction up to SolverOptions::wide_move_reach candidates either way, with the cut
// move), until none of those enters: the search has converged.
//
// Thread-safety: neighbours() on any threads at any time (as FrontierSolver allows);
// run_local_search uses the calling thread and oneTBB's, with a result that does not depend on how
// many.
// Example:
//   for (const Move& m : neighbours(solver, plan)) offer(moved(plan, m));
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "kareus/pipeline/frontier_solver.hpp"
#include "kareus/pipeline/plan_front.hpp"

namespace kareus::pipeline {

// A plan one option away from another: `node` takes table option `option`; the plan's true time
// and energy. A cut move (see neighbours) changes more instructions: those are in `also`.
struct Move {
  std::size_t node = 0;
  std::uint16_t option = 0;
  double time_s = 0, energy_j = 0;
  std::vector<std::pair<std::size_t, std::uint16_t>> also;  // more (node, option) changes
};

// The moves from `plan` (a plan of `solver`) that can pay: of each instruction one candidate
// slower (and on past near-ties), and of each one that every critical path runs through one and
// two candidates faster; where longest paths run side by side, the cut move: every instruction of a
// cut of the critical paths one candidate faster, the cut of least extra energy per second saved,
// with the slack that opens reclaimed. Those that neither the plan nor another move dominates; time
// ascending.
std::vector<Move> neighbours(const FrontierSolver& solver, const FrontierPoint& plan, bool with_cut_move = false);

// neighbours() with the cut move, where each instruction moves up to `reach` candidates either way
// (at least two), not one slower and two faster: where the candidates' energies are not convex in
// their order, the plan one candidate on is dominated and one further on is not (on the composed
// table of llama3.2-3b-tp8-mbs8-seq4096, stage 1's backward of microbatch 0 two candidates slower
// enters a front that one candidate slower does not). With them, exchanges: an instruction off some
// longest path one candidate faster and a neighbour of it in the DAG as much slower as the room that
// opens allows, at the same makespan. A superset of neighbours(plan, true).
std::vector<Move> wide_neighbours(const FrontierSolver& solver, const FrontierPoint& plan, std::size_t reach);

// The plan a move from `origin` leads to.
FrontierPoint moved(FrontierPoint origin, const Move& move);

// What a plan of the front carries for the local search: its moves when found ahead (while the
// steps ran).
struct MovesFound {
  std::optional<std::vector<Move>> moves;
};
using SearchFront = PlanFront<MovesFound>;

struct LocalSearchOutcome {
  long expansions = 0;
  int rounds = 0;
  bool converged = false;  // no plan of the front has a move that enters it
  long wide_expansions = 0;  // of the expansions, those with wide moves
};

// Runs the rounds on `front` (every plan of it still to expand) within options.local_search_rounds
// and options.local_search_budget (see SolverOptions).
LocalSearchOutcome run_local_search(const FrontierSolver& solver, SearchFront& front, const SolverOptions& options,
                                    const std::function<void(const SolverProgress&)>& progress);

}  // namespace kareus::pipeline
