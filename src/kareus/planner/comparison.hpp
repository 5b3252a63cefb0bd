// One job's four methods side by side on one evaluator and engine, as `kareus compare` reports
// them: each method's frontier, its iso figures against a reference baseline's frontier (Perseus,
// else the first baseline that ran), the whole job's energy, and, for each straggler slowdown, the
// iteration the other pipelines then run. A method the evaluator cannot cost (a table without a
// baseline's knobs: the Kareus artifact's tree lacks the sequential one) is left out with why.
//
// Thread-safety: calls the evaluator from this thread only (run_method's rules).
// Example:
//   JobComparison c = compare_methods(job, evaluator, options, {});
//   for (const MethodComparison& m : c.methods) fmt::print("{}\n", to_string(m.method));
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "kareus/planner/cluster.hpp"
#include "kareus/planner/planner.hpp"

namespace kareus::planner {

struct MethodComparison {
  Method method = Method::kKareus;
  std::vector<TimeEnergy> points;  // the frontier, time ascending; points.front() is the fastest plan
  std::size_t measurements = 0;
  // Against the reference's frontier (core/pareto.hpp's iso rules): empty for the reference itself,
  // or when there is none; `_10` on both frontiers sampled evenly to 10 points, as the artifact did.
  std::optional<double> iso_time_energy_reduction_pct, iso_energy_time_reduction_pct;
  std::optional<double> iso_time_energy_reduction_pct_10, iso_energy_time_reduction_pct_10;
  double cluster_energy_j = 0;                 // the fastest plan on every GPU of the job
  std::vector<StragglerIteration> stragglers;  // one per requested slowdown, in order
  std::vector<double> clocks_mhz;              // a baseline's (a table's may be few); empty for Kareus
  std::optional<double> sequential_share;      // Kareus: of its fastest plan's partition knobs
};

struct JobComparison {
  std::string config;        // the job's name
  std::string energy_scope;  // plan::energy_scope_for: what `points` count
  ClusterShape shape;
  std::string cluster_energy_scope;  // what cluster_energy_j counts, e.g. "all 16 GPUs of the job (TP 8 x ...)"
  std::optional<Method> reference;  // whose frontier the iso figures are against
  std::vector<LeftOut> left_out;
  std::vector<MethodComparison> methods;  // in kAllMethods order, those that ran
};

// Throws InputError naming --straggler unless every slowdown is at least 1.
void check_slowdowns(std::span<const double> straggler_slowdowns);

// Every method of kAllMethods the evaluator can cost, with stragglers of the given slowdowns
// (check_slowdowns first, before any measurement).
JobComparison compare_methods(const Job& job, const evaluate::Evaluator& evaluator, const PlannerOptions& options,
                              std::span<const double> straggler_slowdowns);

// The reference baseline of a comparison: Perseus, else Nanobatching+Perseus, else Megatron-LM,
// among those that ran; nullopt when none did.
std::optional<Method> reference_method(std::span<const Method> ran);

}  // namespace kareus::planner
