#include "kareus/pipeline/min_cut.hpp"

#include <boost/graph/boykov_kolmogorov_max_flow.hpp>
#include <boost/graph/compressed_sparse_row_graph.hpp>

#include "kareus/core/error.hpp"

namespace kareus::pipeline {
namespace {

using Graph = boost::compressed_sparse_row_graph<boost::directedS>;
using Edge = boost::graph_traits<Graph>::edge_descriptor;

}  // namespace

// With b(v) = Σ lower out of v − Σ lower into v, every s–t cut S satisfies
//   Σ_{S→T} u − Σ_{T→S} l = Σ_{S→T} (u − l) + Σ_{v∈S} b(v),
// so the minimum is an ordinary minimum cut once v→sink carries b(v) where b(v) > 0 and
// source→v carries −b(v) where b(v) < 0, less the constant Σ_{b<0} −b(v). One max-flow pass and
// no feasibility phase.
//
// The network and its maximum flow are kept between solves. A Phillips–Dessouky step changes a few
// of thousands of arcs, so a solve updates only those arcs and their vertices' balances, and cuts
// the kept flow down where it exceeds the new capacities (see repair_flow). When the sink is out of
// the source's residual reach the flow is maximum already. Otherwise it is usually a few augmenting
// paths short, and the residual search that has to run for the cut anyway finds each (on GPT-3 at
// M = 96, two solves in three need at most four; one in eleven needs more than 16). Past
// `residual_paths` of them, Boykov–Kolmogorov augments the rest on a graph of only the arcs with
// capacity (active arcs with u > l and the helper arcs needed), so the work follows the critical
// sub-DAG rather than the whole topology. The source side is the set of vertices reachable from the
// source in the residual network, the same for every maximum flow, so neither the warm start nor
// the choice of augmenting paths changes the answer.
struct MinCutSolver::Impl {
  std::size_t n, s, t, num_arcs;
  std::vector<std::size_t> arc_from, arc_to;
  std::vector<std::size_t> out_begin, out_arc, in_begin, in_arc;  // adjacency of the fixed arcs

  // The kept flow: per arc, and per vertex on the helper arcs source→v and v→sink. It is zero
  // wherever the capacity is.
  std::vector<std::int64_t> flow, from_source, to_sink;

  // The last solve's network, updated in place by the next: each arc's bounds (zero when switched
  // off), the transformed capacities and the balances b(v).
  std::vector<std::int64_t> lower, upper;
  std::vector<std::uint8_t> on;
  std::vector<std::int64_t> capacity, source_capacity, sink_capacity, balance;
  std::int64_t total_source_capacity = 0;
  std::vector<std::size_t> arcs_on;  // the last solve's arcs
  // Stands in for an unbounded capacity: more than any finite cut, and every flow stays in 64 bits.
  std::int64_t big;

  // Indices kept in a list the searches walk instead of the whole topology; an entry whose
  // capacity has gone is skipped, and dropped now and then.
  struct Listed {
    std::vector<std::size_t> items;
    std::vector<std::uint8_t> listed;
    void add(std::size_t i) {
      if (!listed[i]) listed[i] = 1, items.push_back(i);
    }
    void keep_if(auto&& keep) {
      std::erase_if(items, [&](std::size_t i) {
        if (keep(i)) return false;
        listed[i] = 0;
        return true;
      });
    }
  };
  // The switched-on arcs out of the source (its fixed arcs reach every instruction of a pipeline,
  // most of them off), and the vertices with a helper from the source or to the sink.
  Listed source_arcs, sourced, sunk;
  // The vertices whose helper from the source may have spare capacity. Most are saturated, and only
  // a solve's new capacities and cancel() take flow off them (an augmenting path never leads back
  // into the source, nor does Boykov–Kolmogorov's), so every residual search from the source walks
  // this list, pruned as it goes, instead of `sourced`.
  Listed spare_from_source;

  // What a solve changed: arcs whose capacity fell, vertices whose balance may have moved.
  std::vector<std::size_t> lowered, moved;
  std::vector<std::uint32_t> arc_stamp, vertex_stamp;  // == epoch: listed in this solve
  std::uint32_t epoch = 0;

  // The graph of one solve: CSR edges in pairs, a forward edge and its twin; pair k stands for
  // origin[k]: arc a < num_arcs, helper source→v at num_arcs + v, helper v→sink at num_arcs + n + v.
  std::vector<std::size_t> origin;
  std::vector<std::pair<std::size_t, std::size_t>> pair_ends, sorted_ends;
  std::vector<std::size_t> row_start;
  Graph graph;
  std::vector<Edge> forward_edge, reverse;  // by pair; by CSR edge index
  std::vector<std::int64_t> start_residual, residual;
  std::vector<Edge> predecessor;
  std::vector<boost::default_color_type> color;
  std::vector<std::int64_t> distance;
  std::vector<std::size_t> queue;
  std::vector<std::uint8_t> reached;
  // How reach() first got to each vertex: an arc a (forwards), num_arcs + a (backwards along a),
  // 2·num_arcs + u (the helper u→sink) or kFromSource (the helper source→v).
  std::vector<std::size_t> parent;
  static constexpr std::size_t kFromSource = static_cast<std::size_t>(-1);
  int residual_paths;  // augmenting paths from the residual search before Boykov–Kolmogorov
  std::vector<std::int64_t*> path;

  Impl(std::size_t vertices, std::size_t source, std::size_t sink,
       std::span<const std::pair<std::size_t, std::size_t>> arcs, int paths)
      : n(vertices), s(source), t(sink), num_arcs(arcs.size()), residual_paths(paths) {
    KAREUS_CHECK(s < n && t < n && s != t, "flow network needs distinct source and sink");
    out_begin.assign(n + 1, 0);
    in_begin.assign(n + 1, 0);
    for (auto [from, to] : arcs) {
      KAREUS_CHECK(from < n && to < n, "flow arc endpoint out of range");
      arc_from.push_back(from);
      arc_to.push_back(to);
      ++out_begin[from + 1];
      ++in_begin[to + 1];
    }
    for (std::size_t v = 0; v < n; ++v) out_begin[v + 1] += out_begin[v], in_begin[v + 1] += in_begin[v];
    out_arc.resize(num_arcs);
    in_arc.resize(num_arcs);
    std::vector<std::size_t> out_fill(out_begin.begin(), out_begin.end() - 1);
    std::vector<std::size_t> in_fill(in_begin.begin(), in_begin.end() - 1);
    for (std::size_t a = 0; a < num_arcs; ++a) {
      out_arc[out_fill[arc_from[a]]++] = a;
      in_arc[in_fill[arc_to[a]]++] = a;
    }
    flow.assign(num_arcs, 0);
    capacity.assign(num_arcs, 0);
    lower.assign(num_arcs, 0);
    upper.assign(num_arcs, 0);
    on.assign(num_arcs, 0);
    source_arcs.listed.assign(num_arcs, 0);
    sourced.listed.assign(n, 0);
    spare_from_source.listed.assign(n, 0);
    sunk.listed.assign(n, 0);
    big = (std::int64_t{1} << 62) / static_cast<std::int64_t>(num_arcs + n + 2);
    from_source.assign(n, 0);
    to_sink.assign(n, 0);
    source_capacity.assign(n, 0);
    sink_capacity.assign(n, 0);
    balance.assign(n, 0);
    predecessor.resize(n);
    parent.resize(n);
    color.resize(n);
    distance.resize(n);
    arc_stamp.assign(num_arcs, 0);
    vertex_stamp.assign(n, 0);
  }

  // The flow-carrying arc (or helper) into v, preferring the helper from the source, then the
  // arc with the most flow; with `from` set to its tail. Null when none carries flow.
  std::int64_t* flow_into(std::size_t v, std::size_t& from) {
    if (from_source[v] > 0) return from = s, &from_source[v];
    std::int64_t* best = nullptr;
    for (std::size_t k = in_begin[v]; k < in_begin[v + 1]; ++k) {
      std::size_t a = in_arc[k];
      if (flow[a] > 0 && (!best || flow[a] > *best)) best = &flow[a], from = arc_from[a];
    }
    return best;
  }
  std::int64_t* flow_out_of(std::size_t v, std::size_t& to) {
    if (to_sink[v] > 0) return to = t, &to_sink[v];
    std::int64_t* best = nullptr;
    for (std::size_t k = out_begin[v]; k < out_begin[v + 1]; ++k) {
      std::size_t a = out_arc[k];
      if (flow[a] > 0 && (!best || flow[a] > *best)) best = &flow[a], to = arc_to[a];
    }
    return best;
  }

  // Cancels `excess` of the flow on `edge` (tail → head) along flow-carrying paths source → tail and
  // head → sink, which exist by flow conservation; the walks end because the network is acyclic. A
  // walk longer than the vertex count (a cyclic network) gives up.
  bool cancel(std::int64_t* edge, std::size_t tail, std::size_t head, std::int64_t excess) {
    while (excess > 0) {
      path.assign(1, edge);
      for (std::size_t v = tail; v != s;) {
        const std::size_t head_of_in = v;
        std::int64_t* in = flow_into(v, v);
        if (v == s) spare_from_source.add(head_of_in);  // its helper (if that is the edge) carries less
        if (!in || path.size() > n + 1) return false;
        path.push_back(in);
      }
      for (std::size_t v = head; v != t;) {
        std::int64_t* out = flow_out_of(v, v);
        if (!out || path.size() > 2 * n + 2) return false;
        path.push_back(out);
      }
      std::int64_t amount = excess;
      for (std::int64_t* f : path) amount = std::min(amount, *f);
      for (std::int64_t* f : path) *f -= amount;
      excess -= amount;
    }
    return true;
  }

  // Makes the kept flow feasible for the new capacities; false when it cannot (start from zero).
  // Only the arcs whose capacity fell and the vertices whose balance moved can be over.
  bool repair_flow() {
    for (std::size_t a : lowered) {
      if (flow[a] > capacity[a] && !cancel(&flow[a], arc_from[a], arc_to[a], flow[a] - capacity[a])) return false;
    }
    for (std::size_t v : moved) {
      if (from_source[v] > source_capacity[v] &&
          !cancel(&from_source[v], s, v, from_source[v] - source_capacity[v])) {
        return false;
      }
      if (to_sink[v] > sink_capacity[v] && !cancel(&to_sink[v], v, t, to_sink[v] - sink_capacity[v])) return false;
    }
    return true;
  }

  std::int64_t& flow_of(std::size_t pair) {
    if (pair < num_arcs) return flow[pair];
    if (pair < num_arcs + n) return from_source[pair - num_arcs];
    return to_sink[pair - num_arcs - n];
  }
  std::int64_t capacity_of(std::size_t pair) const {
    if (pair < num_arcs) return capacity[pair];
    if (pair < num_arcs + n) return source_capacity[pair - num_arcs];
    return sink_capacity[pair - num_arcs - n];
  }

  // Builds the graph of every arc with capacity (on the original vertex numbers), its residuals
  // from the kept flow. The edges are bucketed by tail here (forward edge and twin of each pair),
  // so Boost only copies them.
  void build_graph() {
    origin.clear();
    pair_ends.clear();
    auto add = [&](std::size_t pair, std::size_t from, std::size_t to) {
      origin.push_back(pair);
      pair_ends.emplace_back(from, to);
    };
    for (std::size_t a : arcs_on) {
      if (capacity[a] > 0) add(a, arc_from[a], arc_to[a]);
    }
    for (std::size_t v : sourced.items) {
      if (source_capacity[v] > 0) add(num_arcs + v, s, v);
    }
    for (std::size_t v : sunk.items) {
      if (sink_capacity[v] > 0) add(num_arcs + n + v, v, t);
    }
    const std::size_t m = 2 * pair_ends.size();
    row_start.assign(n + 1, 0);
    for (auto [from, to] : pair_ends) ++row_start[from + 1], ++row_start[to + 1];
    for (std::size_t v = 0; v < n; ++v) row_start[v + 1] += row_start[v];
    sorted_ends.resize(m);
    reverse.resize(m);
    forward_edge.resize(pair_ends.size());
    start_residual.resize(m);
    residual.resize(m);
    for (std::size_t k = 0; k < pair_ends.size(); ++k) {
      auto [from, to] = pair_ends[k];
      std::size_t ahead = row_start[from]++, back = row_start[to]++;
      sorted_ends[ahead] = {from, to};
      sorted_ends[back] = {to, from};
      forward_edge[k] = Edge(from, ahead);
      reverse[ahead] = Edge(to, back);
      reverse[back] = forward_edge[k];
      const std::int64_t f = flow_of(origin[k]);
      start_residual[ahead] = capacity_of(origin[k]) - f;
      start_residual[back] = f;
    }
    graph = Graph(boost::edges_are_sorted, sorted_ends.begin(), sorted_ends.end(), n, m);
  }

  // Marks the vertices reachable from the source in the residual network of the kept flow, read
  // straight from the capacities and flows on the fixed topology. True when the sink is reached
  // (the flow is not maximum; the search stops there).
  bool reach() {
    reached.assign(n, 0);
    queue.assign(1, s);
    reached[s] = 1;
    // A vertex with spare capacity to the sink ends the search when it is found, not in its turn.
    auto visit = [&](std::size_t w, std::size_t via) {
      if (reached[w]) return;
      reached[w] = 1, parent[w] = via, queue.push_back(w);
      if (sink_capacity[w] > to_sink[w]) reached[t] = 1, parent[t] = 2 * num_arcs + w;
    };
    for (std::size_t head = 0; head < queue.size() && !reached[t]; ++head) {
      const std::size_t u = queue[head];
      if (u == s) {
        for (std::size_t a : source_arcs.items) {
          if (capacity[a] > flow[a]) visit(arc_to[a], a);
        }
      } else {
        for (std::size_t k = out_begin[u]; k < out_begin[u + 1]; ++k) {
          if (capacity[out_arc[k]] > flow[out_arc[k]]) visit(arc_to[out_arc[k]], out_arc[k]);
        }
      }
      for (std::size_t k = in_begin[u]; k < in_begin[u + 1]; ++k) {
        if (flow[in_arc[k]] > 0) visit(arc_from[in_arc[k]], num_arcs + in_arc[k]);
      }
      // Helpers: source→v forwards (its twin leads back to the source); v→sink is taken in visit().
      if (u == s) {
        spare_from_source.keep_if([&](std::size_t v) { return source_capacity[v] > from_source[v]; });
        for (std::size_t v : spare_from_source.items) visit(v, kFromSource);
      }
    }
    return reached[t] != 0;
  }

  // Pushes along the path to the sink that reach() found as much as it carries.
  void augment_reached_path() {
    // Walks the path backwards from the sink; `apply` gets each residual edge's flow and direction.
    auto walk = [&](auto&& apply) {
      for (std::size_t v = t; v != s;) {
        const std::size_t via = parent[v];
        if (via == kFromSource) {
          apply(from_source[v], source_capacity[v], true);
          v = s;
        } else if (via < num_arcs) {
          apply(flow[via], capacity[via], true);
          v = arc_from[via];
        } else if (via < 2 * num_arcs) {
          apply(flow[via - num_arcs], capacity[via - num_arcs], false);
          v = arc_to[via - num_arcs];
        } else {
          v = via - 2 * num_arcs;
          apply(to_sink[v], sink_capacity[v], true);
        }
      }
    };
    std::int64_t amount = std::numeric_limits<std::int64_t>::max();
    walk([&](std::int64_t f, std::int64_t cap, bool forwards) { amount = std::min(amount, forwards ? cap - f : f); });
    walk([&](std::int64_t& f, std::int64_t, bool forwards) { f += forwards ? amount : -amount; });
  }

  MinCut solve(std::span<const ActiveArc> arcs) {
    ++epoch;
    std::int64_t finite_sum = 1;
    for (const ActiveArc& a : arcs) {
      KAREUS_CHECK(a.arc < num_arcs, "flow arc index out of range");
      KAREUS_CHECK(arc_stamp[a.arc] != epoch, "flow arc switched on twice");
      arc_stamp[a.arc] = epoch;
      KAREUS_CHECK(0 <= a.lower && a.lower <= a.upper, "flow arc bounds must satisfy 0 <= l <= u");
      finite_sum += a.lower + (a.upper == FlowNetwork::kUnbounded ? 0 : a.upper);
    }
    KAREUS_CHECK(finite_sum < big, "flow capacities too large for 64-bit arithmetic");
    // Update the last network to this one: the arcs whose bounds changed, then those switched off.
    lowered.clear();
    moved.clear();
    auto set_bounds = [&](std::size_t a, bool switched_on, std::int64_t lo, std::int64_t up) {
      const std::size_t from = arc_from[a], to = arc_to[a];
      balance[from] += lo - lower[a];
      balance[to] -= lo - lower[a];
      const std::int64_t cap = !switched_on ? 0 : up == FlowNetwork::kUnbounded ? big : up - lo;
      if (cap < capacity[a]) lowered.push_back(a);
      capacity[a] = cap;
      on[a] = switched_on;
      lower[a] = lo;
      upper[a] = up;
      if (switched_on && from == s) source_arcs.add(a);
      for (std::size_t v : {from, to}) {
        if (vertex_stamp[v] != epoch) vertex_stamp[v] = epoch, moved.push_back(v);
      }
    };
    for (const ActiveArc& a : arcs) {
      if (!on[a.arc] || lower[a.arc] != a.lower || upper[a.arc] != a.upper) set_bounds(a.arc, true, a.lower, a.upper);
    }
    for (std::size_t a : arcs_on) {
      if (arc_stamp[a] != epoch) set_bounds(a, false, 0, 0);
    }
    arcs_on.clear();
    for (const ActiveArc& a : arcs) arcs_on.push_back(a.arc);
    for (std::size_t v : moved) {
      const bool terminal = v == s || v == t;
      const std::int64_t from_source_now = !terminal && balance[v] < 0 ? -balance[v] : 0;
      total_source_capacity += from_source_now - source_capacity[v];
      source_capacity[v] = from_source_now;
      sink_capacity[v] = !terminal && balance[v] > 0 ? balance[v] : 0;
      if (source_capacity[v] > 0) sourced.add(v), spare_from_source.add(v);
      if (sink_capacity[v] > 0) sunk.add(v);
    }
    const std::int64_t constant = balance[s] - total_source_capacity;

    if (!repair_flow()) {
      std::ranges::fill(flow, 0);
      std::ranges::fill(from_source, 0);
      for (std::size_t v : sourced.items) spare_from_source.add(v);
      std::ranges::fill(to_sink, 0);
    }
    if (epoch % 64 == 0) {  // the lists' dead entries (no capacity, so no flow) go
      source_arcs.keep_if([&](std::size_t a) { return on[a] != 0; });
      sourced.keep_if([&](std::size_t v) { return source_capacity[v] > 0; });
      sunk.keep_if([&](std::size_t v) { return sink_capacity[v] > 0; });
    }
    // Augment along the residual search's paths; past residual_paths of them Boykov–Kolmogorov
    // takes the residuals as its capacities and finishes (see the comment above Impl).
    int augmentations = 0;
    while (reach() && augmentations < residual_paths) {
      augment_reached_path();
      ++augmentations;
    }
    if (reached[t]) {
      build_graph();
      const auto index = boost::get(boost::edge_index, graph);
      boost::boykov_kolmogorov_max_flow(
          graph, boost::make_iterator_property_map(start_residual.begin(), index),
          boost::make_iterator_property_map(residual.begin(), index),
          boost::make_iterator_property_map(reverse.begin(), index), predecessor.data(), color.data(),
          distance.data(), boost::get(boost::vertex_index, graph), s, t);
      for (std::size_t k = 0; k < origin.size(); ++k) {
        flow_of(origin[k]) = capacity_of(origin[k]) - residual[forward_edge[k].idx];
      }
      KAREUS_CHECK(!reach(), "the sink is still reachable after a maximum flow");
    }
    std::int64_t total_flow = 0;
    for (std::size_t v : sourced.items) total_flow += from_source[v];
    for (std::size_t a : source_arcs.items) total_flow += flow[a];

    MinCut cut;
    cut.source_side = reached;
    // The cut's value from the bounds themselves; it must agree with the flow.
    std::int64_t value = 0;
    for (const ActiveArc& a : arcs) {
      bool from = cut.source_side[arc_from[a.arc]], to = cut.source_side[arc_to[a.arc]];
      if (from && !to) {
        if (a.upper == FlowNetwork::kUnbounded) cut.bounded = false;
        else value += a.upper;
      } else if (!from && to) {
        value -= a.lower;
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
                           std::span<const std::pair<std::size_t, std::size_t>> arcs, int residual_paths)
    : impl_(std::make_unique<Impl>(num_vertices, source, sink, arcs, residual_paths)) {}
MinCutSolver::~MinCutSolver() = default;
MinCutSolver::MinCutSolver(MinCutSolver&&) noexcept = default;
MinCutSolver& MinCutSolver::operator=(MinCutSolver&&) noexcept = default;

MinCut MinCutSolver::solve(std::span<const ActiveArc> arcs) { return impl_->solve(arcs); }

std::int64_t cut_value(const FlowNetwork& network, std::span<const std::uint8_t> source_side) {
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

MinCut minimum_cut(const FlowNetwork& network, int residual_paths) {
  std::vector<std::pair<std::size_t, std::size_t>> ends;
  std::vector<ActiveArc> arcs;
  for (const FlowArc& a : network.arcs) {
    arcs.push_back({ends.size(), a.lower, a.upper});
    ends.emplace_back(a.from, a.to);
  }
  MinCutSolver solver(network.num_vertices, network.source, network.sink, ends, residual_paths);
  return solver.solve(arcs);
}

}  // namespace kareus::pipeline
