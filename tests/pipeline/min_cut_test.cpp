// The minimum cut with flow lower bounds, against brute force over every s–t partition (and, on
// networks too large for that, a fresh Boykov–Kolmogorov solve).
#include "kareus/pipeline/min_cut.hpp"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <optional>

namespace kareus::pipeline {
namespace {

// Least Σ upper(forward) − Σ lower(backward) over all partitions with source in S, sink not.
std::int64_t brute_force_min_cut(const FlowNetwork& net) {
  std::int64_t best = FlowNetwork::kUnbounded;
  const std::size_t free_vertices = net.num_vertices - 2;
  for (std::uint32_t mask = 0; mask < (1u << free_vertices); ++mask) {
    std::vector<std::uint8_t> side(net.num_vertices, 0);
    side[net.source] = 1;
    std::size_t bit = 0;
    for (std::size_t v = 0; v < net.num_vertices; ++v) {
      if (v == net.source || v == net.sink) continue;
      side[v] = (mask >> bit++) & 1u;
    }
    best = std::min(best, cut_value(net, side));
  }
  return best;
}

// Random DAG on up to `max_vertices` vertices (source 0, sink last) with 0 <= lower <= upper, some
// unbounded; arcs join vertices at most `max_span` apart (then paths are long, as in a pipeline).
rc::Gen<FlowNetwork> random_network(std::size_t max_vertices = 9, std::size_t max_span = 9) {
  return rc::gen::exec([max_vertices, max_span] {
    FlowNetwork net;
    net.num_vertices = *rc::gen::inRange<std::size_t>(2, max_vertices + 1);
    net.source = 0;
    net.sink = net.num_vertices - 1;
    for (std::size_t a = 0; a + 1 < net.num_vertices; ++a) {
      for (std::size_t b = a + 1; b < std::min(net.num_vertices, a + max_span + 1); ++b) {
        if (!*rc::gen::inRange(0, 3)) continue;  // about two thirds of the pairs get an arc
        std::int64_t upper = *rc::gen::inRange<std::int64_t>(0, 50);
        std::int64_t lower = *rc::gen::inRange<std::int64_t>(0, upper + 1);
        if (!*rc::gen::inRange(0, 5)) upper = FlowNetwork::kUnbounded;
        net.arcs.push_back({a, b, lower, upper});
      }
    }
    return net;
  });
}

// How many augmenting paths a solve takes from its residual search before Boykov–Kolmogorov: never
// (Boykov–Kolmogorov alone), one, or the default.
rc::Gen<int> residual_paths() { return rc::gen::element(0, 1, MinCutSolver::kResidualPaths); }

RC_GTEST_PROP(MinCut, EqualsBruteForceOnRandomDags, ()) {
  FlowNetwork net = *random_network();
  MinCut cut = minimum_cut(net, *residual_paths());
  std::int64_t expected = brute_force_min_cut(net);
  RC_ASSERT(cut.source_side.size() == net.num_vertices);
  RC_ASSERT(cut.source_side[net.source]);
  RC_ASSERT(!cut.source_side[net.sink]);
  if (expected == FlowNetwork::kUnbounded) {
    RC_ASSERT(!cut.bounded);
  } else {
    RC_ASSERT(cut.bounded);
    RC_ASSERT(cut.value == expected);
    RC_ASSERT(cut_value(net, cut.source_side) == expected);
  }
}

RC_GTEST_PROP(MinCut, SolverReusedAcrossBoundsMatchesFreshSolves, ()) {
  // One topology, a sequence of bound sets with arcs switched off: warm starts must not change
  // answers. Like Phillips–Dessouky's steps, a round redraws only some arcs (all of them with
  // `churn` 1, one in four with 4), so most vertices keep their balance and the kept flow matters.
  // Up to 32 vertices, often with short arcs only, so that flow is cancelled along paths of several
  // arcs: the reference is brute force up to 9 vertices, a fresh Boykov–Kolmogorov solve above.
  FlowNetwork net = *random_network(32, *rc::gen::element<std::size_t>(3, 32));
  std::vector<std::pair<std::size_t, std::size_t>> ends;
  for (const FlowArc& a : net.arcs) ends.emplace_back(a.from, a.to);
  MinCutSolver solver(net.num_vertices, net.source, net.sink, ends, *residual_paths());
  const int rounds = *rc::gen::inRange(1, 32);
  const int churn = *rc::gen::element(1, 4);
  std::vector<std::optional<ActiveArc>> bounds(net.arcs.size());  // per arc; empty: switched off
  for (int round = 0; round < rounds; ++round) {
    FlowNetwork sub = net;
    sub.arcs.clear();
    std::vector<ActiveArc> active;
    for (std::size_t k = 0; k < net.arcs.size(); ++k) {
      const FlowArc& a = net.arcs[k];
      if (round == 0 || *rc::gen::inRange(0, churn) == 0) {
        std::int64_t up = *rc::gen::inRange<std::int64_t>(0, 40);
        std::int64_t lo = *rc::gen::inRange<std::int64_t>(0, up + 1);
        if (a.upper == FlowNetwork::kUnbounded) up = FlowNetwork::kUnbounded;
        bounds[k].reset();
        if (*rc::gen::inRange(0, 4) != 0) bounds[k] = ActiveArc{k, lo, up};
      }
      if (!bounds[k]) continue;
      active.push_back(*bounds[k]);
      sub.arcs.push_back({a.from, a.to, bounds[k]->lower, bounds[k]->upper});
    }
    MinCut cut = solver.solve(active);
    const MinCut fresh = minimum_cut(sub, 0);
    const std::int64_t expected = sub.num_vertices <= 9 ? brute_force_min_cut(sub)
                                  : fresh.bounded   ? fresh.value
                                                    : FlowNetwork::kUnbounded;
    RC_ASSERT(cut.bounded == (expected != FlowNetwork::kUnbounded));
    if (cut.bounded) {
      RC_ASSERT(cut.value == expected);
      // The source side is the residual reach of a maximum flow: the same for every one of them.
      RC_ASSERT(cut.source_side == fresh.source_side);
    }
  }
}

TEST(MinCut, LowerBoundsCanMakeTheCutNegative) {
  // s -> a -> t with a backward-crossing arc carrying a large lower bound.
  FlowNetwork net{.num_vertices = 4, .source = 0, .sink = 3, .arcs = {}};
  net.arcs = {{0, 1, 0, 5}, {1, 2, 0, FlowNetwork::kUnbounded}, {2, 3, 0, 3}, {0, 2, 0, 1}};
  MinCut cut = minimum_cut(net);
  EXPECT_TRUE(cut.bounded);
  EXPECT_EQ(cut.value, brute_force_min_cut(net));
}

TEST(MinCut, EveryCutUnboundedIsReported) {
  FlowNetwork net{.num_vertices = 3, .source = 0, .sink = 2, .arcs = {}};
  net.arcs = {{0, 1, 0, FlowNetwork::kUnbounded}, {1, 2, 0, FlowNetwork::kUnbounded}};
  EXPECT_FALSE(minimum_cut(net).bounded);
}

TEST(MinCut, LargeCostsStayExact) {
  // Perseus's 10000.0 "infinity" breaks once costs exceed it; ours scales with the data.
  FlowNetwork net{.num_vertices = 4, .source = 0, .sink = 3, .arcs = {}};
  const std::int64_t big = std::int64_t{1} << 40;
  net.arcs = {{0, 1, 0, big}, {0, 2, 0, big + 7}, {1, 3, 0, FlowNetwork::kUnbounded},
              {2, 3, 0, FlowNetwork::kUnbounded}};
  MinCut cut = minimum_cut(net);
  ASSERT_TRUE(cut.bounded);
  EXPECT_EQ(cut.value, 2 * big + 7);
}

}  // namespace
}  // namespace kareus::pipeline
