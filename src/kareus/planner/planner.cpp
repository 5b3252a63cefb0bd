#include "kareus/planner/planner.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <set>

#include "kareus/core/error.hpp"
#include "kareus/plan/validate.hpp"
#include "kareus/workload/zero_bubble.hpp"

namespace kareus::planner {
namespace {

using pipeline::FrontierPoint;
using pipeline::InstructionType;

// Measurements a run has made, by (partition key, knob): the Kareus run hands its search's to the
// baselines it compares against, so no knob is measured twice (on a GPU each costs ~10 s).
using MeasurementCache = std::map<std::pair<std::string, workload::Knob>, compose::PartitionPoint>;

compose::PartitionPoint measure(const evaluate::Evaluator& evaluator, const workload::Partition& partition,
                                const workload::Knob& knob, MeasurementCache& cache) {
  if (auto it = cache.find({partition.key, knob}); it != cache.end()) return it->second;
  evaluate::EvalResult r = evaluator.evaluate(partition, knob);
  if (!r.ok()) {
    throw InputError({"", 0, 0, partition.key},
                     fmt::format("{} cannot evaluate {} at {} MHz, {} SMs, slot {}: {}", evaluator.name(),
                                 partition.key, knob.freq_mhz, knob.sms, knob.slot, r.message));
  }
  compose::PartitionPoint point{knob, r.time_s, r.energy_j};
  cache.emplace(std::pair{partition.key, knob}, point);
  return point;
}

// A knob a measured table has no sample of, for Kareus's own options: left out (Kareus plans from
// what was measured; a table never invents a number), where a baseline needs it and fails.
std::optional<compose::PartitionPoint> measure_if_sampled(const evaluate::Evaluator& evaluator,
                                                          const workload::Partition& partition,
                                                          const workload::Knob& knob, MeasurementCache& cache) {
  if (auto it = cache.find({partition.key, knob}); it != cache.end()) return it->second;
  if (evaluator.provenance() == evaluate::Provenance::kMeasurement) {
    evaluate::EvalResult r = evaluator.evaluate(partition, knob);
    if (r.status == evaluate::EvalStatus::kNotMeasured) return std::nullopt;
    if (r.ok()) {
      compose::PartitionPoint point{knob, r.time_s, r.energy_j};
      cache.emplace(std::pair{partition.key, knob}, point);
      return point;
    }
  }
  return measure(evaluator, partition, knob, cache);
}

// What a search on a table could not use of its records, for the progress line: "" when nothing.
std::string unusable_note(const workload::Partition& partition, const std::vector<workload::Knob>& unusable) {
  if (unusable.empty()) return "";
  std::set<std::string> slots;
  std::size_t sequential = 0;
  for (const workload::Knob& k : unusable) {
    if (k.sequential()) {
      ++sequential;
    } else {
      slots.insert(k.slot);
    }
  }
  std::vector<std::string> why;
  if (!slots.empty()) why.push_back(fmt::format("slot {} is not a launch slot of {}", fmt::join(slots, ", "), partition.key));
  if (sequential > 0) why.push_back(fmt::format("{} sequential knobs at a second SM count", sequential));
  return fmt::format("; {} of its records left out ({})", unusable.size(), fmt::join(why, "; "));
}

// The knob a baseline runs a partition with at `freq_mhz`, taken from the partition's search grid
// so that Kareus's search measures exactly the knobs the baselines use. Perseus and Megatron-LM:
// the sequential knob (the segment un-split, its collective after the compute). Nanobatching+
// Perseus: the artifact's default nanobatch schedule, which fixes the launch point and the SM count
// rather than searching them (data/kareus-osdi26/README.md): each collective launched before its
// partition's first op (its first launch slot), with search::kDefaultNanobatchingSms SMs, the
// collective library's default channel count on A100 NVLink (one SM per NCCL channel). That is
// what the artifact runs: its Nanobatching+Perseus script turns its scheduler off
// (tests/artifact/run_nanobatch_perseus.sh, model.enable_kareus_scheduler=False), so every
// partition takes the engine's no-schedule setting (kareus/megatron/core/partitions/
// partition_base.py, _get_comm_config: launch at op 0, no SM count), and a collective without an
// SM count is a plain torch.distributed call (NCCL's own channels).
workload::Knob baseline_knob(Method method, const search::KnobSpace& space, double freq_mhz) {
  std::size_t index = method == Method::kNanobatching ? space.nanobatching_knob(freq_mhz) : space.sequential_knob(freq_mhz);
  return space.knob(index);
}

// The clocks a job may run at: the grid's, or on an evaluator holding a finite set of knobs (a
// table), every clock it holds for some partition of the job, whatever grid measured them.
std::vector<double> job_clocks_mhz(const Job& job, const evaluate::Evaluator& evaluator, const PlannerOptions& options) {
  std::set<double> held;
  bool finite = false;
  for (const workload::Partition& p : job_partitions(job, options.schedule)) {
    if (const auto known = evaluator.known_knobs(p)) {
      finite = true;
      for (const workload::Knob& k : *known) held.insert(k.freq_mhz);
    }
  }
  if (!finite) return search::grid_clocks_mhz(evaluator.gpu(), options.search.grid);
  return {held.begin(), held.end()};
}

// The space a baseline's knobs come from at `clocks`: the grid's SM levels and sequential SMs,
// whatever a table holds, so a baseline is the same method on every evaluator.
search::KnobSpace baseline_space(const workload::Partition& partition, const evaluate::Evaluator& evaluator,
                                 const search::GridOptions& grid, const std::vector<double>& clocks) {
  return search::knob_space_for(partition, evaluator.gpu(), grid, clocks);
}

// Whether the evaluator can cost the baseline's knob of `partition` at each of `clocks`: always,
// unless it holds a finite set of knobs (a table) and not that one.
std::vector<bool> baseline_knob_held(Method method, const workload::Partition& partition,
                                     const evaluate::Evaluator& evaluator, const search::GridOptions& grid,
                                     const std::vector<double>& clocks) {
  std::vector<bool> held(clocks.size(), true);
  const auto known = evaluator.known_knobs(partition);
  if (!known) return held;
  const search::KnobSpace space = baseline_space(partition, evaluator, grid, clocks).restricted_to(*known);
  const Method knobs = method == Method::kNanobatching ? method : Method::kPerseus;
  for (std::size_t c = 0; c < clocks.size(); ++c) {
    held[c] = space.available(knobs == Method::kNanobatching ? space.nanobatching_knob(clocks[c]) : space.sequential_knob(clocks[c]));
  }
  return held;
}

// Maps a plan of `from` onto `to`: each instruction takes the option of `to` with the least
// effective energy among those no slower than its own. Empty when some option has no match.
std::optional<std::vector<std::uint16_t>> dominating_assignment(const pipeline::OptionTable& from,
                                                                const pipeline::OptionTable& to,
                                                                const pipeline::InstructionDag& dag,
                                                                std::span<const std::uint16_t> assignment,
                                                                double p_static_w) {
  std::vector<std::uint16_t> mapped(assignment.size());
  for (std::size_t v = 0; v < dag.num_nodes(); ++v) {
    const auto& ins = dag.instruction(v);
    const pipeline::StageOption& o = pipeline::options_of(from, ins).at(assignment[v]);
    const auto& candidates = pipeline::options_of(to, ins);
    std::optional<std::size_t> best;
    double best_effective = 0;
    for (std::size_t k = 0; k < candidates.size(); ++k) {
      const auto& c = candidates[k];
      double effective = c.energy_j - p_static_w * c.time_s;
      if (c.time_s <= o.time_s * (1 + 1e-9) && (!best || effective < best_effective)) best = k, best_effective = effective;
    }
    if (!best || best_effective > (o.energy_j - p_static_w * o.time_s) + 1e-9 * std::abs(o.energy_j)) return std::nullopt;
    mapped[v] = static_cast<std::uint16_t>(*best);
  }
  return mapped;
}

}  // namespace

std::string_view to_string(Method method) {
  switch (method) {
    case Method::kMegatron: return "Megatron-LM";
    case Method::kPerseus: return "Perseus";
    case Method::kNanobatching: return "Nanobatching+Perseus";
    case Method::kKareus: return "Kareus";
  }
  return "?";
}

std::vector<TimeEnergy> MethodResult::points() const {
  std::vector<TimeEnergy> out;
  for (const FrontierPoint& p : frontier) out.push_back(p.time_energy());
  return out;
}

std::vector<workload::Partition> job_partitions(const Job& job) {
  std::vector<workload::Partition> partitions = workload::build_partitions(job.model, job.parallel);
  for (int stage = 0; stage < job.parallel.pp; ++stage) {
    for (auto& p : workload::non_partition_work(job.model, job.parallel, stage)) {
      if (std::none_of(partitions.begin(), partitions.end(), [&](const auto& q) { return q.key == p.key; })) {
        partitions.push_back(std::move(p));
      }
    }
  }
  return partitions;
}

std::vector<workload::Partition> job_partitions(const Job& job, pipeline::ScheduleKind schedule) {
  std::vector<workload::Partition> partitions = job_partitions(job);
  if (pipeline::splits_backward(schedule)) partitions.push_back(workload::weight_gradient_partition(job.model, job.parallel));
  return partitions;
}

std::vector<double> method_clocks_mhz(Method method, const Job& job, const evaluate::Evaluator& evaluator,
                                      const PlannerOptions& options) {
  std::vector<double> clocks = job_clocks_mhz(job, evaluator, options);
  if (method == Method::kKareus) return clocks;
  if (method == Method::kMegatron) clocks = {*std::max_element(clocks.begin(), clocks.end())};
  std::vector<bool> all(clocks.size(), true);
  for (const workload::Partition& p : job_partitions(job, options.schedule)) {
    const std::vector<bool> held = baseline_knob_held(method, p, evaluator, options.search.grid, clocks);
    for (std::size_t c = 0; c < clocks.size(); ++c) all[c] = all[c] && held[c];
  }
  std::vector<double> out;
  for (std::size_t c = 0; c < clocks.size(); ++c) {
    if (all[c]) out.push_back(clocks[c]);
  }
  return out;
}

std::optional<std::string> unsupported_reason(Method method, const Job& job, const evaluate::Evaluator& evaluator,
                                              const PlannerOptions& options) {
  std::vector<double> clocks = job_clocks_mhz(job, evaluator, options);
  if (method == Method::kKareus) {
    // Kareus plans from whatever a table holds, but a zero-bubble W has only its clock to choose.
    if (!pipeline::splits_backward(options.schedule)) return std::nullopt;
    const workload::Partition weights = workload::weight_gradient_partition(job.model, job.parallel);
    const std::vector<bool> held = baseline_knob_held(Method::kPerseus, weights, evaluator, options.search.grid, clocks);
    if (std::find(held.begin(), held.end(), true) != held.end()) return std::nullopt;
    return fmt::format("{} holds no measurement of {} (the weight-gradient GEMMs {}'s W instructions run)",
                       evaluator.name(), weights.key, pipeline::to_string(options.schedule));
  }
  if (!method_clocks_mhz(method, job, evaluator, options).empty()) return std::nullopt;
  if (method == Method::kMegatron) clocks = {*std::max_element(clocks.begin(), clocks.end())};
  // The partitions that lack the knob at every clock, or else those that lack it somewhere.
  std::vector<std::string> never, somewhere;
  bool any_sequential = false;
  for (const workload::Partition& p : job_partitions(job, options.schedule)) {
    const std::vector<bool> held = baseline_knob_held(method, p, evaluator, options.search.grid, clocks);
    const auto count = std::count(held.begin(), held.end(), true);
    if (count == 0) never.push_back(p.key);
    if (count > 0 && count < static_cast<long>(held.size())) somewhere.push_back(p.key);
    if (const auto known = evaluator.known_knobs(p); known && p.collective && !p.slots.empty()) {
      for (const workload::Knob& k : *known) any_sequential = any_sequential || k.sequential();
    }
  }
  std::string knob;
  if (method == Method::kNanobatching) {
    knob = fmt::format("nanobatching knob (collective launched at the first slot with the SM level nearest {})",
                       search::kDefaultNanobatchingSms);
  } else {
    knob = "sequential knob (collective after the compute)";
  }
  const std::string where = method == Method::kMegatron ? fmt::format("at {} MHz, the highest clock", clocks.front())
                                                         : "at any clock it holds";
  std::string reason;
  if (!never.empty()) {
    reason = fmt::format("{} holds no {} of {} {}", evaluator.name(), knob, fmt::join(never, ", "), where);
  } else {
    reason = fmt::format("{} holds the {} of {} at different clocks, none common to all", evaluator.name(), knob,
                         fmt::join(somewhere, ", "));
  }
  if (method != Method::kNanobatching && !any_sequential) reason += "; the Kareus artifact never measures it";
  return reason;
}

namespace {

MethodResult run_with_cache(Method method, const Job& job, const evaluate::Evaluator& evaluator,
                            const PlannerOptions& options, MeasurementCache& cache) {
  MethodResult result;
  result.method = method;
  result.engine = options.engine.name;
  result.gpu = plan::gpu_limits_json(evaluator.gpu());
  result.schedule = options.schedule;
  result.virtual_stages = options.virtual_stages;
  result.p_static_w = options.p_static_w.value_or(evaluator.gpu().static_power_w);
  const std::int64_t calls_before = evaluator.calls(), failures_before = evaluator.failures();
  const std::vector<workload::Partition> partitions = job_partitions(job, options.schedule);
  const std::vector<double> clocks = method_clocks_mhz(method, job, evaluator, options);
  if (clocks.empty()) {
    throw InputError({"", 0, 0, "--evaluator"},
                     fmt::format("{} cannot run: {}", to_string(method), *unsupported_reason(method, job, evaluator, options)));
  }

  compose::PartitionPoints points;
  for (const workload::Partition& partition : partitions) {
    auto& list = points[partition.key];
    if (method != Method::kKareus || !partition.collective) {
      Method knobs = method == Method::kKareus ? Method::kPerseus : method;
      const search::KnobSpace space = baseline_space(partition, evaluator, options.search.grid, clocks);
      for (double clock : clocks) {
        const workload::Knob knob = baseline_knob(knobs, space, clock);
        if (method != Method::kKareus) {
          list.push_back(measure(evaluator, partition, knob, cache));
        } else if (auto point = measure_if_sampled(evaluator, partition, knob, cache)) {
          list.push_back(*point);
        }
      }
      result.grid_knobs += clocks.size();
      continue;
    }
    search::PreparedSearch prepared = search::prepare_search(partition, evaluator, options.search);
    std::optional<std::filesystem::path> journal;
    if (options.journal_dir) journal = search::journal_path(*options.journal_dir, partition.key);
    search::PartitionSearchResult found = search::run_prepared_search(
        prepared, evaluator, workload::cost_identity(job.model, job.parallel, evaluator.gpu().name), journal);
    for (const search::Measurement& m : found.successful) {
      list.push_back({m.knob, m.time_s, m.energy_j});
      cache.emplace(std::pair{partition.key, m.knob}, list.back());
    }
    // The baselines' knobs the search left out: the comparison below measures them anyway, and
    // with them among Kareus's options every baseline plan has a counterpart.
    const search::KnobSpace baselines = baseline_space(partition, evaluator, options.search.grid, clocks);
    for (double clock : clocks) {
      for (Method baseline : {Method::kPerseus, Method::kNanobatching}) {
        workload::Knob knob = baseline_knob(baseline, baselines, clock);
        if (cache.contains({partition.key, knob})) continue;
        if (auto point = measure_if_sampled(evaluator, partition, knob, cache)) list.push_back(*point);
      }
    }
    result.grid_knobs += found.space_size;
    result.unusable_knobs += found.unusable.size();
    if (options.progress) {
      options.progress(fmt::format("{}: {} of {} knobs{} measured{}", partition.key, found.successful.size(),
                                   found.space_size, found.restricted ? " in the table" : "",
                                   unusable_note(partition, found.unusable)));
    }
  }

  result.table = compose::compose_option_table(job.model, job.parallel, points,
                                               {.p_static_w = result.p_static_w,
                                                .overhead_factor = options.overhead_factor,
                                                .split_backward = pipeline::splits_backward(result.schedule),
                                                .virtual_stages = result.virtual_stages,
                                                .engine = options.engine});
  auto schedule = pipeline::PipelineSchedule::make(result.schedule, job.parallel.pp, job.parallel.microbatches,
                                                   result.virtual_stages);
  pipeline::SolverOptions solver{.p_blocking_w = result.p_static_w, .unit_time_s = options.unit_time_s};
  pipeline::Frontier frontier = pipeline::solve_frontier(result.table, schedule, solver);
  result.unit_time_s = frontier.stats.unit.unit_time_s;
  result.frontier = std::move(frontier.points);

  if (method == Method::kKareus) {
    // The baselines' plans are plans of Kareus's space: map each onto Kareus's options (no slower,
    // no costlier per instruction) and keep whatever is not dominated. A baseline a table cannot
    // run (the Kareus artifact's profiles never measure the sequential knob) is left out: Kareus
    // then plans from what was measured.
    pipeline::InstructionDag dag(schedule);
    std::vector<FrontierPoint> all = result.frontier;
    for (Method baseline : {Method::kPerseus, Method::kNanobatching}) {
      if (unsupported_reason(baseline, job, evaluator, options)) continue;
      PlannerOptions quiet = options;
      quiet.progress = nullptr;
      MethodResult other = run_with_cache(baseline, job, evaluator, quiet, cache);
      for (const FrontierPoint& p : other.frontier) {
        auto mapped = dominating_assignment(other.table, result.table, dag, p.assignment, result.p_static_w);
        KAREUS_CHECK(mapped.has_value(), fmt::format("a {} plan has no counterpart among Kareus's options", to_string(baseline)));
        FrontierPoint q;
        q.assignment = std::move(*mapped);
        TimeEnergy te = pipeline::evaluate_assignment(result.table, dag, q.assignment, result.p_static_w);
        q.time_s = te.time_s;
        q.energy_j = te.energy_j;
        q.planned_time_s = te.time_s;
        q.model_energy_j = te.energy_j;
        all.push_back(std::move(q));
      }
    }
    std::vector<TimeEnergy> te;
    for (const auto& p : all) te.push_back(p.time_energy());
    std::vector<FrontierPoint> front;
    for (std::size_t i : pareto_indices(te)) front.push_back(all[i]);
    result.frontier = std::move(front);
  }
  // Knobs with a cost: a failure, or a knob a table has no sample of, is not a measurement.
  result.measurements = static_cast<std::size_t>(evaluator.calls() - calls_before) -
                        static_cast<std::size_t>(evaluator.failures() - failures_before);
  return result;
}

}  // namespace

void check_schedule(const Job& job, const PlannerOptions& options) {
  // The schedule itself, then whole layers per chunk.
  try {
    (void)pipeline::PipelineSchedule::make(options.schedule, job.parallel.pp, job.parallel.microbatches,
                                           options.virtual_stages);
  } catch (const InputError& e) {
    throw InputError({"", 0, 0, "--schedule"}, e.what());
  }
  for (std::size_t s = 0; s < job.parallel.layers_per_stage.size(); ++s) {
    if (job.parallel.layers_per_stage[s] % options.virtual_stages != 0) {
      throw InputError({"", 0, 0, "--virtual-stages"},
                       fmt::format("stage {} holds {} layers, which do not split into {} chunks of whole layers", s,
                                   job.parallel.layers_per_stage[s], options.virtual_stages));
    }
  }
}

MethodResult run_method(Method method, const Job& job, const evaluate::Evaluator& evaluator,
                        const PlannerOptions& options) {
  check_schedule(job, options);  // before any measurement
  if (method == Method::kKareus) {
    if (auto reason = unsupported_reason(method, job, evaluator, options)) {
      throw InputError({"", 0, 0, "--evaluator"}, fmt::format("Kareus cannot run: {}", *reason));
    }
  }
  MeasurementCache cache;
  return run_with_cache(method, job, evaluator, options, cache);
}

MethodRuns run_methods(std::span<const Method> methods, const Job& job, const evaluate::Evaluator& evaluator,
                       const PlannerOptions& options) {
  MethodRuns out;
  for (Method m : methods) {
    if (auto reason = unsupported_reason(m, job, evaluator, options)) {
      out.left_out.push_back({m, std::move(*reason)});
    } else {
      out.results.push_back(run_method(m, job, evaluator, options));
    }
  }
  return out;
}

pipeline::OptionTable baseline_option_table(Method method, const Job& job, const evaluate::Evaluator& evaluator,
                                            const PlannerOptions& options) {
  KAREUS_CHECK(method != Method::kKareus, "Kareus's options come from its search, not a fixed knob");
  MeasurementCache cache;
  std::vector<double> clocks = job_clocks_mhz(job, evaluator, options);
  if (method == Method::kMegatron) clocks = {*std::max_element(clocks.begin(), clocks.end())};
  compose::PartitionPoints points;
  for (const workload::Partition& partition : job_partitions(job)) {
    const search::KnobSpace space = baseline_space(partition, evaluator, options.search.grid, clocks);
    auto& list = points[partition.key];
    for (double clock : clocks) list.push_back(measure(evaluator, partition, baseline_knob(method, space, clock), cache));
  }
  const double p_static_w = options.p_static_w.value_or(evaluator.gpu().static_power_w);
  return compose::compose_option_table(job.model, job.parallel, points,
                                       {.p_static_w = p_static_w, .overhead_factor = options.overhead_factor,
                                        .engine = options.engine});
}

plan::Plan make_plan(const MethodResult& result, const Job& job, const pipeline::FrontierPoint& point) {
  auto schedule = pipeline::PipelineSchedule::make(result.schedule, job.parallel.pp, job.parallel.microbatches,
                                                   result.virtual_stages);
  pipeline::InstructionDag dag(schedule);
  plan::PlanContext context{result.schedule, job.parallel.microbatches, result.p_static_w, result.unit_time_s,
                            {{"method", std::string(to_string(result.method))}, {"job", job.name}}};
  // Which host the instruction times assume: `kareus simulate` replays the plan under it.
  if (!result.engine.empty()) context.source["engine"] = result.engine;
  // What every consumer holds the plan's clocks and knobs to (plan/validate.hpp).
  if (!result.gpu.is_null()) context.source["gpu"] = result.gpu;
  nlohmann::json slots = nlohmann::json::object();
  for (const workload::Partition& p : job_partitions(job, result.schedule)) {
    nlohmann::json names = nlohmann::json::array();
    for (const auto& slot : p.slots) names.push_back(slot.name);
    slots[p.key] = std::move(names);
  }
  context.source["launch_slots"] = std::move(slots);
  return plan::make_plan(result.table, dag, point, context);
}

}  // namespace kareus::planner
