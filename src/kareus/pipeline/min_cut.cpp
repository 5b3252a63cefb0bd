#include "kareus/pipeline/min_cut.hpp"

#include <boost/graph/boykov_kolmogorov_max_flow.hpp>
#include <boost/graph/compressed_sparse_row_graph.hpp>

#include "kareus/core/error.hpp"

namespace kareus::pipeline {
namespace {

struct EdgeId {
  std::size_t id = 0;  // position in insertion order; the twin of 2k is 2k+1
};
using Graph = boost::compressed_sparse_row_graph<boost::directedS, boost::no_property, EdgeId>;
using Edge = boost::graph_traits<Graph>::edge_descriptor;

}  // namespace

// With b(v) = Σ lower out of v − Σ lower into v, every s–t cut S satisfies
//   Σ_{S→T} u − Σ_{T→S} l = Σ_{S→T} (u − l) + Σ_{v∈S} b(v),
// so the minimum is an ordinary minimum cut once v→sink carries b(v) where b(v) > 0 and
// source→v carries −b(v) where b(v) < 0, less the constant Σ_{b<0} −b(v). One max-flow pass and
// no feasibility phase. Every vertex has both helper arcs in the fixed topology; unused ones carry 0.
struct MinCutSolver::Impl {
  std::size_t n, s, t, num_arcs;
  std::vector<std::size_t> arc_from, arc_to;
  Graph graph;
  std::vector<std::size_t> edge_of;  // insertion id -> CSR edge index
  std::vector<Edge> reverse;         // by CSR edge index
  std::vector<Edge> edge_by_index;
  static constexpr std::size_t kNone = static_cast<std::size_t>(-1);
  std::vector<std::int64_t> capacity, residual;
  std::vector<Edge> predecessor;
  std::vector<boost::default_color_type> color;
  std::vector<std::int64_t> distance, balance;
  std::vector<std::size_t> queue;
  std::vector<bool> reached_;
  std::vector<std::int64_t> flow;  // by CSR index of the forward edges; the twins' entries unused
  std::vector<std::int64_t> start_residual;
  std::vector<std::size_t> path;
  bool has_flow = false;

  // Makes the previous flow feasible for the new capacities: wherever an edge carries more than
  // its capacity, the excess is cancelled along flow-carrying paths from the source through the
  // edge to the sink. Such paths exist by flow conservation and are found by walking edges with
  // flow backwards to the source and forwards to the sink, which ends because the network is
  // acyclic; a walk longer than the vertex count (a cyclic network) gives up: start from zero.
  bool repair_flow() {
    for (std::size_t id = 0; id < capacity.size(); id += 2) {
      const std::size_t e = edge_of[id];
      while (flow[e] > capacity[e]) {
        path.assign(1, e);
        // Forward edges (even ids) carrying flow into v are the twins (odd ids) out of v.
        for (std::size_t v = boost::source(edge_by_index[e], graph), walked = 0; v != s; ++walked) {
          std::size_t best = kNone, from = kNone;
          for (auto [it, end] = boost::out_edges(v, graph); it != end; ++it) {
            if (graph[*it].id % 2 == 0) continue;
            std::size_t in = reverse[(*it).idx].idx;
            if (flow[in] > 0 && (best == kNone || flow[in] > flow[best])) best = in, from = boost::target(*it, graph);
          }
          if (best == kNone || walked > n) return false;
          path.push_back(best);
          v = from;
        }
        for (std::size_t v = boost::target(edge_by_index[e], graph), walked = 0; v != t; ++walked) {
          std::size_t best = kNone, to = kNone;
          for (auto [it, end] = boost::out_edges(v, graph); it != end; ++it) {
            if (graph[*it].id % 2 == 1) continue;
            if (flow[(*it).idx] > 0 && (best == kNone || flow[(*it).idx] > flow[best])) best = (*it).idx, to = boost::target(*it, graph);
          }
          if (best == kNone || walked > n) return false;
          path.push_back(best);
          v = to;
        }
        std::int64_t cancel = flow[e] - capacity[e];
        for (std::size_t k : path) cancel = std::min(cancel, flow[k]);
        for (std::size_t k : path) flow[k] -= cancel;
      }
    }
    return true;
  }

  // Vertices reachable from the source through arcs with residual capacity.
  void reach() {
    reached_.assign(n, false);
    queue.assign(1, s);
    reached_[s] = true;
    for (std::size_t head = 0; head < queue.size(); ++head) {
      for (auto [it, end] = boost::out_edges(queue[head], graph); it != end; ++it) {
        std::size_t w = boost::target(*it, graph);
        if (!reached_[w] && residual[(*it).idx] > 0) {
          reached_[w] = true;
          queue.push_back(w);
        }
      }
    }
  }

  Impl(std::size_t vertices, std::size_t source, std::size_t sink,
       std::span<const std::pair<std::size_t, std::size_t>> arcs)
      : n(vertices), s(source), t(sink), num_arcs(arcs.size()) {
    KAREUS_CHECK(s < n && t < n && s != t, "flow network needs distinct source and sink");
    std::vector<std::pair<std::size_t, std::size_t>> ends;
    std::vector<EdgeId> ids;
    auto add = [&](std::size_t from, std::size_t to) {
      KAREUS_CHECK(from < n && to < n, "flow arc endpoint out of range");
      ends.emplace_back(from, to);
      ends.emplace_back(to, from);
      ids.push_back({ids.size()});
      ids.push_back({ids.size()});
    };
    for (auto [from, to] : arcs) {
      add(from, to);
      arc_from.push_back(from);
      arc_to.push_back(to);
    }
    for (std::size_t v = 0; v < n; ++v) add(s, v), add(v, t);  // helper arcs: ids 2a+4v, 2a+4v+2
    graph = Graph(boost::edges_are_unsorted_multi_pass, ends.begin(), ends.end(), ids.begin(), n);
    const std::size_t m = ends.size();
    std::vector<Edge> by_id(m);
    for (auto [it, end] = boost::edges(graph); it != end; ++it) by_id[graph[*it].id] = *it;
    edge_of.resize(m);
    reverse.resize(m);
    for (std::size_t id = 0; id < m; ++id) {
      edge_of[id] = by_id[id].idx;
      reverse[by_id[id].idx] = by_id[id ^ 1];
    }
    edge_by_index.resize(m);
    for (const Edge& e : by_id) edge_by_index[e.idx] = e;
    capacity.assign(m, 0);
    flow.assign(m, 0);
    residual.assign(m, 0);
    start_residual.assign(m, 0);
    predecessor.resize(n);
    color.resize(n);
    distance.resize(n);
    balance.resize(n);
  }

  MinCut solve(std::span<const std::int64_t> lower, std::span<const std::int64_t> upper,
               std::span<const std::uint8_t> active) {
    KAREUS_CHECK(lower.size() == num_arcs && upper.size() == num_arcs && active.size() == num_arcs,
                 "bounds must be given for every arc");
    std::int64_t finite_sum = 1;
    std::fill(balance.begin(), balance.end(), 0);
    std::fill(capacity.begin(), capacity.end(), 0);
    std::size_t active_arcs = 0;
    for (std::size_t a = 0; a < num_arcs; ++a) {
      if (!active[a]) continue;
      KAREUS_CHECK(0 <= lower[a] && lower[a] <= upper[a], "flow arc bounds must satisfy 0 <= l <= u");
      finite_sum += lower[a] + (upper[a] == FlowNetwork::kUnbounded ? 0 : upper[a]);
      ++active_arcs;
    }
    KAREUS_CHECK(finite_sum <= (std::int64_t{1} << 62) / static_cast<std::int64_t>(active_arcs + n + 2),
                 "flow capacities too large for 64-bit arithmetic");
    // Stand-in for an unbounded capacity: more than every finite cut can hold.
    const std::int64_t big = finite_sum;
    for (std::size_t a = 0; a < num_arcs; ++a) {
      if (!active[a]) continue;
      std::size_t e = edge_of[2 * a];
      capacity[e] = upper[a] == FlowNetwork::kUnbounded ? big : upper[a] - lower[a];
      balance[arc_from[a]] += lower[a];
      balance[arc_to[a]] -= lower[a];
    }
    std::int64_t constant = balance[s];
    for (std::size_t v = 0; v < n; ++v) {
      if (v == s || v == t) continue;
      std::size_t helper = 2 * num_arcs + 4 * v;
      if (balance[v] < 0) capacity[edge_of[helper]] = -balance[v], constant += balance[v];
      if (balance[v] > 0) capacity[edge_of[helper + 2]] = balance[v];
    }
    // Warm start: the previous maximum flow, cut down where it no longer fits the new capacities
    // (see repair_flow), is kept and only augmented: Boykov–Kolmogorov runs on its residual
    // network, usually finding few paths. The first solve starts from zero.
    const auto index = boost::get(boost::edge_index, graph);
    auto max_flow_on = [&](std::vector<std::int64_t>& start_capacity) {
      boost::boykov_kolmogorov_max_flow(
          graph, boost::make_iterator_property_map(start_capacity.begin(), index),
          boost::make_iterator_property_map(residual.begin(), index),
          boost::make_iterator_property_map(reverse.begin(), index), predecessor.data(),
          color.data(), distance.data(), boost::get(boost::vertex_index, graph), s, t);
    };
    if (has_flow && repair_flow()) {
      for (std::size_t id = 0; id < capacity.size(); id += 2) {
        std::size_t e = edge_of[id], back = edge_of[id + 1];
        start_residual[e] = capacity[e] - flow[e];
        start_residual[back] = flow[e];
      }
      residual = start_residual;
      reach();
      if (reached_[t]) {
        max_flow_on(start_residual);
        reach();
      }
    } else {
      max_flow_on(capacity);
      reach();
    }
    std::vector<bool>& reached = reached_;
    has_flow = true;
    for (std::size_t id = 0; id < capacity.size(); id += 2) {
      std::size_t e = edge_of[id];
      flow[e] = capacity[e] - residual[e];
    }
    std::int64_t total_flow = 0;
    for (auto [it, end] = boost::out_edges(s, graph); it != end; ++it) total_flow += flow[(*it).idx];

    MinCut cut;
    cut.source_side = reached;
    // The cut's value from the bounds themselves; it must agree with the flow.
    std::int64_t value = 0;
    cut.bounded = true;
    for (std::size_t a = 0; a < num_arcs && cut.bounded; ++a) {
      if (!active[a]) continue;
      bool from = cut.source_side[arc_from[a]], to = cut.source_side[arc_to[a]];
      if (from && !to) {
        if (upper[a] == FlowNetwork::kUnbounded) cut.bounded = false;
        else value += upper[a];
      } else if (!from && to) {
        value -= lower[a];
      }
    }
    cut.value = value;
    if (cut.bounded) {
      KAREUS_CHECK(value == total_flow + constant, "minimum cut value differs from the maximum flow");
    }
    return cut;
  }
};

MinCutSolver::MinCutSolver(std::size_t num_vertices, std::size_t source, std::size_t sink,
                           std::span<const std::pair<std::size_t, std::size_t>> arcs)
    : impl_(std::make_unique<Impl>(num_vertices, source, sink, arcs)) {}
MinCutSolver::~MinCutSolver() = default;
MinCutSolver::MinCutSolver(MinCutSolver&&) noexcept = default;
MinCutSolver& MinCutSolver::operator=(MinCutSolver&&) noexcept = default;

MinCut MinCutSolver::solve(std::span<const std::int64_t> lower, std::span<const std::int64_t> upper,
                           std::span<const std::uint8_t> active) {
  return impl_->solve(lower, upper, active);
}

std::int64_t cut_value(const FlowNetwork& network, const std::vector<bool>& source_side) {
  std::int64_t value = 0;
  for (const FlowArc& a : network.arcs) {
    if (source_side[a.from] && !source_side[a.to]) {
      if (a.upper == FlowNetwork::kUnbounded) return FlowNetwork::kUnbounded;
      value += a.upper;
    } else if (!source_side[a.from] && source_side[a.to]) {
      value -= a.lower;
    }
  }
  return value;
}

MinCut minimum_cut(const FlowNetwork& network) {
  std::vector<std::pair<std::size_t, std::size_t>> ends;
  std::vector<std::int64_t> lower, upper;
  for (const FlowArc& a : network.arcs) {
    ends.emplace_back(a.from, a.to);
    lower.push_back(a.lower);
    upper.push_back(a.upper);
  }
  std::vector<std::uint8_t> active(network.arcs.size(), 1);
  MinCutSolver solver(network.num_vertices, network.source, network.sink, ends);
  return solver.solve(lower, upper, active);
}

}  // namespace kareus::pipeline
