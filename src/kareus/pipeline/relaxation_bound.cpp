#include "kareus/pipeline/relaxation_bound.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <queue>
#include <utility>

#include "kareus/core/error.hpp"

namespace kareus::pipeline {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
// A line's G − F·T sums terms far larger than itself where near-tie options price a second at up to
// ~1e10 J/s, and its flows carry the rounding of every augmentation through them; each line gives
// up this much of the terms' magnitude, so that rounding never lifts it above a plan.
constexpr double kRounding = 1e-11;

// h(f) = min over options of e + f·t for f >= 0, as its lower hull from the option of least effective
// energy (the minimiser at f = 0) to the fastest: vertex k minimises h on [low(k), breakpoint[k]],
// low(0) = 0, low(k) = breakpoint[k-1], the last breakpoint infinite. Options slower than the least
// effective energy's minimise no f >= 0.
struct Hull {
  std::vector<double> time_s, energy_j, breakpoint;

  double low(std::size_t k) const { return k == 0 ? 0.0 : breakpoint[k - 1]; }
  // h(flow) by walking from vertex k, which is left at the minimiser; e + flow·t is convex along the
  // vertices, so the walk ends at the least over every option.
  double at(double flow, std::size_t& k) const {
    auto value = [&](std::size_t i) { return energy_j[i] + flow * time_s[i]; };
    while (k + 1 < time_s.size() && value(k + 1) <= value(k)) ++k;
    while (k > 0 && value(k - 1) < value(k)) --k;
    return value(k);
  }
};

Hull lower_hull(std::vector<StageOption> options, double p_blocking_w) {
  auto effective = [&](const StageOption& o) { return o.energy_j - p_blocking_w * o.time_s; };
  // Slowest first; of equal times the least energy first.
  std::ranges::sort(options, [](const StageOption& a, const StageOption& b) {
    return a.time_s != b.time_s ? a.time_s > b.time_s : a.energy_j < b.energy_j;
  });
  // The fastest of least effective energy starts the hull; every vertex after it is faster.
  const auto least = std::ranges::min_element(options, [&](const StageOption& a, const StageOption& b) {
    return effective(a) != effective(b) ? effective(a) < effective(b) : a.time_s < b.time_s;
  });
  Hull hull;
  for (auto it = least; it != options.end(); ++it) {
    const double t = it->time_s, e = effective(*it);
    if (!hull.time_s.empty() && t >= hull.time_s.back()) continue;  // as slow as the last, no cheaper
    // Andrew's monotone chain on the flows at which neighbours tie: they must rise strictly.
    while (!hull.time_s.empty()) {
      const double tie = (e - hull.energy_j.back()) / (hull.time_s.back() - t);
      if (hull.breakpoint.empty() || tie > hull.breakpoint.back()) {
        hull.breakpoint.push_back(tie);
        break;
      }
      hull.time_s.pop_back(), hull.energy_j.pop_back(), hull.breakpoint.pop_back();
    }
    hull.time_s.push_back(t);
    hull.energy_j.push_back(e);
  }
  hull.breakpoint.push_back(kInf);
  return hull;
}

// The dual's residual network: instruction v is the arc in(v) = 2v -> out(v) = 2v + 1, the source
// 2N feeds every in(v), every out(v) drains to the sink 2N + 1, and each DAG edge u -> w is an arc
// out(u) -> in(w). Costs are minus the time a unit of flow gains, so the longest augmenting path is
// a shortest one, found by Dijkstra on potential-reduced costs (successive shortest paths).
class DualFlow {
 public:
  DualFlow(const schedule::InstructionDag& dag, std::vector<Hull> hulls)
      : dag_(dag), hulls_(std::move(hulls)), n_(dag.num_nodes()), source_(2 * n_), sink_(2 * n_ + 1),
        flow_(n_, 0.0), segment_(n_, 0), walk_(n_, 0), out_(2 * n_ + 2) {
    for (std::size_t v = 0; v < n_; ++v) {
      add_arc(source_, 2 * v, kNone);
      add_arc(2 * v, 2 * v + 1, v);
      add_arc(2 * v + 1, sink_, kNone);
    }
    for (std::size_t e = 0; e < dag.num_edges(); ++e) add_arc(2 * dag.edge_from(e) + 1, 2 * dag.edge_to(e), kNone);
    initial_potentials();
  }

  double value() const { return value_; }
  // G = Σ h_v(f_v), from the flows and the hulls alone, and the magnitude of the terms it and F·T
  // sum (Σ |h_v| + Σ f_v·t_v at the slowest vertex), which sizes their rounding.
  double energy_j(double& magnitude) {
    double sum = 0;
    magnitude = 0;
    for (std::size_t v = 0; v < n_; ++v) {
      const double h = hulls_[v].at(flow_[v], walk_[v]);
      sum += h;
      magnitude += std::abs(h) + flow_[v] * hulls_[v].time_s[0];
    }
    return sum;
  }

  // The longest augmenting path's length; augments it up to its first breakpoint and returns true,
  // or returns false when the path has none (every instruction on it at its fastest option).
  bool augment(double& path_s) {
    shortest_paths();
    KAREUS_CHECK(dist_[sink_] < kInf, "the relaxation's dual lost its augmenting path");
    double delta = kInf, cost = 0;
    for (std::size_t x = sink_; x != source_;) {
      const Arc& a = arcs_[parent_[x]];
      delta = std::min(delta, capacity(parent_[x]));
      cost += arc_cost(parent_[x]);
      x = arcs_[a.pair].to;
    }
    path_s = -cost;
    if (delta == kInf) return false;
    for (std::size_t x = sink_; x != source_;) {
      push(parent_[x], delta);
      x = arcs_[arcs_[parent_[x]].pair].to;
    }
    value_ += delta;
    for (std::size_t x = 0; x < potential_.size(); ++x) potential_[x] += std::min(dist_[x], dist_[sink_]);
    return true;
  }

 private:
  static constexpr std::size_t kNone = static_cast<std::size_t>(-1);
  struct Arc {
    std::size_t to = 0, pair = 0;
    std::size_t node = kNone;  // an instruction's arc (forwards from in(v), backwards from out(v))
    bool forward = true;
    double flow = 0;  // on a DAG or helper arc, forwards; its twin's capacity
  };

  void add_arc(std::size_t from, std::size_t to, std::size_t node) {
    const std::size_t a = arcs_.size();
    arcs_.push_back({to, a + 1, node, true, 0});
    arcs_.push_back({from, a, node, false, 0});
    out_[from].push_back(a);
    out_[to].push_back(a + 1);
  }

  // An instruction's arc forwards runs on its flow's segment; backwards on the segment below when
  // the flow sits at that segment's low end (none below the first: no capacity).
  std::size_t segment(const Arc& arc) const {
    const std::size_t k = segment_[arc.node];
    return arc.forward || k == 0 || flow_[arc.node] > hulls_[arc.node].low(k) ? k : k - 1;
  }
  double capacity(std::size_t a) const {
    const Arc& arc = arcs_[a];
    if (arc.node == kNone) return arc.forward ? kInf : arcs_[arc.pair].flow;
    const Hull& h = hulls_[arc.node];
    const std::size_t k = segment(arc);
    return arc.forward ? h.breakpoint[k] - flow_[arc.node] : std::min(flow_[arc.node], h.breakpoint[k]) - h.low(k);
  }
  double arc_cost(std::size_t a) const {
    const Arc& arc = arcs_[a];
    if (arc.node == kNone) return 0;
    const double t = hulls_[arc.node].time_s[segment(arc)];
    return arc.forward ? -t : t;
  }
  void push(std::size_t a, double delta) {
    Arc& arc = arcs_[a];
    if (arc.node == kNone) {
      if (arc.forward) arc.flow += delta;
      else arcs_[arc.pair].flow -= delta;
      return;
    }
    const Hull& h = hulls_[arc.node];
    std::size_t& k = segment_[arc.node];
    double& f = flow_[arc.node];
    if (arc.forward) {
      const double top = h.breakpoint[k];
      f = delta >= top - f || f + delta >= top ? top : f + delta;
    } else {
      const double low = h.low(segment(arc));
      f = delta >= f - low || f - delta <= low ? low : f - delta;
    }
    // Back on the segment the flow lies in: [low(k), breakpoint[k]). A push below the flow's
    // rounding leaves it where it was; a stale segment would leave its arc without capacity and
    // block every path through the instruction.
    while (f >= h.breakpoint[k]) ++k;
    while (k > 0 && f < h.low(k)) --k;
  }

  // Longest paths with every instruction at its option of least effective energy, in topological
  // order: they make every reduced cost zero or more.
  void initial_potentials() {
    potential_.assign(2 * n_ + 2, 0.0);
    double sink = 0;
    for (std::size_t v : dag_.topological_order()) {
      double in = 0;
      for (std::size_t k = dag_.predecessor_begin(v); k < dag_.predecessor_begin(v + 1); ++k) {
        in = std::min(in, potential_[2 * dag_.edge_from(dag_.predecessor_edge(k)) + 1]);
      }
      potential_[2 * v] = in;
      potential_[2 * v + 1] = in - hulls_[v].time_s[0];
      sink = std::min(sink, potential_[2 * v + 1]);
    }
    potential_[sink_] = sink;
  }

  void shortest_paths() {
    dist_.assign(2 * n_ + 2, kInf);
    parent_.assign(2 * n_ + 2, kNone);
    using Entry = std::pair<double, std::size_t>;
    std::priority_queue<Entry, std::vector<Entry>, std::greater<>> queue;
    dist_[source_] = 0;
    queue.push({0, source_});
    while (!queue.empty()) {
      const auto [d, x] = queue.top();
      queue.pop();
      if (d > dist_[x]) continue;
      // The vertices left are no nearer than the sink: augment() moves their potentials by its distance.
      if (x == sink_) break;
      for (std::size_t a : out_[x]) {
        if (!(capacity(a) > 0)) continue;
        const std::size_t y = arcs_[a].to;
        // Rounding leaves a reduced cost a hair below zero now and then; it is zero.
        const double reduced = std::max(0.0, arc_cost(a) + potential_[x] - potential_[y]);
        if (d + reduced < dist_[y]) dist_[y] = d + reduced, parent_[y] = a, queue.push({dist_[y], y});
      }
    }
  }

  const schedule::InstructionDag& dag_;
  std::vector<Hull> hulls_;
  std::size_t n_, source_, sink_;
  std::vector<double> flow_;           // per instruction
  std::vector<std::size_t> segment_;   // per instruction: the hull vertex its flow's segment ends at
  std::vector<std::size_t> walk_;      // per instruction: where energy_j()'s walk starts
  std::vector<Arc> arcs_;
  std::vector<std::vector<std::size_t>> out_;
  std::vector<double> potential_, dist_;
  std::vector<std::size_t> parent_;
  double value_ = 0;
};

}  // namespace

RelaxationBound::RelaxationBound(const OptionTable& table, const schedule::InstructionDag& dag, double p_blocking_w) {
  if (!(p_blocking_w >= 0) || !std::isfinite(p_blocking_w)) {
    throw InputError(fmt::format("P_blocking must be a non-negative power, got {}", p_blocking_w));
  }
  idle_power_w_ = p_blocking_w * table.num_stages();
  std::vector<Hull> hulls;
  std::size_t vertices = 0;
  for (const schedule::Instruction& ins : dag.instructions()) {
    const std::vector<StageOption>& options = options_of(table, ins);
    if (options.empty()) throw InputError(fmt::format("stage {} has no options for an instruction it runs", ins.stage));
    hulls.push_back(lower_hull(options, p_blocking_w));
    vertices += hulls.back().time_s.size();
  }
  DualFlow dual(dag, std::move(hulls));
  double magnitude = 0;
  lines_.push_back({0, dual.energy_j(magnitude), 0, magnitude});
  // Each augmentation ends at a breakpoint or empties a DAG arc's flow; far more than either means
  // the paths cycle.
  const std::size_t limit = 64 * (vertices + dag.num_edges() + dag.num_nodes());
  for (std::size_t step = 0;; ++step) {
    KAREUS_CHECK(step < limit, "the relaxation's dual did not converge");
    if (!dual.augment(lines_.back().path_s)) break;
    lines_.push_back({dual.value(), dual.energy_j(magnitude), 0, magnitude});
  }
}

double RelaxationBound::energy_j(double time_s) const {
  // The relaxation's own line at `time_s` is the first whose path is no longer; its neighbours are
  // looked at too, as every line is a bound and rounding may tip the order.
  const auto at = std::ranges::lower_bound(lines_, time_s, std::greater<>{}, &Line::path_s);
  const std::size_t i = std::min<std::size_t>(at - lines_.begin(), lines_.size() - 1);
  double best = -kInf;
  for (std::size_t j = i > 0 ? i - 1 : 0; j <= std::min(i + 1, lines_.size() - 1); ++j) {
    const Line& line = lines_[j];
    best = std::max(best, line.energy_j - line.flow * time_s - kRounding * (line.magnitude + line.flow * time_s));
  }
  return best + idle_power_w_ * time_s;
}

}  // namespace kareus::pipeline
