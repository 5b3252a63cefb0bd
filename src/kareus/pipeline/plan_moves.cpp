// A plan's moves: from a plan, the option changes that can enter the front, each with its exact
// time and energy: one instruction slower (the longest path through it) or faster (the longest path
// avoiding it), the cut move, and wide moves with their exchanges.
#include "kareus/pipeline/local_search.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <utility>

#include "kareus/core/error.hpp"
#include "kareus/pipeline/min_cut.hpp"

namespace kareus::pipeline {
namespace {

// A step of an expansion's staircase of moves (see neighbours).
struct Step {
  std::size_t node = 0;
  std::uint16_t option = 0;
  double time_s = 0, energy_j = 0;
};

struct Run {
  double start, finish;
  std::size_t node;
  bool operator<(const Run& other) const { return start < other.start; }  // ties in any order
};

// The buffers of one expansion, kept per thread: allocating and zeroing them for every plan was a
// tenth of the local search's instructions. Every buffer is written before it is read.
struct Scratch {
  std::vector<std::size_t> at, on_critical_path, bottleneck, critical, at_start, at_finish, stretch, merged;
  std::vector<double> time, finish, tail, middle, best;
  std::vector<Run> runs, merged_runs;
  // The cut move's: each node's index among the critical ones, its options and times after the cut.
  std::vector<std::size_t> critical_index, cut_chosen;
  std::vector<double> cut_time, cut_finish;
  // The cut move's minimum cut, on the activity-on-arc topology of the DAG it was built for (its
  // node count and edges in `cut_topology`), solved from the last cut move's flow on this thread.
  std::optional<MinCutSolver> cut_solver;
  std::vector<std::size_t> cut_topology;
  std::vector<ActiveArc> active;
  std::vector<Step> steps;
  std::vector<Move> exchanges;
  // The exchanges' cone of change (see faster_cone): each node's topological position, the nodes
  // queued and those whose finish or tail changed.
  std::vector<std::size_t> position, queue, finish_changed, tail_changed, partners;
  std::vector<std::uint8_t> queued;
  // Each node's slack and how much longer its next slower candidate runs (infinite at its slowest).
  std::vector<double> slack, slower_by;
};
Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

// For each of `nodes` (whose runs in the earliest-start schedule are disjoint, in time order, as
// those of the nodes every longest path runs through are), the length of the longest path of the
// DAG that avoids it, given each node's earliest finish, duration and longest path after it
// (`tail`). Take the middle m of v's run: every path crosses time m, either inside one of its
// instructions or in a wait on one of its edges, or it ends before m. An instruction running at m,
// an edge waiting across m, or a path ending before m cannot share a path with v (precedence would
// put them wholly before or after v's run), so the longest paths through them avoid v, and they
// bound every path that does. Each such span [from, to) covers a run of consecutive middles and
// raises their answers to its path's length: range updates gathered in a sparse table, read once.
// Paths no longer than `floor` are left out (the answer is then at most `floor`, where it would
// have been below it anyway).
// The answers are the first nodes.size() entries of the returned span (in `s.best`).
std::span<const double> longest_avoiding(const schedule::InstructionDag& dag, std::span<const double> finish,
                                         std::span<const double> time, std::span<const double> tail,
                                         std::span<const std::size_t> nodes, double floor, Scratch& s) {
  const std::size_t k = nodes.size();
  std::vector<double>& middle = s.middle;
  middle.resize(k);
  for (std::size_t i = 0; i < k; ++i) middle[i] = finish[nodes[i]] - time[nodes[i]] / 2;
  // best[p·k + i]: the longest span over nodes i .. i + 2^p − 1, pushed down to level 0 at the end.
  std::size_t levels = 1;
  while ((std::size_t{1} << levels) <= k) ++levels;
  s.best.assign(levels * k, floor);
  auto best = [&](std::size_t p, std::size_t i) -> double& { return s.best[p * k + i]; };
  // The first middle at or after each node's start and finish. A stage's nodes come in run order,
  // so one pointer walks the middles through it, restarting where the times go back.
  const std::size_t n = dag.num_nodes();
  std::vector<std::size_t>& at_start = s.at_start;
  std::vector<std::size_t>& at_finish = s.at_finish;
  at_start.resize(n);
  at_finish.resize(n);
  // Only the nodes on a path longer than `floor` are read below (an edge's path is no longer than
  // the longest through its head), and the pointer only catches up when it skips the others.
  std::size_t next = 0;
  double last_finish = -std::numeric_limits<double>::infinity();
  for (std::size_t u = 0; u < n; ++u) {
    if (finish[u] + tail[u] <= floor) continue;
    const double start = finish[u] - time[u];
    if (start < last_finish) next = 0;
    for (; next < k && middle[next] < start; ++next) {}
    at_start[u] = next;
    for (; next < k && middle[next] < finish[u]; ++next) {}
    at_finish[u] = next;
    last_finish = finish[u];
  }
  // Raises the answers of nodes first .. last − 1 to `length`; a node's own run does not count.
  auto raise = [&](std::size_t first, std::size_t last, double length, std::size_t own) {
    if (first == last || (last == first + 1 && nodes[first] == own)) return;
    const std::size_t p = static_cast<std::size_t>(std::bit_width(last - first)) - 1;
    best(p, first) = std::max(best(p, first), length);
    best(p, last - (std::size_t{1} << p)) = std::max(best(p, last - (std::size_t{1} << p)), length);
  };
  constexpr std::size_t kNoNode = static_cast<std::size_t>(-1);
  for (std::size_t u = 0; u < n; ++u) {
    if (finish[u] + tail[u] <= floor) continue;  // so is every path through u
    raise(at_start[u], at_finish[u], finish[u] + tail[u], u);
    if (dag.successor_begin(u) == dag.successor_begin(u + 1)) raise(at_finish[u], k, finish[u], kNoNode);
    for (std::size_t e = dag.successor_begin(u); e < dag.successor_begin(u + 1); ++e) {
      const std::size_t w = dag.edge_to(e);
      const double w_start = finish[w] - time[w], length = finish[u] + time[w] + tail[w];
      if (finish[u] < w_start && length > floor) raise(at_finish[u], at_start[w], length, kNoNode);
    }
  }
  for (std::size_t p = levels - 1; p > 0; --p) {
    const std::size_t half = std::size_t{1} << (p - 1);
    for (std::size_t i = 0; i + (std::size_t{1} << p) <= k; ++i) {
      best(p - 1, i) = std::max(best(p - 1, i), best(p, i));
      best(p - 1, i + half) = std::max(best(p - 1, i + half), best(p, i));
    }
  }
  return std::span<const double>(s.best).first(k);
}

// The nodes of `critical` (every node on some longest path) that every longest path runs through.
// A longest path has no waits, so at the middle m of v's run it runs some instruction; if it avoids
// v, that instruction's run contains m (on one path with v it would lie wholly before or after).
// So v is on every longest path exactly when no other node of `critical` runs at m.
// The result goes to `s.bottleneck`.
void bottlenecks(std::span<const double> finish, std::span<const double> time,
                 std::span<const std::size_t> critical, Scratch& s) {
  std::vector<Run>& runs = s.runs;
  runs.clear();
  for (std::size_t v : critical) runs.push_back({finish[v] - time[v], finish[v], v});
  // `critical` lists a stage's nodes together and in run order, so the runs come as a few sorted
  // stretches: merging them pairwise (into a second buffer, then back) is cheaper than sorting.
  std::vector<std::size_t>& stretch = s.stretch;
  stretch.assign(1, 0);
  for (std::size_t k = 1; k < runs.size(); ++k) {
    if (runs[k] < runs[k - 1]) stretch.push_back(k);
  }
  stretch.push_back(runs.size());
  std::vector<Run>& merged_runs = s.merged_runs;
  merged_runs.resize(runs.size());
  while (stretch.size() > 2) {
    std::vector<std::size_t>& merged = s.merged;
    merged.assign(1, 0);
    for (std::size_t i = 0; i + 1 < stretch.size(); i += 2) {
      const std::size_t end = stretch[std::min(i + 2, stretch.size() - 1)];
      std::merge(runs.begin() + static_cast<long>(stretch[i]), runs.begin() + static_cast<long>(stretch[i + 1]),
                 runs.begin() + static_cast<long>(stretch[i + 1]), runs.begin() + static_cast<long>(end),
                 merged_runs.begin() + static_cast<long>(stretch[i]));
      merged.push_back(end);
    }
    std::swap(runs, merged_runs);
    std::swap(stretch, merged);
  }
  std::vector<std::size_t>& result = s.bottleneck;
  result.clear();
  double latest_finish = -std::numeric_limits<double>::infinity();  // of the runs before k
  for (std::size_t k = 0; k < runs.size(); ++k) {
    const double middle = runs[k].finish - time[runs[k].node] / 2;
    const bool covered = latest_finish >= middle || (k + 1 < runs.size() && runs[k + 1].start <= middle);
    if (!covered) result.push_back(runs[k].node);
    latest_finish = std::max(latest_finish, runs[k].finish);
  }
}


// This thread's minimum-cut solver on the activity-on-arc topology of `dag`
// (activity_flow_topology), built again only when the DAG differs from the last one's.
MinCutSolver& cut_solver_for(const schedule::InstructionDag& dag, Scratch& s) {
  std::vector<std::size_t>& topology = s.cut_topology;
  const std::size_t n = dag.num_nodes(), m = dag.num_edges();
  auto same = [&] {
    if (!s.cut_solver || topology.size() != 1 + 2 * m || topology[0] != n) return false;
    for (std::size_t e = 0; e < m; ++e) {
      if (topology[1 + 2 * e] != dag.edge_from(e) || topology[2 + 2 * e] != dag.edge_to(e)) return false;
    }
    return true;
  };
  if (!same()) {
    topology.assign(1, n);
    for (std::size_t e = 0; e < m; ++e) topology.push_back(dag.edge_from(e)), topology.push_back(dag.edge_to(e));
    s.cut_solver = activity_flow_topology(dag);
  }
  return *s.cut_solver;
}

// The cut move. Where longest paths run side by side (a pipeline's steady state near its fastest
// plans), no one instruction lies on them all, so no single faster move shortens the plan, nor need
// a slower one lead anywhere cheaper: the search can stop at a local optimum of one-option moves.
// Phillips–Dessouky's step on the true options gets out: a minimum cut of the critical sub-DAG,
// each critical node split into an arc whose upper bound is the extra effective energy per second
// saved one candidate faster and whose lower bound is the saving per second one candidate slower;
// every node crossing the cut forwards goes one candidate faster, backwards one slower; then the
// slack the uneven savings open is reclaimed. The move's exact time and energy come from the
// longest path of the result; none when no cut shortens the plan. (Walks of ten such steps from
// each plan found nothing more on BLOOM 8 x 12.) The plan is `s.at`, `s.time` and `s.finish`, with
// `critical` its nodes on a longest path.
std::optional<Move> cut_move(const schedule::InstructionDag& dag, std::span<const std::span<const Candidate>> candidates_of,
                             std::span<const std::size_t> critical, double makespan, double idle_power_w,
                             Scratch& s) {
  constexpr std::int64_t kUnbounded = FlowNetwork::kUnbounded;
  const std::size_t n = dag.num_nodes();
  const std::vector<double>& finish = s.finish;
  const std::vector<double>& time = s.time;
  const double tolerance_s = 1e-12 * makespan;
  std::vector<std::size_t>& is_critical = s.critical_index;
  is_critical.assign(n, 0);
  for (std::size_t v : critical) is_critical[v] = 1;
  // Micro-joules per second; candidates are a Pareto set, so the rates are at least 0.
  auto per_second = [](double energy_j, double time_s) {
    return std::max<std::int64_t>(0, std::llround(1e6 * energy_j / time_s));
  };
  MinCutSolver& cut_solver = cut_solver_for(dag, s);
  std::vector<ActiveArc>& active = s.active;
  active.clear();
  for (std::size_t v : critical) {
    const std::span<const Candidate> candidates = candidates_of[v];
    const std::size_t at = s.at[v];
    std::int64_t faster = kUnbounded, slower = 0;
    if (at > 0) {
      faster = per_second(candidates[at - 1].effective_energy_j - candidates[at].effective_energy_j,
                          candidates[at].time_s - candidates[at - 1].time_s);
    }
    if (at + 1 < candidates.size()) {
      slower = per_second(candidates[at].effective_energy_j - candidates[at + 1].effective_energy_j,
                          candidates[at + 1].time_s - candidates[at].time_s);
    }
    // Where the options are not convex (slowing saves more per second than speeding costs) the
    // cut may not pay for a slowdown beyond what a speedup costs.
    active.push_back({v, std::min(slower, faster), faster});
    if (finish[v] - time[v] <= tolerance_s) active.push_back({n + v, 0, kUnbounded});
    if (finish[v] >= makespan - tolerance_s) active.push_back({2 * n + v, 0, kUnbounded});
    for (std::size_t e = dag.successor_begin(v); e < dag.successor_begin(v + 1); ++e) {
      const std::size_t w = dag.edge_to(e);
      if (is_critical[w] && finish[v] >= finish[w] - time[w] - tolerance_s) {
        active.push_back({3 * n + e, 0, kUnbounded});
      }
    }
  }
  const MinCut cut = cut_solver.solve(active);
  if (!cut.bounded) return std::nullopt;
  std::vector<std::size_t>& chosen = s.cut_chosen;
  std::vector<double>& new_time = s.cut_time;
  std::vector<double>& new_finish = s.cut_finish;
  chosen.assign(s.at.begin(), s.at.end());
  new_time.assign(time.begin(), time.end());
  new_finish.resize(n);
  for (std::size_t v : critical) {
    const bool tail_side = cut.source_side[2 + 2 * v] != 0, head_side = cut.source_side[3 + 2 * v] != 0;
    if (tail_side && !head_side) {
      new_time[v] = candidates_of[v][--chosen[v]].time_s;
    } else if (!tail_side && head_side && chosen[v] + 1 < candidates_of[v].size()) {
      new_time[v] = candidates_of[v][++chosen[v]].time_s;
    }
  }
  dag.earliest_finish_into<double>(new_time, new_finish);
  const double new_makespan = dag.latest_finish<double>(new_finish);
  if (new_makespan >= makespan) return std::nullopt;
  reclaim_slack(dag, candidates_of, chosen, new_time, new_finish, new_makespan);
  Move move{n, 0, new_makespan, idle_power_w * new_makespan, {}};
  for (std::size_t v = 0; v < n; ++v) {
    move.energy_j += candidates_of[v][chosen[v]].effective_energy_j;
    if (chosen[v] == s.at[v]) continue;
    const auto option = static_cast<std::uint16_t>(candidates_of[v][chosen[v]].option);
    if (move.node == n) move.node = v, move.option = option;
    else move.also.emplace_back(v, option);
  }
  return move;
}

// The plan with node u at `new_time_u` (faster than s.time[u]) and every other node as it was: its
// earliest finishes into s.cut_finish and longest tails into s.middle, which hold the plan's
// (s.finish, s.tail) on entry, of the nodes at topological positions up to `finish_until` and from
// `tail_from` on (the others keep the plan's). Only u's descendants' finishes and its ancestors'
// tails can change, and of those only the ones whose longest path ran through u: both are found by
// walking out from u in topological order (a min-heap of positions forwards, a max-heap backwards),
// stopping wherever a node's value stays; a node's value depends on those before it (after it, for
// tails) alone, so the limits cut nothing short. Each changed value is computed as the full passes
// compute it (the same maxima of the same sums), so it is the same to the bit. restore_cone()
// undoes it.
void faster_cone(const schedule::InstructionDag& dag, std::size_t u, double new_time_u, std::size_t finish_until,
                 std::size_t tail_from, Scratch& s) {
  const std::vector<double>& time = s.time;
  std::vector<double>& new_finish = s.cut_finish;
  std::vector<double>& new_tail = s.middle;
  std::vector<std::size_t>& heap = s.queue;
  auto enqueue = [&](std::size_t v, auto before) {
    if (s.queued[v]) return;
    s.queued[v] = 1;
    heap.push_back(v);
    std::ranges::push_heap(heap, before);
  };
  auto dequeue = [&](auto before) {
    std::ranges::pop_heap(heap, before);
    const std::size_t v = heap.back();
    heap.pop_back();
    s.queued[v] = 0;
    return v;
  };
  auto later = [&](std::size_t a, std::size_t b) { return s.position[a] > s.position[b]; };
  auto earlier = [&](std::size_t a, std::size_t b) { return s.position[a] < s.position[b]; };
  auto start_of = [&](std::size_t v) {
    double start = 0;
    for (std::size_t k = dag.predecessor_begin(v); k < dag.predecessor_begin(v + 1); ++k) {
      start = std::max(start, new_finish[dag.edge_from(dag.predecessor_edge(k))]);
    }
    return start;
  };
  auto enqueue_successors = [&](std::size_t v) {
    for (std::size_t e = dag.successor_begin(v); e < dag.successor_begin(v + 1); ++e) {
      if (s.position[dag.edge_to(e)] <= finish_until) enqueue(dag.edge_to(e), later);
    }
  };
  auto enqueue_predecessors = [&](std::size_t v) {
    for (std::size_t k = dag.predecessor_begin(v); k < dag.predecessor_begin(v + 1); ++k) {
      const std::size_t p = dag.edge_from(dag.predecessor_edge(k));
      if (s.position[p] >= tail_from) enqueue(p, earlier);
    }
  };
  new_finish[u] = start_of(u) + new_time_u;
  s.finish_changed.assign(1, u);
  heap.clear();
  enqueue_successors(u);
  while (!heap.empty()) {
    const std::size_t v = dequeue(later);
    const double finish_v = start_of(v) + time[v];
    if (finish_v == s.finish[v]) continue;
    new_finish[v] = finish_v;
    s.finish_changed.push_back(v);
    enqueue_successors(v);
  }
  s.tail_changed.clear();
  enqueue_predecessors(u);
  while (!heap.empty()) {
    const std::size_t v = dequeue(earlier);
    double longest = 0;
    for (std::size_t e = dag.successor_begin(v); e < dag.successor_begin(v + 1); ++e) {
      const std::size_t w = dag.edge_to(e);
      longest = std::max(longest, (w == u ? new_time_u : time[w]) + new_tail[w]);
    }
    if (longest == s.tail[v]) continue;
    new_tail[v] = longest;
    s.tail_changed.push_back(v);
    enqueue_predecessors(v);
  }
}

void restore_cone(Scratch& s) {
  for (std::size_t v : s.finish_changed) s.cut_finish[v] = s.finish[v];
  for (std::size_t v : s.tail_changed) s.middle[v] = s.tail[v];
}

// The exchanges of wide moves: an instruction u that is not on every longest path goes one
// candidate faster, which leaves the makespan as it is, and a neighbour w of it in the DAG takes the
// room that opens, to the slowest candidate that fits it at the same makespan. Slack reclamation
// gives the room latest-first (to u itself, again); an exchange gives it to w (on
// llama3.2-3b-tp8-mbs8-seq4096's composed table, at its fastest time, stage 1's backward one
// candidate faster and the forward before it one slower, 0.05% cheaper, where either alone is
// not). Pairs where w's next candidate cannot fit even with all of u's saving are skipped unseen.
// The plan with u faster is found once for all of u's neighbours, by its cone of change, and only as
// far as they need: a successor w its start (its predecessors' finishes), a predecessor w its tail.
// The makespan's own change needs the whole forward cone only where u is on a longest path: off
// them every path through u is shorter than the makespan, so no end's finish moves.
// The plan is `s.at`, `s.time`, `s.finish` and `s.tail`, of makespan `makespan`; `s.bottleneck` its
// nodes on every longest path.
void exchange_moves(const schedule::InstructionDag& dag, std::span<const std::span<const Candidate>> candidates_of,
                    double makespan, double critical_length, double sum_effective, double idle_power_w, Scratch& s,
                    std::vector<Move>& exchanges) {
  const std::size_t n = dag.num_nodes();
  std::vector<std::size_t>& is_bottleneck = s.critical_index;
  is_bottleneck.assign(n, 0);
  for (std::size_t v : s.bottleneck) is_bottleneck[v] = 1;
  const std::vector<std::size_t>& at = s.at;
  const std::vector<double>& time = s.time;
  const std::vector<double>& new_finish = s.cut_finish;
  const std::vector<double>& new_tail = s.middle;  // free here: longest_avoiding has run or will rewrite it
  s.cut_finish.assign(s.finish.begin(), s.finish.end());
  s.middle.assign(s.tail.begin(), s.tail.end());
  s.position.resize(n);
  const std::span<const std::size_t> order = dag.topological_order();
  for (std::size_t k = 0; k < n; ++k) s.position[order[k]] = k;
  s.queued.assign(n, 0);
  const double tolerance_s = 1e-12 * makespan;
  s.slack.resize(n);
  s.slower_by.resize(n);
  for (std::size_t w = 0; w < n; ++w) {
    s.slack[w] = makespan - s.finish[w] - s.tail[w];
    s.slower_by[w] = at[w] + 1 < candidates_of[w].size() ? candidates_of[w][at[w] + 1].time_s - time[w]
                                                          : std::numeric_limits<double>::infinity();
  }
  std::vector<std::size_t>& partners = s.partners;
  for (std::size_t u = 0; u < n; ++u) {
    if (is_bottleneck[u] || at[u] == 0) continue;
    const double faster_u = candidates_of[u][at[u] - 1].time_s;
    const double saving = time[u] - faster_u;
    // The neighbours whose next candidate could fit with all of u's saving, and how far the cone
    // must reach for them.
    partners.clear();
    std::size_t finish_until = 0, tail_from = n;
    auto consider = [&](std::size_t w, bool successor) {
      if (w == u || s.slower_by[w] > s.slack[w] + saving + tolerance_s) return;
      partners.push_back(w);
      if (successor) finish_until = std::max(finish_until, s.position[w]);
      else tail_from = std::min(tail_from, s.position[w]);
    };
    for (std::size_t e = dag.successor_begin(u); e < dag.successor_begin(u + 1); ++e) consider(dag.edge_to(e), true);
    for (std::size_t k = dag.predecessor_begin(u); k < dag.predecessor_begin(u + 1); ++k) {
      consider(dag.edge_from(dag.predecessor_edge(k)), false);
    }
    if (partners.empty()) continue;
    const bool on_longest_path = s.finish[u] + s.tail[u] >= critical_length;
    faster_cone(dag, u, faster_u, on_longest_path ? n : finish_until, tail_from, s);
    const double latest_finish = on_longest_path ? dag.latest_finish<double>(new_finish) : makespan;
    for (std::size_t w : partners) {
      const std::span<const Candidate> to_w = candidates_of[w];
      const double start_w = new_finish[w] - time[w];
      const double window = makespan - start_w - new_tail[w];
      std::size_t k = at[w];
      while (k + 1 < to_w.size() && to_w[k + 1].time_s <= window) ++k;
      if (k == at[w]) continue;
      // Only paths through w grow, and none past the makespan; u's own leave it as it was.
      const double new_makespan = std::max(latest_finish, start_w + to_w[k].time_s + new_tail[w]);
      const double energy = sum_effective - candidates_of[u][at[u]].effective_energy_j +
                            candidates_of[u][at[u] - 1].effective_energy_j - to_w[at[w]].effective_energy_j +
                            to_w[k].effective_energy_j + idle_power_w * new_makespan;
      exchanges.push_back({u, static_cast<std::uint16_t>(candidates_of[u][at[u] - 1].option), new_makespan, energy,
                           {{w, static_cast<std::uint16_t>(to_w[k].option)}}});
    }
    restore_cone(s);
  }
}

}  // namespace

FrontierPoint moved(FrontierPoint origin, const Move& move) {
  origin.assignment[move.node] = move.option;
  for (const auto& [node, option] : move.also) origin.assignment[node] = option;
  origin.time_s = move.time_s;
  origin.energy_j = move.energy_j;
  return origin;
}

namespace {

// neighbours() and wide_neighbours(): kWide moves each instruction up to `reach` candidates either
// way. A template, so that neighbours(), which every round runs, carries no test of it.
template <bool kWide>
std::vector<Move> moves_from(const FrontierSolver& solver, const FrontierPoint& plan, bool with_cut_move,
                             std::size_t reach) {
  // A slower move goes one candidate on, and on past near-ties of the plan's option (times and
  // effective energies within a relative 1e-6): a move to one of those changes next to nothing, so
  // it never enters the front, and the search would stop short of the option beyond it. A faster
  // move goes one or two candidates back: with one, 1 of 10,000 irregular tiny tables kept a gap of
  // 2.4% to the exact frontier even with the search run to convergence.
  auto near_tie = [](const Candidate& a, const Candidate& b) {
    return std::abs(a.time_s - b.time_s) <= 1e-6 * a.time_s &&
           std::abs(a.effective_energy_j - b.effective_energy_j) <= 1e-6 * std::abs(a.effective_energy_j);
  };
  const schedule::InstructionDag& dag = solver.dag();
  const std::size_t n = dag.num_nodes();
  const std::span<const std::span<const Candidate>> candidates_of = solver.candidates();
  KAREUS_CHECK(plan.assignment.size() == n, "plan assignment size differs from the DAG");
  Scratch& s = scratch();
  std::vector<std::size_t>& at = s.at;  // candidate index per node
  std::vector<double>& time = s.time;
  at.resize(n);
  time.resize(n);
  double sum_effective = 0;
  for (std::size_t v = 0; v < n; ++v) {
    at[v] = solver.candidate_index(v, plan.assignment[v]);
    time[v] = candidates_of[v][at[v]].time_s;
    sum_effective += candidates_of[v][at[v]].effective_energy_j;
  }
  // The fastest candidate a faster move of v goes to.
  auto faster_reach = [&](std::size_t v) { return at[v] - std::min<std::size_t>(at[v], kWide ? reach : 2); };
  std::vector<double>& finish = s.finish;
  std::vector<double>& tail = s.tail;
  finish.resize(n);
  tail.resize(n);
  dag.earliest_finish_into<double>(time, finish);
  dag.longest_after_into<double>(time, tail);
  const double makespan = dag.latest_finish<double>(finish);
  const double idle_power_w = solver.options().p_blocking_w * solver.num_stages();
  auto energy_of = [&](std::size_t v, const Candidate& to, double new_makespan) {
    return sum_effective - candidates_of[v][at[v]].effective_energy_j + to.effective_energy_j +
           idle_power_w * new_makespan;
  };
  // Only moves no other move dominates can enter a front, and an expansion's hundreds of moves have
  // a handful of those (7 on average for GPT-3, M = 96): keep that staircase, time ascending, energy
  // strictly falling. The plan itself is its first step, left out at the end: a move it dominates
  // is dominated by it or by what dominates it.
  const double plan_energy = sum_effective + idle_power_w * makespan;
  // The staircase holds trivially copyable steps (a Move's vector made an expansion 4% dearer); the
  // cut move is the step of node n + 1, its changes kept aside.
  std::vector<Step>& moves = s.steps;
  moves.assign(1, {n, 0, makespan, plan_energy});
  std::optional<Move> cut;
  std::vector<Move>& exchanges = s.exchanges;  // wide moves' exchanges: the steps of node n + 2 + k
  auto add_step = [&](const Step& m) {
    // The last step is the slowest and cheapest: most moves it dominates spare the search.
    if (m.time_s >= moves.back().time_s && m.energy_j >= moves.back().energy_j) return;
    auto after = std::upper_bound(moves.begin(), moves.end(), m.time_s,
                                  [](double time_s, const Step& step) { return time_s < step.time_s; });
    if (after != moves.begin() && std::prev(after)->energy_j <= m.energy_j) return;
    auto last = after;
    while (last != moves.end() && last->energy_j >= m.energy_j) ++last;
    auto first = after;
    if (first != moves.begin() && std::prev(first)->time_s == m.time_s) --first;  // now dominated
    if (first == last) {
      moves.insert(first, m);
    } else {
      *first = m;
      moves.erase(std::next(first), last);
    }
  };
  auto move = [&](std::size_t v, const Candidate& to, double new_makespan) {
    const double energy = energy_of(v, to, new_makespan);
    if (new_makespan >= makespan && energy >= plan_energy) return;  // most slower moves: spare the search
    add_step({v, static_cast<std::uint16_t>(to.option), new_makespan, energy});
  };
  auto pareto_moves = [&] {
    std::vector<Move> result;
    result.reserve(moves.size());
    for (const Step& m : moves) {
      if (m.node == n + 1) result.push_back(std::move(*cut));
      else if (kWide && m.node > n + 1) result.push_back(std::move(exchanges[m.node - n - 2]));
      else if (m.node != n) result.push_back({m.node, m.option, m.time_s, m.energy_j, {}});
    }
    return result;
  };
  // Slower: only the paths through v grow, so the new makespan is immediate. The same pass lists
  // the nodes on a critical path, for the faster moves below.
  const double critical_length = makespan - 1e-12 * makespan;
  std::vector<std::size_t>& on_critical_path = s.on_critical_path;
  on_critical_path.clear();
  // A slower candidate costs the plan at least least_energy_from's bound with the node's start and
  // tail around it: once that reaches the plan's energy, so does every slower candidate's move, and
  // the loop stops (in wide moves, before the 16 candidates of most nodes). The margin, far above
  // the sums' rounding, keeps it from refusing a move the exact test would take.
  const std::span<const std::span<const double>> least_energy_from = solver.least_energy_from();
  const double refused_from_j = plan_energy + 1e-12 * std::abs(plan_energy);
  for (std::size_t v = 0; v < n; ++v) {
    const std::span<const Candidate> candidates = candidates_of[v];
    const double around_j =
        sum_effective - candidates[at[v]].effective_energy_j + idle_power_w * (finish[v] - time[v] + tail[v]);
    for (std::size_t to = at[v] + 1; to < candidates.size(); ++to) {
      if (around_j + least_energy_from[v][to] >= refused_from_j) break;  // this and every slower one refused
      move(v, candidates[to], std::max(makespan, finish[v] - time[v] + candidates[to].time_s + tail[v]));
      if ((!kWide || to >= at[v] + reach) && !near_tie(candidates[at[v]], candidates[to])) break;
    }
    if (finish[v] + tail[v] >= critical_length) on_critical_path.push_back(v);
  }
  // Faster: every path through v shortens, so the new makespan is the larger of
  // makespan − saving and the longest path avoiding v (longest_avoiding). That pays only when every
  // critical path runs through v.
  std::vector<std::size_t>& critical = s.critical;
  critical.clear();
  double largest_saving = 0;
  bottlenecks(finish, time, on_critical_path, s);
  for (std::size_t v : s.bottleneck) {
    if (at[v] == 0) continue;
    critical.push_back(v);
    largest_saving = std::max(largest_saving, time[v] - candidates_of[v][faster_reach(v)].time_s);
  }
  if (with_cut_move && s.bottleneck.size() < on_critical_path.size()) {
    // Not every critical node is on every longest path: some run side by side.
    cut = cut_move(dag, candidates_of, on_critical_path, makespan, idle_power_w, s);
    if (cut) add_step({n + 1, 0, cut->time_s, cut->energy_j});
  }
  if constexpr (kWide) {
    exchanges.clear();
    exchange_moves(dag, candidates_of, makespan, critical_length, sum_effective, idle_power_w, s, exchanges);
    for (std::size_t k = 0; k < exchanges.size(); ++k) {
      add_step({n + 2 + k, 0, exchanges[k].time_s, exchanges[k].energy_j});
    }
  }
  if (critical.empty()) return pareto_moves();
  const std::span<const double> avoiding =
      longest_avoiding(dag, finish, time, tail, critical, makespan - largest_saving, s);
  for (std::size_t k = 0; k < critical.size(); ++k) {
    const std::size_t v = critical[k];
    for (std::size_t to = faster_reach(v); to < at[v]; ++to) {
      const Candidate& faster = candidates_of[v][to];
      const double new_makespan = std::max(makespan - (time[v] - faster.time_s), avoiding[k]);
      if (new_makespan < makespan) move(v, faster, new_makespan);
    }
  }
  return pareto_moves();
}

}  // namespace

std::vector<Move> neighbours(const FrontierSolver& solver, const FrontierPoint& plan, bool with_cut_move) {
  return moves_from<false>(solver, plan, with_cut_move, 2);
}

std::vector<Move> wide_neighbours(const FrontierSolver& solver, const FrontierPoint& plan, std::size_t reach) {
  return moves_from<true>(solver, plan, /*with_cut_move=*/true, std::max<std::size_t>(reach, 2));
}

}  // namespace kareus::pipeline
