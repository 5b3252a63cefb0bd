// The four methods of planner.hpp as strategies of one pipeline (run_method: each partition's
// points measured, composed into the option table, the frontier solved, then merged). A strategy
// says the clocks its method runs at on an evaluator, why it cannot run there, the (knob, cost)
// points it composes each partition from, and what it folds into its frontier after solving:
// - Megatron-LM: the sequential knob (collective after the compute) at the highest clock;
// - Perseus: the sequential knob at every clock;
// - Nanobatching+Perseus: the artifact's default nanobatch knob at every clock;
// - Kareus: each partition's searched knobs with the baselines' among them, then the baselines'
//   plans mapped onto its options.
//
// Thread-safety: strategies are stateless; a MethodRun belongs to one run on one thread.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kareus/core/pareto.hpp"
#include "kareus/planner/planner.hpp"
#include "kareus/schedule/dag.hpp"

namespace kareus::planner {

// What a run measured, by (partition key, knob), and how many measurements it made itself: a
// Kareus run hands its search's to the baselines it merges, so no knob is measured twice (on a GPU
// each costs ~10 s), and two runs on one evaluator count apart.
class MethodRun {
 public:
  MethodRun(const Job& of, const evaluate::Evaluator& on, const PlannerOptions& with)
      : job(of), evaluator(on), options(with) {}

  // The knob's cost, measured once; InputError naming the partition when the evaluator cannot.
  compose::PartitionPoint measure(const workload::Partition& partition, const workload::Knob& knob);
  // Likewise, but a knob a measured table has no sample of is left out (a table never invents a number).
  std::optional<compose::PartitionPoint> measure_if_sampled(const workload::Partition& partition,
                                                            const workload::Knob& knob);
  bool measured(const std::string& key, const workload::Knob& knob) const { return cache_.contains({key, knob}); }
  // A measurement made elsewhere (the search's); `new_now`: made by this run.
  void record(const std::string& key, const compose::PartitionPoint& point, bool new_now);
  std::size_t measurements() const { return measurements_; }

  const Job& job;
  const evaluate::Evaluator& evaluator;
  const PlannerOptions& options;

 private:
  std::map<std::pair<std::string, workload::Knob>, compose::PartitionPoint> cache_;
  std::size_t measurements_ = 0;
};

class MethodStrategy {
 public:
  virtual ~MethodStrategy() = default;
  virtual Method method() const = 0;
  // The clocks it runs at (see method_clocks_mhz); empty when it cannot run.
  virtual std::vector<double> clocks_mhz(const Job& job, const evaluate::Evaluator& evaluator,
                                         const PlannerOptions& options) const = 0;
  virtual std::optional<std::string> unsupported_reason(const Job& job, const evaluate::Evaluator& evaluator,
                                                        const PlannerOptions& options) const = 0;
  // The points `partition`'s options are composed from at `clocks`; may note what it measured in `result`.
  virtual std::vector<compose::PartitionPoint> partition_points(const workload::Partition& partition,
                                                                const std::vector<double>& clocks, MethodRun& run,
                                                                MethodResult& result) const = 0;
  // After solving: what else enters the frontier (Kareus: the baselines' plans). Default: nothing.
  virtual void merge(MethodResult& /*result*/, MethodRun& /*run*/) const {}
};

// Kareus's frontier joined with the baselines' plans, each mapped onto Kareus's options: every
// instruction takes the option of least effective energy among those of its operation no slower than
// its own, so the mapped plan is no slower and no costlier than the baseline's (its options are
// among Kareus's, KareusStrategy makes sure). With them Kareus's frontier weakly dominates the
// baselines' by construction, whatever its own solve missed. A mapped plan that a plan of Kareus's
// own front dominates or equals is dropped as it is made (most are); what finish() keeps is what
// the Pareto filter of all of them together keeps.
// Example:
//   BaselinePlansJoin join(kareus, dag);
//   join.add(perseus);  join.add(nanobatching);  join.finish();
class BaselinePlansJoin {
 public:
  // `kareus` and `dag` (its pipeline's) must outlive the join; its frontier changes at finish().
  BaselinePlansJoin(MethodResult& kareus, const schedule::InstructionDag& dag);
  // Maps `baseline`'s plans (of the same job and schedule); it may go once added.
  void add(const MethodResult& baseline);
  // Kareus's frontier becomes the Pareto set of its own plans and those kept, time ascending.
  void finish();

 private:
  MethodResult& kareus_;
  const schedule::InstructionDag& dag_;
  std::vector<TimeEnergy> own_;  // Kareus's own front, time ascending
  WeaklyDominated dominated_by_own_;
  std::vector<pipeline::FrontierPoint> mapped_;
  bool finished_ = false;
};

const MethodStrategy& strategy_for(Method method);

// The pipeline every method runs: measure, compose, solve, merge. `run` may be shared with an
// enclosing run (Kareus merging its baselines); result.measurements counts this run's own.
MethodResult run_strategy(const MethodStrategy& strategy, MethodRun& run);

// The clocks a job may run at: the grid's, or on an evaluator holding a finite set of knobs (a
// table), every clock it holds for some partition of the job, whatever grid measured them.
std::vector<double> job_clocks_mhz(const Job& job, const evaluate::Evaluator& evaluator, const PlannerOptions& options);

// The space a baseline's knobs come from at `clocks`: the grid's SM levels and sequential SMs,
// whatever a table holds, so a baseline is the same method on every evaluator.
search::KnobSpace baseline_space(const workload::Partition& partition, const evaluate::Evaluator& evaluator,
                                 const search::GridOptions& grid, const std::vector<double>& clocks);
// The knob a baseline runs a partition with at `freq_mhz` (kMegatron and kPerseus: sequential;
// kNanobatching: the default nanobatch knob).
workload::Knob baseline_knob(Method method, const search::KnobSpace& space, double freq_mhz);

}  // namespace kareus::planner
