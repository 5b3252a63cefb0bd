// Minimum s–t cut of a network whose arcs carry flow lower and upper bounds, the step at the heart
// of Phillips–Dessouky. The cut value is Σ upper over arcs from the source side to the sink side
// minus Σ lower over arcs from the sink side to the source side; by the max-flow min-cut theorem
// with lower bounds it is the least such value over all cuts. Capacities are integers, so there is
// no tolerance to tune; an upper bound of kUnbounded means the arc may never cross the cut forwards.
//
// Solved as a maximum flow on a transformed network (see min_cut.cpp) by Boost.Graph's
// Boykov–Kolmogorov, or, when the kept flow of the last solve is a few augmenting paths short, by
// those paths; the cut is the set of vertices reachable from the source in the residual network.
//
// MinCutSolver fixes a topology once and solves it for many sets of bounds, with some arcs switched
// off: the pipeline solver's critical sub-DAG is a changing subset of one fixed DAG. Each solve works
// on the arcs switched on and starts from the previous maximum flow.
//
// Thread-safety: a MinCutSolver is not thread-safe; use one per thread.
// Example:
//   FlowNetwork net{.num_vertices = 4, .source = 0, .sink = 3};
//   net.arcs.push_back({0, 1, /*lower=*/0, /*upper=*/5});
//   MinCut cut = minimum_cut(net);
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <utility>
#include <vector>

namespace kareus::pipeline {

struct FlowArc {
  std::size_t from = 0, to = 0;
  std::int64_t lower = 0, upper = 0;
};

struct FlowNetwork {
  static constexpr std::int64_t kUnbounded = std::numeric_limits<std::int64_t>::max();
  std::size_t num_vertices = 0;
  std::size_t source = 0, sink = 0;
  std::vector<FlowArc> arcs;
};

struct MinCut {
  bool bounded = true;            // false when every cut crosses an unbounded arc forwards
  std::int64_t value = 0;         // meaningful when bounded; may be negative
  std::vector<std::uint8_t> source_side;  // per vertex: 1 on the source side
};

// An arc of a MinCutSolver's topology switched on for one solve, with its bounds.
struct ActiveArc {
  std::size_t arc = 0;  // index into the solver's arcs, in the constructor's order
  std::int64_t lower = 0, upper = 0;
  bool operator==(const ActiveArc&) const = default;
};

class MinCutSolver {
 public:
  // A solve takes up to `residual_paths` augmenting paths straight from its residual search before
  // handing the rest to Boykov–Kolmogorov (0: it always does; see min_cut.cpp).
  static constexpr int kResidualPaths = 16;
  MinCutSolver(std::size_t num_vertices, std::size_t source, std::size_t sink,
               std::span<const std::pair<std::size_t, std::size_t>> arcs, int residual_paths = kResidualPaths);
  ~MinCutSolver();
  MinCutSolver(MinCutSolver&&) noexcept;
  MinCutSolver& operator=(MinCutSolver&&) noexcept;

  // The minimum cut of the network of `arcs` (each arc at most once; the others are left out).
  // Requires 0 <= lower <= upper and finite bounds that sum well within 64 bits. The work follows
  // the arcs given and the last solve's, not the whole topology.
  MinCut solve(std::span<const ActiveArc> arcs);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// One-off minimum cut of a whole network.
MinCut minimum_cut(const FlowNetwork& network, int residual_paths = MinCutSolver::kResidualPaths);

// Σ upper (forward) − Σ lower (backward) of a given partition; kUnbounded if an unbounded arc
// crosses forwards. For checks and tests.
std::int64_t cut_value(const FlowNetwork& network, std::span<const std::uint8_t> source_side);

}  // namespace kareus::pipeline
