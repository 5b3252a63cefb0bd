#include "kareus/planner/comparison.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <optional>

#include "kareus/core/error.hpp"
#include "kareus/planner/make_plan.hpp"

namespace kareus::planner {
namespace {

// Share of the partition knobs of a plan's instructions that run their collective sequentially.
double sequential_share(const plan::Plan& p) {
  int total = 0, sequential = 0;
  for (const auto& stage : p.stages) {
    for (const auto& ins : stage) {
      if (!ins.knob->is_object() || !ins.knob->contains("partitions")) continue;
      for (const auto& part : ins.knob->at("partitions")) {
        ++total;
        sequential += part.value("slot", "") == "none";
      }
    }
  }
  return total ? static_cast<double>(sequential) / total : 0.0;
}

// What a method's comparison takes from its result, taken as the method finishes, so that its plans
// are let go while the others still run; the figures against the reference come once all have run.
MethodComparison summarise(const MethodResult& r, const Job& job, const evaluate::Evaluator& evaluator,
                           const PlannerOptions& options, const ClusterShape& shape, std::span<const double> slowdowns) {
  MethodComparison m;
  m.method = r.method;
  m.points = r.points();
  m.measurements = r.measurements;
  m.cluster_energy_j = cluster_energy_j(m.points.front(), shape);
  for (double slowdown : slowdowns) m.stragglers.push_back(straggler_iteration(m.points, shape, slowdown));
  if (r.method == Method::kKareus) {
    m.sequential_share = sequential_share(make_plan(r, job, r.frontier.front()));
  } else {
    m.clocks_mhz = method_clocks_mhz(r.method, job, evaluator, options);
  }
  return m;
}

void compare_with_reference(MethodComparison& m, std::span<const TimeEnergy> reference) {
  const std::vector<TimeEnergy> points10 = sample_evenly(m.points, 10), reference10 = sample_evenly(reference, 10);
  m.iso_time_energy_reduction_pct = iso_time_energy_reduction_pct(m.points, reference);
  m.iso_energy_time_reduction_pct = iso_energy_time_reduction_pct(m.points, reference);
  m.iso_time_energy_reduction_pct_10 = iso_time_energy_reduction_pct(points10, reference10);
  m.iso_energy_time_reduction_pct_10 = iso_energy_time_reduction_pct(points10, reference10);
}

}  // namespace

std::optional<Method> reference_method(std::span<const Method> ran) {
  for (Method m : {Method::kPerseus, Method::kNanobatching, Method::kMegatron}) {
    if (std::find(ran.begin(), ran.end(), m) != ran.end()) return m;
  }
  return std::nullopt;
}

void check_slowdowns(std::span<const double> straggler_slowdowns) {
  for (double slowdown : straggler_slowdowns) {
    if (!(slowdown >= 1)) {
      throw InputError({"", 0, 0, "--straggler"}, fmt::format("a slowdown must be at least 1, got {}", slowdown));
    }
  }
}

JobComparison compare_methods(const Job& job, const evaluate::Evaluator& evaluator, const PlannerOptions& options,
                              std::span<const double> straggler_slowdowns) {
  check_slowdowns(straggler_slowdowns);
  JobComparison out;
  out.config = job.name;
  out.energy_scope = plan::energy_scope_for(job.parallel.pp);
  // Every method's P_blocking is the planner's static power (run_strategy).
  out.shape = {.pipelines = job.parallel.dp,
               .gpus_per_stage = job.parallel.tp * job.parallel.cp,
               .stages = job.parallel.pp,
               .p_blocking_w = options.p_static_w.value_or(evaluator.gpu().static_power_w)};
  out.cluster_energy_scope = fmt::format("all {} GPUs of the job (TP {} x CP {} x PP {} x DP {}), one iteration",
                                         out.shape.gpus(), job.parallel.tp, job.parallel.cp, job.parallel.pp,
                                         job.parallel.dp);
  std::vector<std::optional<MethodComparison>> summaries(std::size(kAllMethods));
  std::vector<LeftOut> left_out =
      for_each_method(kAllMethods, job, evaluator, options, [&](std::size_t i, MethodResult&& result) {
        summaries[i] = summarise(result, job, evaluator, options, out.shape, straggler_slowdowns);
      });
  out.left_out = std::move(left_out);
  for (std::optional<MethodComparison>& m : summaries) {
    if (m) out.methods.push_back(std::move(*m));
  }
  std::vector<Method> ran;
  for (const MethodComparison& m : out.methods) ran.push_back(m.method);
  out.reference = reference_method(ran);
  if (out.reference) {
    const auto reference = std::ranges::find(out.methods, *out.reference, &MethodComparison::method);
    const std::vector<TimeEnergy> reference_points = reference->points;
    for (MethodComparison& m : out.methods) {
      if (m.method != *out.reference) compare_with_reference(m, reference_points);
    }
  }
  return out;
}

}  // namespace kareus::planner
