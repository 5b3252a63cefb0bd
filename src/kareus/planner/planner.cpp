#include "kareus/planner/planner.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <future>
#include <optional>

#include "kareus/core/error.hpp"
#include "kareus/core/parallel.hpp"
#include "kareus/evaluate/remembered.hpp"
#include "kareus/plan/validate.hpp"
#include "kareus/planner/methods.hpp"
#include "kareus/workload/zero_bubble.hpp"

namespace kareus::planner {
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
  for (const pipeline::FrontierPoint& p : frontier) out.push_back(p.time_energy());
  return out;
}

schedule::PipelineSchedule MethodResult::pipeline_schedule(const Job& job) const {
  return schedule::PipelineSchedule::make(schedule, job.parallel.pp, job.parallel.microbatches, virtual_stages);
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

std::vector<workload::Partition> job_partitions(const Job& job, schedule::ScheduleKind schedule) {
  std::vector<workload::Partition> partitions = job_partitions(job);
  if (schedule::splits_backward(schedule)) partitions.push_back(workload::weight_gradient_partition(job.model, job.parallel));
  return partitions;
}

std::vector<double> method_clocks_mhz(Method method, const Job& job, const evaluate::Evaluator& evaluator,
                                      const PlannerOptions& options) {
  return strategy_for(method).clocks_mhz(job, evaluator, options);
}

std::optional<std::string> unsupported_reason(Method method, const Job& job, const evaluate::Evaluator& evaluator,
                                              const PlannerOptions& options) {
  return strategy_for(method).unsupported_reason(job, evaluator, options);
}

MethodResult run_strategy(const MethodStrategy& strategy, MethodRun& run) {
  const Job& job = run.job;
  const PlannerOptions& options = run.options;
  MethodResult result;
  result.method = strategy.method();
  result.engine = options.engine.name;
  result.gpu = plan::gpu_limits_json(run.evaluator.gpu());
  result.schedule = options.schedule;
  result.virtual_stages = options.virtual_stages;
  result.p_static_w = options.p_static_w.value_or(run.evaluator.gpu().static_power_w);
  const std::size_t measured_before = run.measurements();
  const std::vector<double> clocks = strategy.clocks_mhz(job, run.evaluator, options);
  if (clocks.empty()) {
    throw InputError({"", 0, 0, "--evaluator"}, fmt::format("{} cannot run: {}", to_string(result.method),
                                                            *strategy.unsupported_reason(job, run.evaluator, options)));
  }
  compose::PartitionPoints points;
  for (const workload::Partition& partition : job_partitions(job, options.schedule)) {
    points[partition.key] = strategy.partition_points(partition, clocks, run, result);
  }
  result.table = compose::compose_option_table(job.model, job.parallel, points,
                                               {.p_static_w = result.p_static_w,
                                                .overhead_factor = options.overhead_factor,
                                                .split_backward = schedule::splits_backward(result.schedule),
                                                .virtual_stages = result.virtual_stages,
                                                .engine = options.engine});
  const schedule::PipelineSchedule schedule = result.pipeline_schedule(job);
  // Kareus's certificate without the relaxation's plans needs the table alone: it runs on a thread
  // of its own beside the solve and the merge, which solves the baselines' frontiers. The future
  // waits for it should either throw.
  std::future<std::optional<pipeline::RelaxationBound>> bounding;
  if (options.kareus_bound && !options.relaxation_plans && result.method == Method::kKareus) {
    bounding = std::async(std::launch::async, [&result, &schedule] {
      return std::optional<pipeline::RelaxationBound>(std::in_place, result.table, schedule::InstructionDag(schedule),
                                                      result.p_static_w);
    });
  }
  pipeline::SolverOptions solver{.p_blocking_w = result.p_static_w, .unit_time_s = options.unit_time_s,
                                  .relaxation_plans = options.relaxation_plans};
  pipeline::Frontier frontier = pipeline::solve_frontier(result.table, schedule, solver);
  result.unit_time_s = frontier.stats.unit.unit_time_s;
  result.frontier = std::move(frontier.points);
  result.local_search_converged = frontier.stats.local_search_converged;
  result.bound = std::move(frontier.bound);
  strategy.merge(result, run);
  if (bounding.valid()) result.bound = bounding.get();
  result.measurements = run.measurements() - measured_before;
  return result;
}

void check_schedule(const Job& job, const PlannerOptions& options) {
  // The schedule itself, then whole layers per chunk.
  try {
    (void)schedule::PipelineSchedule::make(options.schedule, job.parallel.pp, job.parallel.microbatches,
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
  const MethodStrategy& strategy = strategy_for(method);
  if (method == Method::kKareus) {
    if (auto reason = strategy.unsupported_reason(job, evaluator, options)) {
      throw InputError({"", 0, 0, "--evaluator"}, fmt::format("Kareus cannot run: {}", *reason));
    }
  }
  MethodRun run(job, evaluator, options);
  return run_strategy(strategy, run);
}

std::vector<LeftOut> for_each_method(std::span<const Method> methods, const Job& job,
                                     const evaluate::Evaluator& evaluator, const PlannerOptions& options,
                                     const std::function<void(std::size_t index, MethodResult&& result)>& take) {
  std::vector<LeftOut> left_out;
  std::vector<Method> runnable;
  for (Method m : methods) {
    if (auto reason = unsupported_reason(m, job, evaluator, options)) {
      left_out.push_back({m, std::move(*reason)});
    } else {
      runnable.push_back(m);
    }
  }
  // Side by side where the evaluator may be asked from several threads (a model, a table): each
  // method's relaxation bound runs on one thread for most of its time on a long pipeline. One after
  // another on a device, where two methods' measurements at once would share its GPUs.
  // Each knob measured once across the methods (evaluate/remembered.hpp): Kareus's search measures
  // the baselines' knobs too.
  const evaluate::Evaluator once = evaluate::remember_measurements(evaluator);
  auto run = [&](std::size_t i) { take(i, run_method(runnable[i], job, once, options)); };
  if (evaluator.thread_safe()) {
    parallel_for(std::size_t{0}, runnable.size(), run);
  } else {
    for (std::size_t i = 0; i < runnable.size(); ++i) run(i);
  }
  return left_out;
}

MethodRuns run_methods(std::span<const Method> methods, const Job& job, const evaluate::Evaluator& evaluator,
                       const PlannerOptions& options) {
  std::vector<std::optional<MethodResult>> results(methods.size());
  MethodRuns out;
  out.left_out = for_each_method(methods, job, evaluator, options,
                                 [&](std::size_t i, MethodResult&& result) { results[i] = std::move(result); });
  for (std::optional<MethodResult>& r : results) {
    if (r) out.results.push_back(std::move(*r));
  }
  return out;
}

pipeline::OptionTable baseline_option_table(Method method, const Job& job, const evaluate::Evaluator& evaluator,
                                            const PlannerOptions& options) {
  KAREUS_CHECK(method != Method::kKareus, "Kareus's options come from its search, not a fixed knob");
  MethodRun run(job, evaluator, options);
  std::vector<double> clocks = job_clocks_mhz(job, evaluator, options);
  if (method == Method::kMegatron) clocks = {*std::max_element(clocks.begin(), clocks.end())};
  compose::PartitionPoints points;
  for (const workload::Partition& partition : job_partitions(job)) {
    const search::KnobSpace space = baseline_space(partition, evaluator, options.search.grid, clocks);
    auto& list = points[partition.key];
    for (double clock : clocks) list.push_back(run.measure(partition, baseline_knob(method, space, clock)));
  }
  const double p_static_w = options.p_static_w.value_or(evaluator.gpu().static_power_w);
  return compose::compose_option_table(job.model, job.parallel, points,
                                       {.p_static_w = p_static_w, .overhead_factor = options.overhead_factor,
                                        .engine = options.engine});
}

}  // namespace kareus::planner
