// Phillips–Dessouky on the schedule's DAG: the cost models per time unit, and the steps that
// shorten the makespan one unit at a time by a minimum cut of the critical sub-DAG (see the class
// comment in frontier_solver.hpp). Turning steps into plans is plan_realization.cpp's job.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "kareus/core/error.hpp"
#include "kareus/pipeline/frontier_solver.hpp"
#include "kareus/pipeline/min_cut.hpp"

namespace kareus::pipeline {
namespace {

// An operation: what a set of instructions shares options and a cost model for.
struct Operation {
  int stage = 0, chunk = 0;
  schedule::OptionSlot slot = schedule::OptionSlot::kForward;
  bool operator==(const Operation&) const = default;
};

// The (stage, chunk, slot) operations the DAG runs, stage-major, then chunk, then slot: a model has
// one cost per operation, so a schedule without B and W needs no options for them.
std::vector<Operation> operations(const schedule::InstructionDag& dag, int num_stages, int chunks) {
  auto at = [&](int stage, int chunk) { return static_cast<std::size_t>(stage * chunks + chunk); };
  std::vector<std::array<bool, schedule::kNumOptionSlots>> used(static_cast<std::size_t>(num_stages * chunks));
  for (const schedule::Instruction& ins : dag.instructions()) used.at(at(ins.stage, ins.chunk))[static_cast<std::size_t>(schedule::option_slot(ins))] = true;
  std::vector<Operation> out;
  for (int stage = 0; stage < num_stages; ++stage) {
    for (int chunk = 0; chunk < chunks; ++chunk) {
      for (schedule::OptionSlot slot : schedule::kAllOptionSlots) {
        if (used[at(stage, chunk)][static_cast<std::size_t>(slot)]) out.push_back({stage, chunk, slot});
      }
    }
  }
  return out;
}

std::string operation_name(const Operation& op, int chunks) {
  return chunks > 1 ? fmt::format("stage {} chunk {} {}", op.stage, op.chunk, to_string(op.slot))
                    : fmt::format("stage {} {}", op.stage, to_string(op.slot));
}

}  // namespace

MinCutSolver activity_flow_topology(const schedule::InstructionDag& dag) {
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

FrontierSolver::FrontierSolver(const OptionTable& table, const schedule::PipelineSchedule& schedule,
                               SolverOptions options)
    : table_(table), options_(options), dag_(schedule), cut_solver_(activity_flow_topology(dag_)) {
  if (options.unit_time_s && (!(*options.unit_time_s > 0) || !std::isfinite(*options.unit_time_s))) {
    throw InputError(fmt::format("the time unit must be positive, got {}", *options.unit_time_s));
  }
  if (!(options.p_blocking_w >= 0) || !std::isfinite(options.p_blocking_w)) {
    throw InputError(fmt::format("P_blocking must be a non-negative power, got {}", options.p_blocking_w));
  }
  if (table.num_stages() != schedule.num_stages()) {
    throw InputError(fmt::format("the option table has {} stages but the schedule {}",
                                 table.num_stages(), schedule.num_stages()));
  }
  if (table.chunks != schedule.num_chunks()) {
    throw InputError(fmt::format("the option table has {} chunks per stage but the schedule {}", table.chunks,
                                 schedule.num_chunks()));
  }
  const auto ops = operations(dag_, table.num_stages(), table.chunks);
  for (const Operation& op : ops) {
    const auto& op_options = table.at(op.stage, op.chunk, op.slot);
    if (op_options.size() > 65535) {
      throw InputError(fmt::format("{} has more than 65535 options", operation_name(op, table.chunks)));
    }
    if (op_options.empty()) {
      throw InputError(fmt::format("{} has no options; {} splits each backward into B and W, which need "
                                   "options of their own",
                                   operation_name(op, table.chunks), to_string(schedule.kind())));
    }
  }
  for (const schedule::Instruction& ins : dag_.instructions()) {
    const Operation op{ins.stage, ins.chunk, schedule::option_slot(ins)};
    cost_of_.push_back(static_cast<std::size_t>(std::find(ops.begin(), ops.end(), op) - ops.begin()));
  }
  if (options.unit_time_s) {
    stats_.unit = {.unit_time_s = *options.unit_time_s, .reason = UnitChoice::Reason::kGiven};
  } else {
    // The walk runs from every instruction at its slowest modelled option to every one at its fastest.
    const std::vector<OperationCost> costs = operation_costs(kUnitSeries[0]);
    std::vector<double> slowest, fastest;
    for (std::size_t v = 0; v < dag_.num_nodes(); ++v) {
      slowest.push_back(costs[cost_of_[v]].modelled().back().time_s);
      fastest.push_back(costs[cost_of_[v]].modelled().front().time_s);
    }
    stats_.unit = choose_unit(costs, dag_.makespan<double>(slowest) - dag_.makespan<double>(fastest), dag_.num_nodes());
  }
  build_model(stats_.unit.unit_time_s);
  first_model_ = &models_.front();
  for (std::size_t v = 0; v < dag_.num_nodes(); ++v) node_cost_.push_back(&first_model_->costs[cost_of_[v]]);
  const double idle_power_w = options_.p_blocking_w * table_.num_stages();
  for (const OperationCost& cost : first_model_->costs) {
    const std::span<const Candidate> candidates = cost.options();
    std::vector<double> least(candidates.size());
    double so_far = std::numeric_limits<double>::infinity();
    for (std::size_t k = candidates.size(); k-- > 0;) {
      so_far = std::min(so_far, candidates[k].effective_energy_j + idle_power_w * candidates[k].time_s);
      least[k] = so_far;
    }
    least_energy_from_.push_back(std::move(least));
  }
  for (std::size_t v = 0; v < dag_.num_nodes(); ++v) {
    least_energy_from_of_.emplace_back(least_energy_from_[cost_of_[v]]);
  }
  for (std::size_t v = 0; v < dag_.num_nodes(); ++v) {
    durations_.push_back(model().costs[cost_of_[v]].max_units());
  }
  makespan_ = dag_.makespan<long>(durations_);
  std::vector<double> fastest;
  for (std::size_t v = 0; v < dag_.num_nodes(); ++v) fastest.push_back(model().candidates_of[v][0].time_s);
  stats_.initial_time_s = planned_time_s();
  stats_.fastest_time_s = dag_.makespan<double>(fastest);
}

std::vector<OperationCost> FrontierSolver::operation_costs(double unit_time_s) const {
  std::vector<OperationCost> costs;
  for (const Operation& op : operations(dag_, table_.num_stages(), table_.chunks)) {
    costs.emplace_back(table_.at(op.stage, op.chunk, op.slot), options_.p_blocking_w, unit_time_s,
                       options_.cost_model, operation_name(op, table_.chunks));
  }
  return costs;
}

void FrontierSolver::build_model(double unit_time_s) {
  Model& m = models_.emplace_back();
  m.unit_time_s = unit_time_s;
  m.costs = operation_costs(unit_time_s);
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
      const double scaled = m.cost_scale * c.lengthening_saving_j(d);
      KAREUS_CHECK(scaled >= 0 && scaled < 1e15, "a scaled lengthening saving is outside 0..1e15 cost units");
      slope.push_back(std::llround(scaled));
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

}  // namespace kareus::pipeline
