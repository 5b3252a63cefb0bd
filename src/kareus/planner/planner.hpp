// The end-to-end planner: from a described training job to a time–energy frontier of iteration
// plans, for Kareus and for the methods it is compared with, all on the same evaluator:
// - Megatron-LM: the highest clock, collectives not overlapped (one plan);
// - Perseus: a clock per instruction over the non-overlapped (sequential) schedule;
// - Nanobatching+Perseus: two nanobatches, each collective launched at its partition's first slot
//   with a fixed SM count, then Perseus's clock frontier on top;
// - Kareus: each partition's (clock, SMs, slot) searched, composed per instruction, then the
//   frontier. The baselines' knobs join Kareus's options (the comparison measures them anyway,
//   reusing whatever the search measured), and the baselines' plans are plans of Kareus's space,
//   so Kareus's frontier includes them: it weakly dominates both by construction.
//
// Thread-safety: run_method is reentrant; it uses the evaluator from several threads only when the
// evaluator allows it.
// Example:
//   MethodResult kareus = run_method(Method::kKareus, job, evaluator, {});
//   plan::Plan plan = make_plan(kareus, job, kareus.frontier.front());   // make_plan.hpp
#pragma once

#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kareus/compose/compose.hpp"
#include "kareus/engine/engine.hpp"
#include "kareus/core/pareto.hpp"
#include "kareus/evaluate/evaluator.hpp"
#include "kareus/pipeline/frontier_solver.hpp"
#include "kareus/pipeline/relaxation_bound.hpp"
#include "kareus/plan/plan.hpp"
#include "kareus/search/partition_search.hpp"

namespace kareus::planner {

enum class Method { kMegatron, kPerseus, kNanobatching, kKareus };
inline constexpr Method kAllMethods[] = {Method::kMegatron, Method::kPerseus, Method::kNanobatching,
                                        Method::kKareus};
std::string_view to_string(Method method);  // "Megatron-LM", "Perseus", "Nanobatching+Perseus", "Kareus"

struct Job {
  workload::ModelSpec model;
  workload::ParallelConfig parallel;  // validated
  std::string name;                   // for reports, e.g. "llama-3.2-3b tp8 cp1 mbs8 seq4096"
};

struct PlannerOptions {
  std::optional<double> p_static_w;  // default: the evaluator GPU's static power
  double overhead_factor = 1.0;      // see compose.hpp
  // How the host issues each instruction (engine/engine.hpp); default: idle, the GPU alone. The
  // commands default to engine::kDefaultEngine.
  engine::EngineSpec engine{};
  std::optional<double> unit_time_s = std::nullopt;  // unset: the frontier solver chooses it (pipeline/unit_choice.hpp)
  // Every method's frontier with the relaxation's plans (pipeline::SolverOptions::relaxation_plans),
  // so that the methods are compared on one solver; MethodResult::bound keeps the bound.
  bool relaxation_plans = true;
  // Kareus's MethodResult::bound even without the relaxation's plans (plan's certificate), computed
  // beside its solve and merge; the baselines' solves make none.
  bool kareus_bound = false;
  // The pipeline schedule; interleaved runs each stage's layers as `virtual_stages` chunks, each
  // with options of its own (compose.hpp: a V-th of the layers; the embedding in the first chunk,
  // the LM head in the last), so a stage's layers must divide by V.
  schedule::ScheduleKind schedule = schedule::ScheduleKind::k1F1B;
  int virtual_stages = 1;
  search::PartitionSearchOptions search;      // Kareus's per-partition search
  std::optional<std::filesystem::path> journal_dir;  // <dir>/<key>.journal.jsonl; none = in memory
  std::function<void(const std::string&)> progress;  // one line per finished partition, if set
};

// A baseline's frontier, its points alone.
struct BaselineFrontier {
  Method method = Method::kPerseus;
  std::vector<TimeEnergy> points;  // time ascending; one point for Megatron-LM
};

struct MethodResult {
  Method method = Method::kKareus;
  schedule::ScheduleKind schedule = schedule::ScheduleKind::k1F1B;
  int virtual_stages = 1;
  double p_static_w = 0;
  double unit_time_s = 0;
  std::string engine;  // the engine the instructions were composed under (engine::EngineSpec::name; empty: idle)
  nlohmann::json gpu;  // the evaluator's GPU as a plan records it (plan::gpu_limits_json)
  pipeline::OptionTable table;
  std::vector<pipeline::FrontierPoint> frontier;  // Pareto, time ascending; plans index `table`
  bool local_search_converged = false;  // the frontier solver's (pipeline/local_search.hpp)
  std::optional<pipeline::RelaxationBound> bound;  // on `table`, with PlannerOptions::relaxation_plans or kareus_bound
  std::size_t measurements = 0;                   // evaluator calls this method made
  std::size_t grid_knobs = 0;                     // knobs its space holds (Kareus)
  std::size_t unusable_knobs = 0;                 // a table's records its space cannot hold (Kareus)
  // Kareus: the frontiers of the baselines whose plans its merge took in, solved on the same
  // measurements as the baselines run alone, so a caller costing them beside it need not solve them
  // again (compare_with_baselines).
  std::vector<BaselineFrontier> merged_baselines;

  std::vector<TimeEnergy> points() const;
  // The pipeline schedule `frontier` was solved on.
  schedule::PipelineSchedule pipeline_schedule(const Job& job) const;
};

// All partitions the job runs: layer partitions, then the non-partition work of every stage; with
// a schedule that splits the backward (zb-h1), then W's weight-gradient partition (bwd_wgrad).
std::vector<workload::Partition> job_partitions(const Job& job);
std::vector<workload::Partition> job_partitions(const Job& job, schedule::ScheduleKind schedule);

// A baseline runs at the grid's clocks; on an evaluator that holds a finite set of knobs (a table,
// such as the Kareus artifact's profiling tree) at those of them where it holds the baseline's knob
// of every partition. Kareus runs on any evaluator, from what it can cost, and takes in the plans
// of every baseline that can run.
// With zb-h1 every method plans B and W as instructions of their own (compose.hpp says how their
// options are built), each with its own clock.
// Throws InputError naming --schedule or --virtual-stages when the job's stages and microbatches do
// not fit the schedule or its layers do not split into the virtual stages; run_method checks it
// before any measurement, and a command running many jobs can check them all before the first.
void check_schedule(const Job& job, const PlannerOptions& options);

// Throws InputError with unsupported_reason() when `method` cannot run on the evaluator, or what
// check_schedule throws.
MethodResult run_method(Method method, const Job& job, const evaluate::Evaluator& evaluator,
                        const PlannerOptions& options);

// A method the evaluator cannot cost, and why (unsupported_reason).
struct LeftOut {
  Method method = Method::kKareus;
  std::string reason;
};

struct MethodRuns {
  std::vector<MethodResult> results;  // in the order asked, those that ran
  std::vector<LeftOut> left_out;
};

// run_method for each of `methods` the evaluator can cost, side by side when it is thread-safe; the
// others are left out with why.
MethodRuns run_methods(std::span<const Method> methods, const Job& job, const evaluate::Evaluator& evaluator,
                       const PlannerOptions& options);
// The same, each result handed to `take` as soon as it is made (on the thread that made it, with its
// place among the methods that run) instead of held until all have run: a caller that keeps less of
// a result, such as its frontier's points, then never holds every method's plans at once (on a long
// pipeline a front's plans take hundreds of MB). Returns the methods left out.
std::vector<LeftOut> for_each_method(std::span<const Method> methods, const Job& job,
                                     const evaluate::Evaluator& evaluator, const PlannerOptions& options,
                                     const std::function<void(std::size_t index, MethodResult&& result)>& take);

// The option table of a baseline (Megatron-LM, Perseus or Nanobatching+Perseus): every partition
// at the method's knob at each clock of options.search.grid, or of a table's own clocks
// (Megatron-LM: the highest only), one
// option per (stage, instruction, clock). What an artifact's plan of that method is evaluated on.
pipeline::OptionTable baseline_option_table(Method method, const Job& job, const evaluate::Evaluator& evaluator,
                                            const PlannerOptions& options);
// Why `method` cannot run on `evaluator` for `job`, e.g. "the table holds no sequential knob
// (collective after the compute) of fwd_attn, fwd_mlp at any clock it holds; the Kareus
// artifact never measures it"; nullopt when it can. Only a table can lack a knob. Kareus runs on
// any table, except with zb-h1 on one without W's weight-gradient GEMMs (bwd_wgrad) at any clock.
std::optional<std::string> unsupported_reason(Method method, const Job& job, const evaluate::Evaluator& evaluator,
                                              const PlannerOptions& options);
// The clocks a baseline runs at (see run_method); empty when it cannot run. All the grid's for
// Kareus; on a table (an evaluator with a finite set of knobs) the clocks it holds, on any grid.
std::vector<double> method_clocks_mhz(Method method, const Job& job, const evaluate::Evaluator& evaluator,
                                      const PlannerOptions& options);

// The ten configurations of the Kareus evaluation (A100, PP 2), by name, e.g.
// "llama3.2-3b-tp8-mbs8-seq4096" or "qwen3-1.7b-cp2tp4-mbs8-seq8192", read from
// data/configs/kareus-osdi26.json (evaluation_configs.cpp).
std::vector<Job> evaluation_configs();  // all of them, in the file's order
std::vector<std::string> evaluation_config_names();
Job evaluation_config(std::string_view name);  // InputError listing the names when unknown

// The configurations a `kareus-evaluation-configs` document describes, in its order; `source`
// names the document in errors (InputError with the JSON path at fault).
std::vector<Job> parse_evaluation_configs(const nlohmann::json& doc, const std::string& source);

}  // namespace kareus::planner
