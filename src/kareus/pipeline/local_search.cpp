// The local search's rounds: every plan that enters the front is expanded into its moves
// (plan_moves.cpp) in the next round, until none enters or the budget is spent.
#include "kareus/pipeline/local_search.hpp"

#include <algorithm>
#include <utility>

#include "kareus/core/parallel.hpp"

namespace kareus::pipeline {

LocalSearchOutcome run_local_search(const FrontierSolver& solver, SearchFront& front, const SolverOptions& options,
                                    const std::function<void(const SolverProgress&)>& progress) {
  // Every plan that enters is expanded, by a faster move or a slower one: expanding only those a
  // faster move found (as two rounds once did) left gaps of up to 11% to the exact frontier on
  // irregular tables.
  //
  // Plans are expanded in chunks, taken from the front as it stands and copied: a chunk's moves are
  // found in parallel while this thread offers the previous chunk's, in order. So the result does
  // not depend on the number of threads, and two chunks of plans are copied at a time.
  constexpr std::size_t kChunk = 64;
  using Moves = std::vector<Move>;
  struct Chunk {
    std::vector<FrontierPoint> origins;
    std::vector<std::optional<Moves>> moves;  // per origin; some found ahead
  };
  LocalSearchOutcome outcome;
  std::vector<double> pending;
  for (const auto& [time, kept] : front.plans()) pending.push_back(time);
  // The plans of pending[first, first + kChunk) still in the front, with the moves found ahead.
  auto take_chunk = [&](std::size_t first, Chunk& chunk) {
    chunk.origins.clear();
    chunk.moves.clear();
    for (std::size_t k = first; k < std::min(first + kChunk, pending.size()); ++k) {
      SearchFront::Kept* kept = front.find(pending[k]);
      if (kept == nullptr) continue;  // dominated since
      chunk.origins.push_back(kept->point);
      chunk.moves.push_back(std::exchange(kept->extra.moves, std::nullopt));
    }
  };
  // Cut moves join once one-option moves converge: with them from the start, the plans they bring
  // in drop others whose one-option moves led further, and on BLOOM 8 x 12 the converged front
  // ended up to 0.17% above the one without them. Joining at convergence, every plan they bring in
  // dominates what it drops, so the front can only improve on the converged one. Wide moves join
  // once those converge, for the same reason and because an expansion with them costs more; a search
  // the budget stops before that (at the default budget GPT-3 and BLOOM at 8 x 12 and every larger
  // pipeline of make bench) never runs them, and costs what it did.
  enum class Phase { kOneOption, kCut, kWide };
  Phase phase = Phase::kOneOption;
  auto next_phase = [&] {
    if (phase == Phase::kOneOption && options.cut_moves) return phase = Phase::kCut, true;
    if (phase != Phase::kWide && options.wide_move_reach > 0) return phase = Phase::kWide, true;
    return false;
  };
  auto find_moves = [&solver, &phase, &options](Chunk& chunk) {
    parallel_for(std::size_t{0}, chunk.origins.size(), [&](std::size_t k) {
      if (phase == Phase::kWide) {
        chunk.moves[k] = wide_neighbours(solver, chunk.origins[k], options.wide_move_reach);
      } else if (!chunk.moves[k] || phase == Phase::kCut) {
        chunk.moves[k] = neighbours(solver, chunk.origins[k], phase == Phase::kCut);
      }
    });
  };
  Chunk chunks[2];  // the one being offered, the one whose moves are being found
  TaskGroup expansion;
  try {
    // The budget is counted in expansions times instructions (an expansion's cost grows with the
    // DAG), and checked before each round after the first: a round starts only if the plans
    // expanded so far and all it has pending fit (some of those are dominated before their turn).
    const double instructions = static_cast<double>(solver.dag().num_nodes());
    for (int round = 0; round < options.local_search_rounds; ++round) {
      if (pending.empty()) {
        if (!next_phase()) break;
        for (const auto& [time, kept] : front.plans()) pending.push_back(time);
      }
      if (round > 0 && static_cast<double>(outcome.expansions + static_cast<long>(pending.size())) * instructions >
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
        outcome.expansions += static_cast<long>(ready.origins.size());
        if (phase == Phase::kWide) outcome.wide_expansions += static_cast<long>(ready.origins.size());
        for (std::size_t k = 0; k < ready.origins.size(); ++k) {
          const Moves& moves = *ready.moves[k];
          for (const Move& m : moves) {
            if (front.dominated(m.time_s, m.energy_j)) {  // spare the copy
              front.count_refused();
              continue;
            }
            if (front.offer(moved(ready.origins[k], m))) entered.push_back(m.time_s);
          }
        }
      }
      outcome.rounds = round + 1;
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
  outcome.converged = pending.empty() && !next_phase();
  return outcome;
}

}  // namespace kareus::pipeline
