#include "kareus/pipeline/frontier_solver.hpp"

#include <fmt/format.h>
#include <tbb/parallel_for.h>
#include <tbb/task_group.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <limits>
#include <map>
#include <optional>

#include "kareus/core/error.hpp"
#include "kareus/pipeline/min_cut.hpp"

namespace kareus::pipeline {
namespace {

std::size_t cost_index(const Instruction& ins) {
  return static_cast<std::size_t>(ins.stage) * 2 + static_cast<std::size_t>(ins.type);
}

// Moves instructions that have slack in the real schedule to the slowest option that still fits,
// latest-first, so the iteration time does not grow beyond `makespan` (at least the current one).
// `chosen` holds indices into each node's candidates and `time` their times; both are updated.
// `finish` is the earliest finish of every node before the moves.
void reclaim_slack(const InstructionDag& dag, std::span<const std::span<const Candidate>> candidates_of,
                   std::vector<std::size_t>& chosen, std::vector<double>& time, std::span<const double> finish,
                   double makespan) {
  const std::size_t n = dag.num_nodes();
  std::vector<double> latest_start(n);
  auto order = dag.topological_order();
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    std::size_t v = *it;
    double latest_finish = makespan;
    for (std::size_t e = dag.successor_begin(v); e < dag.successor_begin(v + 1); ++e) {
      latest_finish = std::min(latest_finish, latest_start[dag.edge_to(e)]);
    }
    const double window = latest_finish - (finish[v] - time[v]);
    const std::span<const Candidate> candidates = candidates_of[v];
    if (window > time[v] && chosen[v] + 1 < candidates.size()) {
      // Candidates' real times strictly increase with their index; take the last that fits. A walk
      // up from the current one, not a binary search: it is most often a few options, and its
      // branches predictable (−15% of the evaluation's instructions on the synthetic 8 × 128 case).
      std::size_t k = chosen[v];
      while (k + 1 < candidates.size() && candidates[k + 1].time_s <= window) ++k;
      chosen[v] = k;
      time[v] = candidates[k].time_s;
    }
    latest_start[v] = latest_finish - time[v];
  }
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
std::vector<double> longest_avoiding(const InstructionDag& dag, std::span<const double> finish,
                                     std::span<const double> time, std::span<const double> tail,
                                     std::span<const std::size_t> nodes, double floor) {
  const std::size_t k = nodes.size();
  std::vector<double> middle(k);
  for (std::size_t i = 0; i < k; ++i) middle[i] = finish[nodes[i]] - time[nodes[i]] / 2;
  // best[p][i]: the longest span over nodes i .. i + 2^p − 1, pushed down to level 0 at the end.
  std::size_t levels = 1;
  while ((std::size_t{1} << levels) <= k) ++levels;
  std::vector<std::vector<double>> best(levels, std::vector<double>(k, floor));
  // The first middle at or after each node's start and finish. A stage's nodes come in run order,
  // so one pointer walks the middles through it, restarting where the times go back.
  const std::size_t n = dag.num_nodes();
  std::vector<std::size_t> at_start(n), at_finish(n);
  std::size_t next = 0;
  for (std::size_t u = 0; u < n; ++u) {
    const double start = finish[u] - time[u];
    if (u > 0 && start < finish[u - 1]) next = 0;
    for (; next < k && middle[next] < start; ++next) {}
    at_start[u] = next;
    for (; next < k && middle[next] < finish[u]; ++next) {}
    at_finish[u] = next;
  }
  // Raises the answers of nodes first .. last − 1 to `length`; a node's own run does not count.
  auto raise = [&](std::size_t first, std::size_t last, double length, std::size_t own) {
    if (first == last || (last == first + 1 && nodes[first] == own)) return;
    const std::size_t p = static_cast<std::size_t>(std::bit_width(last - first)) - 1;
    best[p][first] = std::max(best[p][first], length);
    best[p][last - (std::size_t{1} << p)] = std::max(best[p][last - (std::size_t{1} << p)], length);
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
      best[p - 1][i] = std::max(best[p - 1][i], best[p][i]);
      best[p - 1][i + half] = std::max(best[p - 1][i + half], best[p][i]);
    }
  }
  return std::move(best[0]);
}

// The nodes of `critical` (every node on some longest path) that every longest path runs through.
// A longest path has no waits, so at the middle m of v's run it runs some instruction; if it avoids
// v, that instruction's run contains m (on one path with v it would lie wholly before or after).
// So v is on every longest path exactly when no other node of `critical` runs at m.
std::vector<std::size_t> bottlenecks(std::span<const double> finish, std::span<const double> time,
                                     std::span<const std::size_t> critical) {
  struct Run {
    double start, finish;
    std::size_t node;
    bool operator<(const Run& other) const { return start < other.start; }  // ties in any order
  };
  std::vector<Run> runs;
  runs.reserve(critical.size());
  for (std::size_t v : critical) runs.push_back({finish[v] - time[v], finish[v], v});
  // `critical` lists a stage's nodes together and in run order, so the runs come as a few sorted
  // stretches: merging them pairwise (into a second buffer, then back) is cheaper than sorting.
  std::vector<std::size_t> stretch{0};
  for (std::size_t k = 1; k < runs.size(); ++k) {
    if (runs[k] < runs[k - 1]) stretch.push_back(k);
  }
  stretch.push_back(runs.size());
  std::vector<Run> merged_runs(runs.size());
  while (stretch.size() > 2) {
    std::vector<std::size_t> merged{0};
    for (std::size_t i = 0; i + 1 < stretch.size(); i += 2) {
      const std::size_t end = stretch[std::min(i + 2, stretch.size() - 1)];
      std::merge(runs.begin() + static_cast<long>(stretch[i]), runs.begin() + static_cast<long>(stretch[i + 1]),
                 runs.begin() + static_cast<long>(stretch[i + 1]), runs.begin() + static_cast<long>(end),
                 merged_runs.begin() + static_cast<long>(stretch[i]));
      merged.push_back(end);
    }
    std::swap(runs, merged_runs);
    stretch = std::move(merged);
  }
  std::vector<std::size_t> result;
  double latest_finish = -std::numeric_limits<double>::infinity();  // of the runs before k
  for (std::size_t k = 0; k < runs.size(); ++k) {
    const double middle = runs[k].finish - time[runs[k].node] / 2;
    const bool covered = latest_finish >= middle || (k + 1 < runs.size() && runs[k + 1].start <= middle);
    if (!covered) result.push_back(runs[k].node);
    latest_finish = std::max(latest_finish, runs[k].finish);
  }
  return result;
}

// The fixed activity-on-arc topology of the DAG (see cut_solver_ in the header).
MinCutSolver flow_topology(const InstructionDag& dag) {
  const std::size_t n = dag.num_nodes();
  std::vector<std::pair<std::size_t, std::size_t>> arcs;
  for (std::size_t v = 0; v < n; ++v) arcs.emplace_back(2 + 2 * v, 3 + 2 * v);
  for (std::size_t v = 0; v < n; ++v) arcs.emplace_back(0, 2 + 2 * v);
  for (std::size_t v = 0; v < n; ++v) arcs.emplace_back(3 + 2 * v, 1);
  for (std::size_t e = 0; e < dag.num_edges(); ++e) {
    arcs.emplace_back(3 + 2 * dag.edge_from(e), 2 + 2 * dag.edge_to(e));
  }
  return MinCutSolver(2 + 2 * n, 0, 1, arcs);
}

}  // namespace

double iteration_energy_j(double sum_energy_j, double sum_time_s, int num_stages,
                          double iteration_time_s, double p_blocking_w) {
  return sum_energy_j + p_blocking_w * (num_stages * iteration_time_s - sum_time_s);
}

TimeEnergy evaluate_assignment(const OptionTable& table, const InstructionDag& dag,
                               std::span<const std::uint16_t> assignment, double p_blocking_w) {
  KAREUS_CHECK(assignment.size() == dag.num_nodes(), "assignment size differs from the DAG");
  std::vector<double> time(dag.num_nodes());
  double sum_energy = 0, sum_time = 0;
  for (std::size_t v = 0; v < dag.num_nodes(); ++v) {
    const Instruction& ins = dag.instruction(v);
    const StageOption& o = table.at(ins.stage, ins.type).at(assignment[v]);
    time[v] = o.time_s;
    sum_energy += o.energy_j;
    sum_time += o.time_s;
  }
  double makespan = dag.makespan<double>(time);
  return {makespan, iteration_energy_j(sum_energy, sum_time, table.num_stages(), makespan, p_blocking_w)};
}

FrontierSolver::FrontierSolver(const OptionTable& table, const PipelineSchedule& schedule,
                               SolverOptions options)
    : table_(table), options_(options), dag_(schedule), cut_solver_(flow_topology(dag_)) {
  if (!(options.unit_time_s > 0) || !std::isfinite(options.unit_time_s)) {
    throw InputError(fmt::format("the time unit must be positive, got {}", options.unit_time_s));
  }
  if (!(options.p_blocking_w >= 0) || !std::isfinite(options.p_blocking_w)) {
    throw InputError(fmt::format("P_blocking must be a non-negative power, got {}", options.p_blocking_w));
  }
  if (table.num_stages() != schedule.num_stages()) {
    throw InputError(fmt::format("the option table has {} stages but the schedule {}",
                                 table.num_stages(), schedule.num_stages()));
  }
  for (int stage = 0; stage < table.num_stages(); ++stage) {
    for (InstructionType type : {InstructionType::kForward, InstructionType::kBackward}) {
      if (table.at(stage, type).size() > 65535) {
        throw InputError(fmt::format("stage {} {} has more than 65535 options", stage, to_string(type)));
      }
    }
  }
  for (const Instruction& ins : dag_.instructions()) cost_of_.push_back(cost_index(ins));
  build_model(options.unit_time_s);
  first_model_ = &models_.front();
  for (std::size_t v = 0; v < dag_.num_nodes(); ++v) {
    durations_.push_back(model().costs[cost_of_[v]].max_units());
  }
  makespan_ = dag_.makespan<long>(durations_);
  std::vector<double> fastest;
  for (std::size_t v = 0; v < dag_.num_nodes(); ++v) fastest.push_back(model().candidates_of[v][0].time_s);
  stats_.initial_time_s = planned_time_s();
  stats_.fastest_time_s = dag_.makespan<double>(fastest);
}

void FrontierSolver::build_model(double unit_time_s) {
  Model& m = models_.emplace_back();
  m.unit_time_s = unit_time_s;
  for (int stage = 0; stage < table_.num_stages(); ++stage) {
    for (InstructionType type : {InstructionType::kForward, InstructionType::kBackward}) {
      m.costs.emplace_back(table_.at(stage, type), options_.p_blocking_w, unit_time_s, options_.cost_model,
                           fmt::format("stage {} {}", stage, to_string(type)));
    }
  }
  double total_range_j = 0;
  for (std::size_t v = 0; v < dag_.num_nodes(); ++v) {
    const OperationCost& c = m.costs[cost_of_[v]];
    total_range_j += c.model_cost_j(c.min_units()) - c.model_cost_j(c.max_units());
  }
  // Integer cost units: nanojoules, coarser only when the totals would crowd 64-bit flows.
  m.cost_scale = std::min(1e9, 1e13 / std::max(total_range_j, 1e-9));
  for (const OperationCost& c : m.costs) {
    std::vector<std::int64_t> slope;
    for (long d = c.min_units(); d < c.max_units(); ++d) {
      slope.push_back(std::llround(m.cost_scale * c.lengthening_saving_j(d)));
    }
    for (std::size_t k = 1; k < slope.size(); ++k) {
      KAREUS_CHECK(slope[k] <= slope[k - 1], "cost model is not convex");
    }
    m.slope.push_back(std::move(slope));
  }
  for (std::size_t v = 0; v < dag_.num_nodes(); ++v) m.candidates_of.push_back(m.costs[cost_of_[v]].options());
  force_cut_ = true;
}

// Re-expresses the current plan in units `kRefineFactor` times finer, so the last stretch to the
// fastest plan, where the frontier is steepest and several clocks share a unit, is walked at finer
// resolution. Each instruction's duration becomes its current option's time in the finer unit.
void FrontierSolver::refine() {
  std::vector<std::size_t> option(dag_.num_nodes());
  for (std::size_t v = 0; v < dag_.num_nodes(); ++v) {
    option[v] = model().costs[cost_of_[v]].frugal_for(durations_[v]);
  }
  build_model(model().unit_time_s / kRefineFactor);
  for (std::size_t v = 0; v < dag_.num_nodes(); ++v) {
    const OperationCost& c = model().costs[cost_of_[v]];
    durations_[v] = std::clamp(c.options()[option[v]].quantized_units, c.min_units(), c.max_units());
  }
  makespan_ = dag_.makespan<long>(durations_);
  refined_ = true;
}

ActiveArc FrontierSolver::instruction_arc(const Model& m, std::size_t node) const {
  const std::size_t cost = cost_of_[node];
  const std::span<const std::int64_t> slope = m.slope[cost];
  const auto k = static_cast<std::size_t>(durations_[node] - m.costs[cost].min_units());
  return {node, k < slope.size() ? slope[k] : 0, k > 0 ? slope[k - 1] : FlowNetwork::kUnbounded};
}

std::int64_t FrontierSolver::model_cost_units() const {
  std::int64_t total = 0;
  for (std::size_t v = 0; v < dag_.num_nodes(); ++v) {
    const OperationCost& c = model().costs[cost_of_[v]];
    const auto& slope = model().slope[cost_of_[v]];
    // Cost relative to the slowest duration: the sum of the savings given up.
    for (long d = durations_[v]; d < c.max_units(); ++d) total += slope[static_cast<std::size_t>(d - c.min_units())];
  }
  return total;
}

bool FrontierSolver::step() {
  const std::size_t n = dag_.num_nodes();
  const Model& m = model();
  std::vector<long> finish = dag_.earliest_finish<long>(durations_);
  const long makespan = makespan_;
  KAREUS_CHECK(dag_.latest_finish<long>(finish) == makespan,
               fmt::format("a Phillips–Dessouky step left the makespan at {} units instead of {}",
                           dag_.latest_finish<long>(finish), makespan));

  // Switch on the critical sub-DAG: instructions without float, and the tight edges between them.
  // Walking back from the end, a node's longest path after it (hence whether it is critical) is
  // known once its successors' are, so one pass finds both. (Arcs are written by index into room
  // for every arc, sized once: push_back costs a twentieth of a step.)
  const std::size_t room = 3 * n + dag_.num_edges();
  active_.resize(room);
  last_active_.resize(room);
  after_.resize(n);
  std::size_t count = 0;
  const std::span<const std::size_t> order = dag_.topological_order();
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const std::size_t v = *it;
    long after = 0;
    for (std::size_t e = dag_.successor_begin(v); e < dag_.successor_begin(v + 1); ++e) {
      after = std::max(after, durations_[dag_.edge_to(e)] + after_[dag_.edge_to(e)]);
    }
    after_[v] = after;
    if (finish[v] + after != makespan) continue;
    active_[count++] = instruction_arc(m, v);
    if (finish[v] == durations_[v]) active_[count++] = {n + v, 0, FlowNetwork::kUnbounded};
    if (finish[v] == makespan) active_[count++] = {2 * n + v, 0, FlowNetwork::kUnbounded};
    for (std::size_t e = dag_.successor_begin(v); e < dag_.successor_begin(v + 1); ++e) {
      const std::size_t w = dag_.edge_to(e);
      const bool critical = finish[w] + after_[w] == makespan;
      if (critical && finish[v] == finish[w] - durations_[w]) active_[count++] = {3 * n + e, 0, FlowNetwork::kUnbounded};
    }
  }
  const std::span<const ActiveArc> active = std::span(active_).first(count);

  // An unchanged network has the same minimum cut: reuse the last decision without a max flow.
  if (force_cut_ || !std::ranges::equal(active, std::span(last_active_).first(last_count_))) {
    force_cut_ = false;
    MinCut cut = cut_solver_.solve(active);
    ++stats_.cut_computations;
    std::swap(active_, last_active_);  // the next step writes over the older arcs
    last_count_ = count;
    last_decision_ = {};
    if (!cut.bounded) return false;
    for (const ActiveArc& a : std::span(last_active_).first(last_count_)) {
      if (a.arc >= n) continue;  // not an instruction
      const std::size_t v = a.arc;
      bool tail = cut.source_side[2 + 2 * v], head = cut.source_side[3 + 2 * v];
      if (tail && !head) last_decision_.shorten.push_back(v);
      if (!tail && head && a.lower > 0) last_decision_.lengthen.push_back(v);
    }
  }
  if (last_decision_.shorten.empty()) return false;
  for (std::size_t v : last_decision_.shorten) --durations_[v];
  for (std::size_t v : last_decision_.lengthen) ++durations_[v];
  // The cut shortens every critical path by exactly one unit; the next step's forward pass checks.
  makespan_ = makespan - 1;
  ++stats_.steps;
  return true;
}

FrontierSolver::PlannedStep FrontierSolver::planned_step(bool changed_only) const {
  PlannedStep step;
  step.makespan = makespan_;
  step.model = &model();
  if (changed_only) {
    step.shortened = last_decision_.shorten;
    step.lengthened = last_decision_.lengthen;
  } else {
    step.durations = durations_;
  }
  return step;
}

void FrontierSolver::follow(const PlannedStep& step, bool& frugal_changed, bool& tight_changed) {
  Evaluation& e = evaluation_;
  frugal_changed = tight_changed = false;
  auto update = [&](std::size_t v, long units) {
    const OperationCost& c = step.model->costs[cost_of_[v]];
    e.model_cost_j += c.model_cost_j(units) - c.model_cost_j(e.durations[v]);
    e.durations[v] = units;
    if (std::size_t frugal = c.frugal_for(units); frugal != e.frugal[v]) e.frugal[v] = frugal, frugal_changed = true;
    if (std::size_t tight = c.tight_for(units); tight != e.tight[v]) e.tight[v] = tight, tight_changed = true;
  };
  if (!step.durations.empty()) {
    // In full: start over, so that a new model's options count as changed.
    const std::size_t n = dag_.num_nodes();
    e = {.model = step.model, .durations = step.durations, .frugal = std::vector<std::size_t>(n),
         .tight = std::vector<std::size_t>(n), .model_cost_j = 0};
    for (std::size_t v = 0; v < n; ++v) {
      const OperationCost& c = step.model->costs[cost_of_[v]];
      e.model_cost_j += c.model_cost_j(step.durations[v]);
      e.frugal[v] = c.frugal_for(step.durations[v]);
      e.tight[v] = c.tight_for(step.durations[v]);
    }
    frugal_changed = tight_changed = true;
    return;
  }
  KAREUS_CHECK(step.model == e.model, "a change of steps evaluated out of order");
  for (std::size_t v : step.shortened) update(v, e.durations[v] - 1);
  for (std::size_t v : step.lengthened) update(v, e.durations[v] + 1);
}

FrontierSolver::Realized FrontierSolver::realize(const Model& model, std::vector<std::size_t> chosen) const {
  Realized realized;
  realized.chosen = std::move(chosen);
  realized.model = &model;
  realized.time.resize(dag_.num_nodes());
  for (std::size_t v = 0; v < dag_.num_nodes(); ++v) {
    realized.time[v] = model.candidates_of[v][realized.chosen[v]].time_s;
  }
  realized.finish = dag_.earliest_finish<double>(realized.time);
  realized.time_s = dag_.latest_finish<double>(realized.finish);
  realized.point = reclaimed(realized, 0.0);
  return realized;
}

FrontierPoint FrontierSolver::reclaimed(const Realized& realized, double allowed_time_s) const {
  const std::span<const std::span<const Candidate>> candidates_of = realized.model->candidates_of;
  std::vector<std::size_t> chosen = realized.chosen;
  FrontierPoint point;
  point.time_s = realized.time_s;
  if (options_.reclaim_slack) {
    std::vector<double> time = realized.time;
    reclaim_slack(dag_, candidates_of, chosen, time, realized.finish, std::max(allowed_time_s, realized.time_s));
    if (allowed_time_s > realized.time_s) point.time_s = dag_.makespan<double>(time);
  }
  point.assignment.resize(dag_.num_nodes());
  double sum_effective = 0;
  for (std::size_t v = 0; v < dag_.num_nodes(); ++v) {
    const Candidate& cand = candidates_of[v][chosen[v]];
    point.assignment[v] = static_cast<std::uint16_t>(cand.option);
    sum_effective += cand.effective_energy_j;
  }
  point.energy_j = sum_effective + options_.p_blocking_w * table_.num_stages() * point.time_s;
  return point;
}

std::optional<FrontierSolver::PlannedStep> FrontierSolver::advance() {
  if (finished_) return std::nullopt;
  if (!started_) {
    started_ = true;
    return planned_step(false);
  }
  if (step()) return planned_step(true);
  if (options_.refine_fast_end && !refined_) {
    refine();
    if (step()) return planned_step(false);  // the first step of the finer model
  }
  finished_ = true;
  PlannedStep closing = planned_step(false);
  closing.fastest = true;
  return closing;
}

std::vector<FrontierPoint> FrontierSolver::next() {
  std::optional<PlannedStep> step = advance();
  return step ? evaluate(*step) : std::vector<FrontierPoint>{};
}

std::vector<FrontierPoint> FrontierSolver::evaluate(const PlannedStep& step) {
  const double planned_time_s = static_cast<double>(step.makespan) * step.model->unit_time_s;
  bool frugal_changed = false, tight_changed = false;
  follow(step, frugal_changed, tight_changed);
  const double model_energy =
      evaluation_.model_cost_j + options_.p_blocking_w * table_.num_stages() * planned_time_s;
  auto stamp = [&](FrontierPoint& point) {
    point.planned_time_s = planned_time_s;
    point.model_energy_j = model_energy;
  };
  if (step.fastest) {
    // The fastest plan there is: every instruction at its fastest option, slack reclaimed. Units
    // hide differences below one unit, so the last step's plans may be a little slower.
    FrontierPoint fastest = realize(*step.model, std::vector<std::size_t>(dag_.num_nodes(), 0)).point;
    stamp(fastest);
    return {std::move(fastest)};
  }
  // Consecutive steps often assign the same options; their plans are the same and are not
  // evaluated again, only restamped with the step's planned time and model energy.
  std::vector<FrontierPoint> plans;
  if (frugal_changed) last_realized_[0] = realize(*step.model, evaluation_.frugal);
  if (tight_changed) {
    // The tight options are often the frugal ones (each clock in a unit of its own).
    if (evaluation_.tight == evaluation_.frugal) last_realized_[1] = last_realized_[0];
    else last_realized_[1] = realize(*step.model, evaluation_.tight);
  }
  for (Realized& last : last_realized_) {
    stamp(last.point);
    if (plans.empty() || last.point.assignment != plans.front().assignment) plans.push_back(last.point);
  }
  // Filling the planned makespan differs from the frugal plan only when that one is faster.
  if (options_.reclaim_slack && plans.front().time_s < planned_time_s) {
    FrontierPoint plan = reclaimed(last_realized_[0], planned_time_s);
    stamp(plan);
    if (plan.assignment != plans.front().assignment) plans.push_back(std::move(plan));
  }
  return plans;
}

std::vector<FrontierSolver::Move> FrontierSolver::neighbours(const FrontierPoint& plan) const {
  const std::size_t n = dag_.num_nodes();
  const Model& first_model = *first_model_;
  const std::span<const std::span<const Candidate>> candidates_of = first_model.candidates_of;
  KAREUS_CHECK(plan.assignment.size() == n, "plan assignment size differs from the DAG");
  std::vector<std::size_t> at(n);  // candidate index per node
  std::vector<double> time(n);
  double sum_effective = 0;
  for (std::size_t v = 0; v < n; ++v) {
    at[v] = first_model.costs[cost_of_[v]].candidate_of(plan.assignment[v]);
    time[v] = candidates_of[v][at[v]].time_s;
    sum_effective += candidates_of[v][at[v]].effective_energy_j;
  }
  std::vector<double> finish = dag_.earliest_finish<double>(time);
  std::vector<double> tail = dag_.longest_after<double>(time);
  const double makespan = dag_.latest_finish<double>(finish);
  const double idle_power_w = options_.p_blocking_w * table_.num_stages();
  auto energy_of = [&](std::size_t v, const Candidate& to, double new_makespan) {
    return sum_effective - candidates_of[v][at[v]].effective_energy_j + to.effective_energy_j +
           idle_power_w * new_makespan;
  };
  // Only moves no other move dominates can enter a front, and an expansion's hundreds of moves have
  // a handful of those (7 on average for GPT-3, M = 96): keep that staircase, time ascending, energy
  // strictly falling. The plan itself is its first step, left out at the end: a move it dominates
  // is dominated by it or by what dominates it.
  const double plan_energy = sum_effective + idle_power_w * makespan;
  std::vector<Move> moves{{n, 0, makespan, plan_energy}};
  auto add_step = [&](const Move& m) {
    auto after = std::upper_bound(moves.begin(), moves.end(), m.time_s,
                                  [](double time_s, const Move& step) { return time_s < step.time_s; });
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
    std::erase_if(moves, [&](const Move& m) { return m.node == n; });
    return std::move(moves);
  };
  // One option slower: only the paths through v grow, so the new makespan is immediate. The same
  // pass lists the nodes on a critical path, for the faster moves below.
  const double critical_length = makespan - 1e-12 * makespan;
  std::vector<std::size_t> on_critical_path;
  on_critical_path.reserve(n);
  for (std::size_t v = 0; v < n; ++v) {
    const std::span<const Candidate> candidates = candidates_of[v];
    if (at[v] + 1 < candidates.size()) {
      move(v, candidates[at[v] + 1], std::max(makespan, finish[v] - time[v] + candidates[at[v] + 1].time_s + tail[v]));
    }
    if (finish[v] + tail[v] >= critical_length) on_critical_path.push_back(v);
  }
  // One option faster: every path through v shortens, so the new makespan is the larger of
  // makespan − saving and the longest path avoiding v (longest_avoiding). That pays only when every
  // critical path runs through v.
  std::vector<std::size_t> critical;
  double largest_saving = 0;
  for (std::size_t v : bottlenecks(finish, time, on_critical_path)) {
    if (at[v] == 0) continue;
    critical.push_back(v);
    largest_saving = std::max(largest_saving, time[v] - candidates_of[v][at[v] - 1].time_s);
  }
  if (critical.empty()) return pareto_moves();
  std::vector<double> avoiding =
      longest_avoiding(dag_, finish, time, tail, critical, makespan - largest_saving);
  for (std::size_t k = 0; k < critical.size(); ++k) {
    const std::size_t v = critical[k];
    const Candidate& faster = candidates_of[v][at[v] - 1];
    const double new_makespan = std::max(makespan - (time[v] - faster.time_s), avoiding[k]);
    if (new_makespan < makespan) move(v, faster, new_makespan);
  }
  return pareto_moves();
}

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
  };
  std::map<double, Kept> front;
  Frontier result;
  // Keeps `point` if no plan in the front is as fast and as frugal; drops those it dominates.
  // Times within a relative 1e-8 count as equal: the local search otherwise fills the front with
  // plans nanoseconds apart, which no measurement resolves and no output format tells apart.
  auto same_time_s = [](double time_s) { return 1e-8 * time_s; };
  auto dominated = [&](double time_s, double energy_j) {
    auto after = front.upper_bound(time_s + same_time_s(time_s));
    return after != front.begin() && std::prev(after)->second.point.energy_j <= energy_j;
  };
  auto offer = [&](FrontierPoint point, std::optional<Moves> moves = std::nullopt) {
    ++result.total_points;
    if (dominated(point.time_s, point.energy_j)) return false;
    auto after = front.lower_bound(point.time_s - same_time_s(point.time_s));
    while (after != front.end() && after->second.point.energy_j >= point.energy_j) after = front.erase(after);
    const double time_s = point.time_s;
    front.insert_or_assign(time_s, Kept{std::move(point), std::move(moves), {}});
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
  // the options' convex hull; this recovers discrete combinations between its plans. From the
  // second round on only plans entered by a faster option are expanded: the gains there come from
  // slowing other instructions into the slack the faster one frees, while chains of slower options
  // only fill in between points already on the front.
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
      chunk.moves.push_back(std::move(it->second.moves));
      chunk.next_moves.push_back(std::move(it->second.next_moves));
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
    for (int round = 0; round < options.local_search_rounds && !pending.empty(); ++round) {
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
            if (offer(moved(ready.origins[k], m), std::move(next_moves)) && m.time_s < ready.origins[k].time_s) {
              entered.push_back(m.time_s);
            }
          }
        }
      }
      expansions += static_cast<long>(pending.size());
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
  return result;
}

}  // namespace kareus::pipeline
