// Plans on the true options: a step's planned durations become option assignments (the frugal and
// the tight option per instruction), evaluated by the longest path of their real times, with slack
// reclaimed; and the true time and energy of any assignment.
#include <algorithm>

#include "kareus/core/error.hpp"
#include "kareus/pipeline/frontier_solver.hpp"

namespace kareus::pipeline {

void reclaim_slack(const schedule::InstructionDag& dag, std::span<const std::span<const Candidate>> candidates_of,
                   std::vector<std::size_t>& chosen, std::vector<double>& time, std::span<const double> finish,
                   double makespan) {
  const std::size_t n = dag.num_nodes();
  thread_local std::vector<double> latest_start;  // written before it is read: not zeroed per plan
  latest_start.resize(n);
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

double iteration_energy_j(double sum_energy_j, double sum_time_s, int num_stages,
                          double iteration_time_s, double p_blocking_w) {
  return sum_energy_j + p_blocking_w * (num_stages * iteration_time_s - sum_time_s);
}

TimeEnergy evaluate_assignment(const OptionTable& table, const schedule::InstructionDag& dag,
                               std::span<const std::uint16_t> assignment, double p_blocking_w) {
  KAREUS_CHECK(assignment.size() == dag.num_nodes(), "assignment size differs from the DAG");
  std::vector<double> time(dag.num_nodes());
  double sum_energy = 0, sum_time = 0;
  for (std::size_t v = 0; v < dag.num_nodes(); ++v) {
    const schedule::Instruction& ins = dag.instruction(v);
    const StageOption& o = options_of(table, ins).at(assignment[v]);
    time[v] = o.time_s;
    sum_energy += o.energy_j;
    sum_time += o.time_s;
  }
  double makespan = dag.makespan<double>(time);
  return {makespan, iteration_energy_j(sum_energy, sum_time, table.num_stages(), makespan, p_blocking_w)};
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

FrontierPoint FrontierSolver::relaxation_plan(std::span<const double> durations) const {
  // The first model's: every model holds the same candidates (true times and energies), and the
  // first stays where it is while the steps refine, so the relaxation may run beside them.
  const std::span<const std::span<const Candidate>> candidates_of = first_model_->candidates_of;
  std::vector<std::size_t> chosen(dag_.num_nodes(), 0);
  for (std::size_t v = 0; v < dag_.num_nodes(); ++v) {
    // The potentials' rounding, at the makespan's scale: a hull vertex's own time may read a hair
    // above the duration it is.
    const double within = durations[v] * (1 + 1e-12);
    const std::span<const Candidate> candidates = candidates_of[v];  // fastest first
    for (std::size_t k = 1; k < candidates.size() && candidates[k].time_s <= within; ++k) {
      if (candidates[k].effective_energy_j < candidates[chosen[v]].effective_energy_j) chosen[v] = k;
    }
  }
  FrontierPoint point = realize(*first_model_, std::move(chosen)).point;
  point.planned_time_s = point.time_s;  // no step planned it
  point.model_energy_j = point.energy_j;
  return point;
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

FrontierSolver::Realized FrontierSolver::fitted(const Realized& realized, double time_s) const {
  std::vector<std::size_t> chosen = realized.chosen;
  const std::vector<double> after = dag_.longest_after<double>(realized.time);
  for (std::size_t v = 0; v < dag_.num_nodes(); ++v) {
    const double excess = realized.finish[v] + after[v] - time_s;
    if (excess <= 0) continue;
    // The slowest candidate that alone takes the excess off every path through v.
    const std::span<const Candidate> candidates = realized.model->candidates_of[v];
    std::size_t k = chosen[v];
    while (k > 0 && candidates[k].time_s > realized.time[v] - excess) --k;
    chosen[v] = k;
  }
  return realize(*realized.model, std::move(chosen));
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
    const Realized all_fastest = realize(*step.model, std::vector<std::size_t>(dag_.num_nodes(), 0));
    // Its reclamation, latest first, can keep most of a long pipeline fast where many paths are
    // nearly critical; the last step's plans, a little slower, fitted to its time keep the slow
    // options the steps chose off the paths that were too long (16% less energy on a 16-stage
    // pipeline, whose plans a millisecond slower had saved that much).
    std::vector<FrontierPoint> plans{all_fastest.point};
    for (const Realized& last : last_realized_) {
      if (last.model == nullptr || last.time_s <= all_fastest.time_s) continue;
      FrontierPoint plan = fitted(last, all_fastest.time_s).point;
      if (plan.energy_j < plans.front().energy_j) plans.push_back(std::move(plan));
    }
    for (FrontierPoint& plan : plans) stamp(plan);
    return plans;
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

}  // namespace kareus::pipeline
