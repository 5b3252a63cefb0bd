// Kareus beside the baselines it replaces, for one job on one evaluator and engine: Megatron-LM's
// iteration (every instruction at the top clock, collectives after the compute), Perseus's and
// Nanobatching+Perseus's frontiers, and what a chosen Kareus plan saves against them. The figures
// are the ones `kareus compare` prints for the same job (the same methods, the same iso rules of
// core/pareto.hpp), so the two commands agree exactly.
//
// Thread-safety: asks the evaluator from several threads only where it is thread-safe (for_each_method).
// Example:
//   BaselineComparison b = compare_with_baselines(job, evaluator, options, kareus, chosen);
//   if (b.vs_megatron) fmt::print("{:.1f}% less energy\n", b.vs_megatron->energy_saving_pct);
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "kareus/core/pareto.hpp"
#include "kareus/planner/planner.hpp"

namespace kareus::planner {

struct Saving {
  double energy_saving_pct = 0;  // 100 (1 − E_kareus / E_baseline)
  double time_saving_pct = 0;    // 100 (1 − T_kareus / T_baseline)
};

struct BaselineComparison {
  std::vector<BaselineFrontier> baselines;  // those the evaluator can cost, in kAllMethods order
  std::vector<std::string> left_out;        // "Perseus: <why it cannot run on this evaluator>"
  // The chosen plan against Megatron-LM's iteration.
  std::optional<Saving> vs_megatron;
  // The chosen plan's energy against Perseus's least energy at the chosen plan's time or less;
  // empty when no Perseus plan is that fast (perseus_fastest_s says how fast it gets).
  std::optional<double> vs_perseus_same_time_energy_pct;
  std::optional<double> perseus_fastest_s;
  // Kareus's frontier against Perseus's, as `kareus compare` reports them.
  std::optional<double> iso_time_energy_reduction_pct, iso_energy_time_reduction_pct;
  double run_time_s = 0;  // what costing the baselines took beyond what Kareus's merge had solved
};

BaselineComparison compare_with_baselines(const Job& job, const evaluate::Evaluator& evaluator,
                                          const PlannerOptions& options, const MethodResult& kareus,
                                          const TimeEnergy& chosen);

const BaselineFrontier* find_baseline(const BaselineComparison& comparison, Method method);

}  // namespace kareus::planner
