// Holding an evaluator against plans someone else measured: each plan gives a clock per
// instruction for a job and a method (Perseus = sequential collectives, Nanobatching+Perseus = the
// default nanobatch schedule); the evaluator costs every instruction at its clock under that
// method's knob, the 1F1B DAG gives the iteration time, and the model's time and energy sit beside
// the measured ones. This is how the simulated GPU is checked against a real frontier.
//
// Inputs: the Kareus artifact's frontiers as data/kareus-osdi26/ holds them (plans.csv with
// `method,model,tp,cp,mbs,seq,plan,time_s,energy_j`, plan_clocks.csv with the same keys and
// `stage,position,instruction,microbatch,freq_mhz`), or our own plan files (kareus-plan JSON of a
// baseline method, whose source names an evaluation configuration).
//
// Thread-safety: pure functions; the evaluator is called from this thread only.
// Example:
//   auto plans = read_artifact_plans("plans.csv", "plan_clocks.csv");
//   PlanCheck check = check_plans(plans, evaluator, {});
//   fmt::print("{}\n", summary_line(check));
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "kareus/planner/planner.hpp"

namespace kareus::calibrate {

using planner::Job;
using planner::Method;
using planner::PlannerOptions;

struct PlannedClock {
  schedule::InstructionType type = schedule::InstructionType::kForward;
  int microbatch = 0;
  double freq_mhz = 0;
};

// One plan to check: the job it ran, the method, its clocks and what was measured.
struct ReferencePlan {
  std::string source;  // file (and line) it came from
  std::string label;   // e.g. "llama-3.2-3b tp4 cp2 mbs8 seq4096 plan 126"
  Method method = Method::kPerseus;
  Job job;
  std::vector<std::vector<PlannedClock>> stages;  // per stage, in run order
  double time_s = 0;
  double energy_j = 0;  // one GPU per stage
};

// Reads the artifact's two files. InputError at file:line naming the field for an unknown method
// or model, a parallel configuration the model does not take, a plan in one file and not the
// other, a stage's instructions that are not one forward and one backward per microbatch, or a
// non-positive number.
std::vector<ReferencePlan> read_artifact_plans(const std::filesystem::path& plans_csv,
                                               const std::filesystem::path& clocks_csv);

// Reads kareus-plan files (a plan or a plan set) of Megatron-LM, Perseus or Nanobatching+Perseus
// whose source's "job" is an evaluation configuration. InputError naming the file otherwise.
std::vector<ReferencePlan> read_kareus_plans(const std::filesystem::path& path);

struct PlanCheckRow {
  const ReferencePlan* plan = nullptr;
  double model_time_s = 0;
  double model_energy_j = 0;

  double time_err() const;  // model / measured − 1 (signed)
  double energy_err() const;
};

// Per (method, job): the fastest plan of the method's frontier as the planner finds it on the
// evaluator, against the fastest reference plan.
struct FrontierCheck {
  Method method = Method::kPerseus;
  std::string job;
  double reference_fastest_time_s = 0, reference_fastest_energy_j = 0;
  double model_fastest_time_s = 0, model_fastest_energy_j = 0;
};

// Per (job, method): what kind of work the evaluator misses against the plans: measured minus model
// time, and the power of that time per GPU (the energy it lacks over the time it lacks), medians
// over the plans whose times differ by more than 1%. Near the static power it is waiting (exposed
// communication, idle gaps); near the iteration's own power it is work at the clock. And how it
// scales: measured over model time of the frontier's fastest and of its slowest plan. Equal ratios
// say the missing time grows with the GPU's own time (kernels slower than modelled, or work the
// model lacks, at every clock); a ratio falling toward 1 at the slow end says a fixed cost (host
// time, latency) that slower kernels hide.
struct MissingWork {
  std::string job;
  Method method = Method::kPerseus;
  double time_s = 0, power_w = 0;
  std::size_t plans = 0;
  double time_ratio_fastest = 0, time_ratio_slowest = 0;
};

struct PlanCheck {
  std::vector<PlanCheckRow> rows;
  std::vector<FrontierCheck> frontiers;
  std::vector<MissingWork> missing;  // by job, then method
  // |errors| as fractions over all rows.
  double time_err_median = 0, time_err_max = 0;
  double energy_err_median = 0, energy_err_max = 0;
};

// Evaluates every plan on `evaluator`; with `frontiers`, also solves each (method, job)'s frontier
// (Perseus and Nanobatching+Perseus only). The plans' clocks must lie on options.search.grid.
PlanCheck check_plans(const std::vector<ReferencePlan>& plans, const evaluate::Evaluator& evaluator,
                      const PlannerOptions& options, bool frontiers);

// `time_err_median=<pct> time_err_max=<pct> energy_err_median=<pct> energy_err_max=<pct>`.
std::string summary_line(const PlanCheck& check);

// Per job with both methods' frontiers, Nanobatching+Perseus's max-throughput time gain over
// Perseus in percent, (T_perseus − T_nb) / T_perseus, of the reference plans and on the model.
struct OverlapGain {
  double reference_pct = 0, model_pct = 0;
};
std::map<std::string, OverlapGain> overlap_gains(const PlanCheck& check);

// The GPU time scale (hardware::GpuSpec::time_scale) under which the model holds the measured
// times of the plans whose method overlaps nothing (Megatron-LM and Perseus: every collective after
// its compute): `checked_time_scale`, the scale `check` was evaluated at, times the median over
// those plans of measured over model time. A uniform scale stretches every instruction alike, so
// the model's iterations scale by it exactly and the median ratio becomes 1. Nanobatching+Perseus
// plans are left out: what overlap costs stays a check of the model, not an input to it.
struct TimeScaleFit {
  double time_scale = 1;
  std::size_t plans = 0;  // how many plans the median is over
};
// InputError when `check` holds no plan of those methods.
TimeScaleFit fit_time_scale(const PlanCheck& check, double checked_time_scale);

}  // namespace kareus::calibrate
