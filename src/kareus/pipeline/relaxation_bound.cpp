#include "kareus/pipeline/relaxation_bound.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
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
// a shortest one. The primal-dual method: Dijkstra on potential-reduced costs finds the longest
// path's length, then every augmenting path of that length is pushed, a blocking flow at a time on
// the arcs of zero reduced cost (Dinic's level graphs); one line of the dual per length. The
// potentials are the primal: −potential(in(v)) is instruction v's start, −potential(out(v)) its end,
// the sink's the makespan, which is the length searched last; by complementary slackness each
// duration lies on the hull segment its flow is on, so they are the relaxation's optimum there.
class DualFlow {
 public:
  DualFlow(const schedule::InstructionDag& dag, std::vector<Hull> hulls)
      : dag_(dag), hulls_(std::move(hulls)), n_(dag.num_nodes()), source_(2 * n_), sink_(2 * n_ + 1),
        flow_(n_, 0.0), duration_(n_, 0.0), segment_(n_, 0), walk_(n_, 0), residual_(n_) {
    for (std::size_t v = 0; v < n_; ++v) refresh(v);
    std::vector<std::pair<std::size_t, std::size_t>> ends;  // (from, to) of each arc
    auto add_arc = [&](std::size_t from, std::size_t to, std::size_t node) {
      arcs_.push_back({to, node, 0});
      arcs_.push_back({from, node, 0});
      ends.emplace_back(from, to);
    };
    for (std::size_t v = 0; v < n_; ++v) {
      add_arc(source_, 2 * v, kNone);
      add_arc(2 * v, 2 * v + 1, v);
      add_arc(2 * v + 1, sink_, kNone);
    }
    for (std::size_t e = 0; e < dag.num_edges(); ++e) add_arc(2 * dag.edge_from(e) + 1, 2 * dag.edge_to(e), kNone);
    // Each vertex's arcs out, forwards and backwards, contiguous.
    first_.assign(2 * n_ + 3, 0);
    for (const auto& [from, to] : ends) ++first_[from + 1], ++first_[to + 1];
    for (std::size_t x = 0; x + 1 < first_.size(); ++x) first_[x + 1] += first_[x];
    out_.resize(arcs_.size());
    std::vector<std::size_t> next(first_.begin(), first_.end() - 1);
    for (std::size_t k = 0; k < ends.size(); ++k) out_[next[ends[k].first]++] = 2 * k, out_[next[ends[k].second]++] = 2 * k + 1;
    initial_potentials();
    // Reduced costs this close to zero are zero: the potentials' rounding, at the paths' scale.
    tight_s_ = 1e-12 * std::max(1.0, -potential_[sink_]);
  }

  double value() const { return value_; }
  // The primal at the length searched last; before the first search, every instruction at its
  // option of least effective energy.
  std::span<const double> durations() {
    for (std::size_t v = 0; v < n_; ++v) duration_[v] = potential_[2 * v] - potential_[2 * v + 1];
    return duration_;
  }
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

  // The longest augmenting path's length; pushes every augmenting path of that length, each up to
  // its first breakpoint, and returns true, or returns false when the longest path has no
  // breakpoint (every instruction on it at its fastest option).
  bool augment(double& path_s) {
    shortest_paths();
    KAREUS_CHECK(dist_[sink_] < kInf, "the relaxation's dual lost its augmenting path");
    path_.clear();
    for (std::size_t x = sink_; x != source_; x = arcs_[parent_[x] ^ 1].to) path_.push_back(parent_[x]);
    double cost = 0;
    for (std::size_t a : path_) cost += arc_cost(a);
    path_s = -cost;
    // Before the push, so that at the fastest length, which has nothing to push, they are its primal.
    for (std::size_t x = 0; x < potential_.size(); ++x) potential_[x] += std::min(dist_[x], dist_[sink_]);
    if (!push_path()) return false;
    while (tight_levels()) {
      while (level_path()) {
        if (!push_path()) return true;  // no breakpoint on it: the next search ends the flow
      }
    }
    return true;
  }

 private:
  static constexpr std::size_t kNone = static_cast<std::size_t>(-1);
  // Arc a and its twin a ^ 1: the even one forwards, the odd one its residual backwards.
  struct Arc {
    std::size_t to = 0;
    std::size_t node = kNone;  // an instruction's arc (forwards from in(v), backwards from out(v))
    double flow = 0;           // on a forward DAG or helper arc; its twin's capacity
  };
  static bool forward(std::size_t a) { return (a & 1) == 0; }

  // An instruction's arc forwards runs on its flow's segment; backwards on the segment below when
  // the flow sits at that segment's low end (none below the first: no capacity). Kept per
  // instruction, refreshed when its flow moves: every search reads them for every arc it passes.
  std::size_t segment_below(std::size_t v) const {
    const std::size_t k = segment_[v];
    return k == 0 || flow_[v] > hulls_[v].low(k) ? k : k - 1;
  }
  void refresh(std::size_t v) {
    const Hull& h = hulls_[v];
    const std::size_t k = segment_[v], below = segment_below(v);
    residual_[v] = {h.breakpoint[k] - flow_[v], std::min(flow_[v], h.breakpoint[below]) - h.low(below),
                    -h.time_s[k], h.time_s[below]};
  }
  double capacity(std::size_t a) const {
    const Arc& arc = arcs_[a];
    if (arc.node == kNone) return forward(a) ? kInf : arcs_[a ^ 1].flow;
    return forward(a) ? residual_[arc.node].forward_capacity : residual_[arc.node].backward_capacity;
  }
  double arc_cost(std::size_t a) const {
    const Arc& arc = arcs_[a];
    if (arc.node == kNone) return 0;
    return forward(a) ? residual_[arc.node].forward_cost : residual_[arc.node].backward_cost;
  }
  double reduced_cost(std::size_t a) const {
    return arc_cost(a) + potential_[arcs_[a ^ 1].to] - potential_[arcs_[a].to];
  }

  // Pushes path_ (arcs from the sink back to the source) up to its first breakpoint; false, pushing
  // nothing, when it has none.
  bool push_path() {
    double delta = kInf;
    for (std::size_t a : path_) delta = std::min(delta, capacity(a));
    if (delta == kInf) return false;
    for (std::size_t a : path_) push(a, delta);
    value_ += delta;
    return true;
  }
  void push(std::size_t a, double delta) {
    Arc& arc = arcs_[a];
    if (arc.node == kNone) {
      arcs_[forward(a) ? a : a ^ 1].flow += forward(a) ? delta : -delta;
      return;
    }
    const Hull& h = hulls_[arc.node];
    std::size_t& k = segment_[arc.node];
    double& f = flow_[arc.node];
    if (forward(a)) {
      const double top = h.breakpoint[k];
      f = delta >= top - f || f + delta >= top ? top : f + delta;
    } else {
      const double low = h.low(segment_below(arc.node));
      f = delta >= f - low || f - delta <= low ? low : f - delta;
    }
    // Back on the segment the flow lies in: [low(k), breakpoint[k]). A push below the flow's
    // rounding leaves it where it was; a stale segment would leave its arc without capacity and
    // block every path through the instruction.
    while (f >= h.breakpoint[k]) ++k;
    while (k > 0 && f < h.low(k)) --k;
    refresh(arc.node);
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

  // Dijkstra; the vertices a tight arc reaches join their parent's distance on a stack, not the
  // heap: most of the network is tight (the longest paths' tree), so most vertices never touch it.
  void shortest_paths() {
    dist_.assign(2 * n_ + 2, kInf);
    parent_.assign(2 * n_ + 2, kNone);
    settled_.assign(2 * n_ + 2, 0);
    using Entry = std::pair<double, std::size_t>;
    std::priority_queue<Entry, std::vector<Entry>, std::greater<>> queue;
    dist_[source_] = 0;
    stack_.assign(1, source_);
    for (;;) {
      std::size_t x = 0;
      if (!stack_.empty()) {
        x = stack_.back();
        stack_.pop_back();
      } else if (!queue.empty()) {
        x = queue.top().second;
        queue.pop();
      } else {
        break;
      }
      if (settled_[x]) continue;
      settled_[x] = 1;
      // The vertices left are no nearer than the sink: augment() moves their potentials by its distance.
      if (x == sink_) break;
      const double d = dist_[x];
      for (std::size_t k = first_[x]; k < first_[x + 1]; ++k) {
        const std::size_t a = out_[k], y = arcs_[a].to;
        if (settled_[y] || !(capacity(a) > 0)) continue;
        // Rounding leaves a reduced cost a hair off zero now and then; it is zero.
        const double reduced = reduced_cost(a);
        if (reduced <= tight_s_) {
          if (d < dist_[y]) dist_[y] = d, parent_[y] = a, stack_.push_back(y);
        } else if (d + reduced < dist_[y]) {
          dist_[y] = d + reduced, parent_[y] = a, queue.push({dist_[y], y});
        }
      }
    }
  }

  // Arcs with capacity and zero reduced cost: every augmenting path of the longest length runs on them.
  bool tight(std::size_t a) const { return capacity(a) > 0 && reduced_cost(a) <= tight_s_; }

  // Dinic's level graph on the tight arcs: each vertex's distance from the source in arcs; false
  // when the sink is out of reach.
  bool tight_levels() {
    level_.assign(2 * n_ + 2, kNone);
    level_[source_] = 0;
    stack_.assign(1, source_);
    for (std::size_t i = 0; i < stack_.size(); ++i) {
      const std::size_t x = stack_[i];
      for (std::size_t k = first_[x]; k < first_[x + 1]; ++k) {
        const std::size_t a = out_[k], y = arcs_[a].to;
        if (level_[y] == kNone && tight(a)) level_[y] = level_[x] + 1, stack_.push_back(y);
      }
    }
    next_.assign(first_.begin(), first_.end() - 1);
    return level_[sink_] != kNone;
  }

  // A path from the source to the sink down the level graph, in path_ (sink first); each vertex's
  // next_ arc stays on the arc it last went down until that arc leads nowhere.
  bool level_path() {
    stack_.assign(1, source_);
    while (!stack_.empty()) {
      const std::size_t x = stack_.back();
      if (x == sink_) {
        path_.clear();
        for (std::size_t i = stack_.size() - 1; i > 0; --i) path_.push_back(out_[next_[stack_[i - 1]]]);
        return true;
      }
      std::size_t& k = next_[x];
      while (k < first_[x + 1] && !(level_[arcs_[out_[k]].to] == level_[x] + 1 && tight(out_[k]))) ++k;
      if (k < first_[x + 1]) {
        stack_.push_back(arcs_[out_[k]].to);
      } else {  // a dead end: its parent moves past the arc to it
        stack_.pop_back();
        if (!stack_.empty()) ++next_[stack_.back()];
      }
    }
    return false;
  }

  const schedule::InstructionDag& dag_;
  std::vector<Hull> hulls_;
  std::size_t n_, source_, sink_;
  std::vector<double> flow_;           // per instruction
  std::vector<double> duration_;       // per instruction: durations()'s
  std::vector<std::size_t> segment_;   // per instruction: the hull vertex its flow's segment ends at
  std::vector<std::size_t> walk_;      // per instruction: where energy_j()'s walk starts
  struct Residual {
    double forward_capacity, backward_capacity, forward_cost, backward_cost;
  };
  std::vector<Residual> residual_;     // per instruction: its arc's, both ways (refresh())
  std::vector<Arc> arcs_;
  std::vector<std::size_t> first_, out_;  // vertex x's arcs: out_[first_[x], first_[x + 1])
  std::vector<double> potential_, dist_;
  std::vector<std::size_t> parent_;
  std::vector<std::size_t> path_;      // the path being pushed, its arcs from the sink back
  std::vector<std::size_t> level_, next_, stack_;  // the searches' own
  std::vector<std::uint8_t> settled_;  // bytes, not bits: Dijkstra reads one per arc it passes
  double tight_s_ = 0;
  double value_ = 0;
};

}  // namespace

RelaxationBound::RelaxationBound(const OptionTable& table, const schedule::InstructionDag& dag, double p_blocking_w,
                                 const OptimumVisitor& visit) {
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
  if (visit) visit(dual.durations());
  // Each length's pushes reach a breakpoint or empty a DAG arc's flow; far more lengths than either
  // means the paths cycle.
  const std::size_t limit = 64 * (vertices + dag.num_edges() + dag.num_nodes());
  for (std::size_t step = 0;; ++step) {
    KAREUS_CHECK(step < limit, "the relaxation's dual did not converge");
    if (!dual.augment(lines_.back().path_s)) {
      if (visit) visit(dual.durations());
      break;
    }
    lines_.push_back({dual.value(), dual.energy_j(magnitude), 0, magnitude});
    if (visit) visit(dual.durations());
  }
}

std::span<const RelaxationBound::Line> RelaxationBound::lines_near(double time_s) const {
  // The relaxation's own line at `time_s` is the first whose path is no longer; its neighbours are
  // looked at too, as every line is a bound and rounding may tip the order.
  const auto at = std::ranges::lower_bound(lines_, time_s, std::greater<>{}, &Line::path_s);
  const std::size_t i = std::min<std::size_t>(at - lines_.begin(), lines_.size() - 1);
  const std::size_t first = i > 0 ? i - 1 : 0;
  return std::span(lines_).subspan(first, std::min(i + 1, lines_.size() - 1) + 1 - first);
}

double RelaxationBound::energy_j(double time_s) const {
  double best = -kInf;
  for (const Line& line : lines_near(time_s)) {
    best = std::max(best, line.energy_j - line.flow * time_s - kRounding * (line.magnitude + line.flow * time_s));
  }
  return best + idle_power_w_ * time_s;
}

double RelaxationBound::rounding_margin_j(double time_s) const {
  double margin = 0;
  for (const Line& line : lines_near(time_s)) margin = std::max(margin, kRounding * (line.magnitude + line.flow * time_s));
  return margin;
}

RelaxationBound::Gap RelaxationBound::worst_gap(std::span<const TimeEnergy> plans) const {
  KAREUS_CHECK(!plans.empty(), "a gap needs a plan");
  Gap worst{-kInf, 0};  // a plan below the bound shows as a negative gap, not as none
  for (const TimeEnergy& p : plans) {
    const double gap = p.energy_j / energy_j(p.time_s) - 1;
    if (gap > worst.relative) worst = {gap, p.time_s};
  }
  return worst;
}

}  // namespace kareus::pipeline
