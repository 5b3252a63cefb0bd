#include "kareus/planner/plan_job.hpp"

#include "kareus/evaluate/remembered.hpp"
#include "kareus/planner/make_plan.hpp"

#include <algorithm>
#include <chrono>

namespace kareus::planner {

JobPlan plan_job(const Job& job, const evaluate::Evaluator& evaluator, const PlannerOptions& options,
                 const PlanRequest& request) {
  const auto start = std::chrono::steady_clock::now();
  JobPlan out;
  // The baselines' knobs are among those Kareus's search measures: measured once (evaluate/remembered.hpp).
  const evaluate::Evaluator once = evaluate::remember_measurements(evaluator);
  PlannerOptions certified = options;
  certified.kareus_bound = true;  // the certificate below
  out.kareus = run_method(Method::kKareus, job, once, certified);
  const std::vector<TimeEnergy> points = out.kareus.points();
  out.bound_gap = out.kareus.bound.value().worst_gap(points);
  out.target = request.target;
  out.chosen = plan::select_plan(points, request.target);
  out.chosen_plan = make_plan(out.kareus, job, out.kareus.frontier[out.chosen]);
  out.host_bound = host_bound_partitions(job, out.chosen_plan, once, options.engine);
  if (request.baselines) {
    out.baselines = compare_with_baselines(job, once, options, out.kareus,
                                           {out.chosen_plan.time_s, out.chosen_plan.energy_j});
  }
  // The whole frontier can hold thousands of plans a few microseconds apart.
  out.set_indices = plan::evenly_spaced_plans(out.kareus.frontier.size(), request.set_plans);
  if (!std::binary_search(out.set_indices.begin(), out.set_indices.end(), out.chosen)) {
    out.set_indices.insert(std::upper_bound(out.set_indices.begin(), out.set_indices.end(), out.chosen), out.chosen);
  }
  for (std::size_t i : out.set_indices) out.set_plans.push_back(make_plan(out.kareus, job, out.kareus.frontier[i]));
  out.run_time_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

}  // namespace kareus::planner
