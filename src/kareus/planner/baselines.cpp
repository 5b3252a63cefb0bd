#include "kareus/planner/baselines.hpp"

#include <algorithm>
#include <chrono>
#include <iterator>
#include <optional>

namespace kareus::planner {

const BaselineFrontier* find_baseline(const BaselineComparison& comparison, Method method) {
  for (const BaselineFrontier& b : comparison.baselines) {
    if (b.method == method) return &b;
  }
  return nullptr;
}

BaselineComparison compare_with_baselines(const Job& job, const evaluate::Evaluator& evaluator,
                                          const PlannerOptions& options, const MethodResult& kareus,
                                          const TimeEnergy& chosen) {
  const auto start = std::chrono::steady_clock::now();
  BaselineComparison out;
  PlannerOptions quiet = options;
  quiet.journal_dir.reset();  // the baselines' fixed knobs are not Kareus's search
  // Those Kareus's merge solved are taken from it; the others solved here, their frontiers' points
  // alone (Kareus's plans are held meanwhile).
  std::vector<std::optional<BaselineFrontier>> fronts;
  std::vector<Method> to_solve;
  std::vector<std::size_t> solved_at;
  for (Method m : {Method::kMegatron, Method::kPerseus, Method::kNanobatching}) {
    const auto merged = std::ranges::find(kareus.merged_baselines, m, &BaselineFrontier::method);
    if (merged != kareus.merged_baselines.end()) {
      fronts.emplace_back(*merged);
    } else {
      to_solve.push_back(m);
      solved_at.push_back(fronts.size());
      fronts.emplace_back();
    }
  }
  for (const LeftOut& l : for_each_method(to_solve, job, evaluator, quiet, [&](std::size_t i, MethodResult&& r) {
         fronts[solved_at[i]] = BaselineFrontier{r.method, r.points()};
       })) {
    out.left_out.push_back(std::string(to_string(l.method)) + ": " + l.reason);
  }
  for (std::optional<BaselineFrontier>& f : fronts) {
    if (f) out.baselines.push_back(std::move(*f));
  }
  if (const BaselineFrontier* megatron = find_baseline(out, Method::kMegatron)) {
    const TimeEnergy& m = megatron->points.front();
    out.vs_megatron = Saving{100 * (1 - chosen.energy_j / m.energy_j), 100 * (1 - chosen.time_s / m.time_s)};
  }
  if (const BaselineFrontier* perseus = find_baseline(out, Method::kPerseus)) {
    out.perseus_fastest_s = perseus->points.front().time_s;
    if (auto e = min_energy_within_time(perseus->points, chosen.time_s)) {
      out.vs_perseus_same_time_energy_pct = 100 * (1 - chosen.energy_j / *e);
    }
    const std::vector<TimeEnergy> points = kareus.points();
    out.iso_time_energy_reduction_pct = iso_time_energy_reduction_pct(points, perseus->points);
    out.iso_energy_time_reduction_pct = iso_energy_time_reduction_pct(points, perseus->points);
  }
  out.run_time_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

}  // namespace kareus::planner
