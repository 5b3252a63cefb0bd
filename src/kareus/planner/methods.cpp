#include "kareus/planner/methods.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <span>

#include "kareus/core/error.hpp"
#include "kareus/workload/zero_bubble.hpp"

namespace kareus::planner {
namespace {

using pipeline::FrontierPoint;

// Whether the evaluator can cost the baseline's knob of `partition` at each of `clocks`: always,
// unless it holds a finite set of knobs (a table) and not that one.
std::vector<bool> baseline_knob_held(Method method, const workload::Partition& partition,
                                     const evaluate::Evaluator& evaluator, const search::GridOptions& grid,
                                     const std::vector<double>& clocks) {
  std::vector<bool> held(clocks.size(), true);
  const auto known = evaluator.known_knobs(partition);
  if (!known) return held;
  const search::KnobSpace space = baseline_space(partition, evaluator, grid, clocks).restricted_to(*known);
  for (std::size_t c = 0; c < clocks.size(); ++c) {
    held[c] = space.available(method == Method::kNanobatching ? space.nanobatching_knob(clocks[c])
                                                              : space.sequential_knob(clocks[c]));
  }
  return held;
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

// Maps plans of `from` onto `to`: each instruction takes the option of `to` with the least effective
// energy among those no slower than its own; none when some option has no match. Which option that
// is depends only on the instruction's operation (its stage, chunk and slot) and its option there,
// so each is found once, when a plan first asks, rather than by scanning `to` for every instruction
// of every plan (on a long pipeline, tens of thousands of plans of thousands of instructions).
class DominatingOptions {
 public:
  DominatingOptions(const pipeline::OptionTable& from, const pipeline::OptionTable& to,
                    const schedule::InstructionDag& dag, double p_static_w)
      : p_static_w_(p_static_w) {
    std::map<const std::vector<pipeline::StageOption>*, std::size_t> operation;
    for (std::size_t v = 0; v < dag.num_nodes(); ++v) {
      const schedule::Instruction& ins = dag.instruction(v);
      const auto* options = &pipeline::options_of(from, ins);
      auto [it, added] = operation.try_emplace(options, from_.size());
      if (added) {
        from_.push_back(options);
        to_.push_back(&pipeline::options_of(to, ins));
        found_.emplace_back(options->size(), kUnknown);
      }
      operation_of_.push_back(it->second);
    }
  }

  std::optional<std::vector<std::uint16_t>> map(std::span<const std::uint16_t> assignment) {
    KAREUS_CHECK(assignment.size() == operation_of_.size(), "plan assignment size differs from the DAG");
    std::vector<std::uint16_t> mapped(assignment.size());
    for (std::size_t v = 0; v < assignment.size(); ++v) {
      const std::size_t op = operation_of_[v];
      int& found = found_[op].at(assignment[v]);
      if (found == kUnknown) found = dominating(*from_[op], *to_[op], assignment[v]);
      if (found == kNone) return std::nullopt;
      mapped[v] = static_cast<std::uint16_t>(found);
    }
    return mapped;
  }

 private:
  static constexpr int kUnknown = -2, kNone = -1;

  int dominating(const std::vector<pipeline::StageOption>& from, const std::vector<pipeline::StageOption>& to,
                 std::size_t option) const {
    const pipeline::StageOption& o = from[option];
    std::optional<std::size_t> best;
    double best_effective = 0;
    for (std::size_t k = 0; k < to.size(); ++k) {
      const pipeline::StageOption& c = to[k];
      const double effective = c.energy_j - p_static_w_ * c.time_s;
      if (c.time_s <= o.time_s * (1 + 1e-9) && (!best || effective < best_effective)) best = k, best_effective = effective;
    }
    if (!best || best_effective > (o.energy_j - p_static_w_ * o.time_s) + 1e-9 * std::abs(o.energy_j)) return kNone;
    return static_cast<int>(*best);
  }

  double p_static_w_;
  std::vector<std::size_t> operation_of_;                              // per DAG node
  std::vector<const std::vector<pipeline::StageOption>*> from_, to_;  // per operation
  std::vector<std::vector<int>> found_;                                // per operation and option of `from`
};

// Megatron-LM, Perseus and Nanobatching+Perseus: one fixed knob per partition and clock, which an
// evaluator holding a finite set of knobs (a table) must hold for every partition at a clock.
class BaselineStrategy final : public MethodStrategy {
 public:
  explicit BaselineStrategy(Method method) : method_(method) {}
  Method method() const override { return method_; }

  std::vector<double> clocks_mhz(const Job& job, const evaluate::Evaluator& evaluator,
                                 const PlannerOptions& options) const override {
    const std::vector<double> clocks = candidate_clocks(job, evaluator, options);
    std::vector<bool> all(clocks.size(), true);
    for (const workload::Partition& p : job_partitions(job, options.schedule)) {
      const std::vector<bool> held = baseline_knob_held(method_, p, evaluator, options.search.grid, clocks);
      for (std::size_t c = 0; c < clocks.size(); ++c) all[c] = all[c] && held[c];
    }
    std::vector<double> out;
    for (std::size_t c = 0; c < clocks.size(); ++c) {
      if (all[c]) out.push_back(clocks[c]);
    }
    return out;
  }

  std::optional<std::string> unsupported_reason(const Job& job, const evaluate::Evaluator& evaluator,
                                                const PlannerOptions& options) const override {
    if (!clocks_mhz(job, evaluator, options).empty()) return std::nullopt;
    const std::vector<double> clocks = candidate_clocks(job, evaluator, options);
    // The partitions that lack the knob at every clock, or else those that lack it somewhere.
    std::vector<std::string> never, somewhere;
    bool any_sequential = false;
    for (const workload::Partition& p : job_partitions(job, options.schedule)) {
      const std::vector<bool> held = baseline_knob_held(method_, p, evaluator, options.search.grid, clocks);
      const auto count = std::count(held.begin(), held.end(), true);
      if (count == 0) never.push_back(p.key);
      if (count > 0 && count < static_cast<long>(held.size())) somewhere.push_back(p.key);
      if (const auto known = evaluator.known_knobs(p); known && p.collective && !p.slots.empty()) {
        for (const workload::Knob& k : *known) any_sequential = any_sequential || k.sequential();
      }
    }
    const std::string knob =
        method_ == Method::kNanobatching
            ? fmt::format("nanobatching knob (collective launched at the first slot with the SM level nearest {})",
                          search::kDefaultNanobatchingSms)
            : std::string("sequential knob (collective after the compute)");
    const std::string where = method_ == Method::kMegatron ? fmt::format("at {} MHz, the highest clock", clocks.front())
                                                           : "at any clock it holds";
    std::string reason =
        !never.empty() ? fmt::format("{} holds no {} of {} {}", evaluator.name(), knob, fmt::join(never, ", "), where)
                       : fmt::format("{} holds the {} of {} at different clocks, none common to all", evaluator.name(),
                                     knob, fmt::join(somewhere, ", "));
    if (method_ != Method::kNanobatching && !any_sequential) reason += "; the Kareus artifact never measures it";
    return reason;
  }

  std::vector<compose::PartitionPoint> partition_points(const workload::Partition& partition,
                                                        const std::vector<double>& clocks, MethodRun& run,
                                                        MethodResult& result) const override {
    const search::KnobSpace space = baseline_space(partition, run.evaluator, run.options.search.grid, clocks);
    std::vector<compose::PartitionPoint> points;
    for (double clock : clocks) points.push_back(run.measure(partition, baseline_knob(method_, space, clock)));
    result.grid_knobs += clocks.size();
    return points;
  }

 private:
  // Megatron-LM runs the highest clock only.
  std::vector<double> candidate_clocks(const Job& job, const evaluate::Evaluator& evaluator,
                                       const PlannerOptions& options) const {
    std::vector<double> clocks = job_clocks_mhz(job, evaluator, options);
    if (method_ == Method::kMegatron) clocks = {*std::max_element(clocks.begin(), clocks.end())};
    return clocks;
  }

  Method method_;
};

// Kareus: each collective partition's knobs searched; the baselines' knobs join its options (the
// comparison measures them anyway, reusing whatever the search measured), and the baselines' plans
// are plans of Kareus's space, so its frontier weakly dominates theirs by construction.
class KareusStrategy final : public MethodStrategy {
 public:
  Method method() const override { return Method::kKareus; }

  std::vector<double> clocks_mhz(const Job& job, const evaluate::Evaluator& evaluator,
                                 const PlannerOptions& options) const override {
    return job_clocks_mhz(job, evaluator, options);
  }

  // Kareus plans from whatever a table holds, but a zero-bubble W has only its clock to choose.
  std::optional<std::string> unsupported_reason(const Job& job, const evaluate::Evaluator& evaluator,
                                                const PlannerOptions& options) const override {
    if (!schedule::splits_backward(options.schedule)) return std::nullopt;
    const workload::Partition weights = workload::weight_gradient_partition(job.model, job.parallel);
    const std::vector<bool> held = baseline_knob_held(Method::kPerseus, weights, evaluator, options.search.grid,
                                                      job_clocks_mhz(job, evaluator, options));
    if (std::find(held.begin(), held.end(), true) != held.end()) return std::nullopt;
    return fmt::format("{} holds no measurement of {} (the weight-gradient GEMMs {}'s W instructions run)",
                       evaluator.name(), weights.key, schedule::to_string(options.schedule));
  }

  std::vector<compose::PartitionPoint> partition_points(const workload::Partition& partition,
                                                        const std::vector<double>& clocks, MethodRun& run,
                                                        MethodResult& result) const override {
    const search::KnobSpace baselines = baseline_space(partition, run.evaluator, run.options.search.grid, clocks);
    std::vector<compose::PartitionPoint> points;
    if (!partition.collective) {  // only a clock to choose: Perseus's knobs, as far as they were measured
      for (double clock : clocks) {
        if (auto p = run.measure_if_sampled(partition, baseline_knob(Method::kPerseus, baselines, clock))) points.push_back(*p);
      }
      result.grid_knobs += clocks.size();
      return points;
    }
    const search::PartitionSearchResult found = search_partition(partition, run);
    for (const search::Measurement& m : found.estimated) points.push_back({m.knob, m.time_s, m.energy_j});
    // The baselines' knobs the search left out: the comparison measures them anyway, and with them
    // among Kareus's options every baseline plan has a counterpart.
    for (double clock : clocks) {
      for (Method baseline : {Method::kPerseus, Method::kNanobatching}) {
        const workload::Knob knob = baseline_knob(baseline, baselines, clock);
        if (run.measured(partition.key, knob)) continue;
        if (auto p = run.measure_if_sampled(partition, knob)) points.push_back(*p);
      }
    }
    result.grid_knobs += found.space_size;
    result.unusable_knobs += found.unusable.size();
    if (run.options.progress) {
      run.options.progress(fmt::format("{}: {} of {} knobs{} measured{}", partition.key, found.successful.size(),
                                       found.space_size, found.restricted ? " in the table" : "",
                                       unusable_note(partition, found.unusable)));
    }
    return points;
  }

  // The baselines' plans mapped onto Kareus's options (BaselinePlansJoin). A baseline a table
  // cannot run (the Kareus artifact's profiles never measure the sequential knob) is left out:
  // Kareus then plans from what was measured. Each baseline's result goes before the next is
  // solved: on a long pipeline each front holds tens of thousands of plans (hundreds of MB).
  void merge(MethodResult& result, MethodRun& run) const override {
    const schedule::InstructionDag dag(result.pipeline_schedule(run.job));
    BaselinePlansJoin join(result, dag);
    for (Method baseline : {Method::kPerseus, Method::kNanobatching}) {
      const MethodStrategy& strategy = strategy_for(baseline);
      if (strategy.unsupported_reason(run.job, run.evaluator, run.options)) continue;
      const MethodResult other = run_strategy(strategy, run);  // the knobs Kareus measured, reused
      result.merged_baselines.push_back({baseline, other.points()});
      join.add(other);
    }
    join.finish();
  }

 private:
  static search::PartitionSearchResult search_partition(const workload::Partition& partition, MethodRun& run) {
    const search::PreparedSearch prepared = search::prepare_search(partition, run.evaluator, run.options.search);
    std::optional<std::filesystem::path> journal;
    if (run.options.journal_dir) journal = search::journal_path(*run.options.journal_dir, partition.key);
    search::PartitionSearchResult found = search::run_prepared_search(
        prepared, run.evaluator, workload::cost_identity(run.job.model, run.job.parallel, run.evaluator.gpu().name),
        journal);
    // This run's own measurements are the journal's last measured_now; the rest it resumed.
    const std::size_t resumed = found.outcome.measurements.size() - found.outcome.measured_now;
    std::set<workload::Knob> new_now;
    for (std::size_t i = resumed; i < found.outcome.measurements.size(); ++i) {
      if (found.outcome.measurements[i].ok) new_now.insert(found.outcome.measurements[i].knob);
    }
    for (const search::Measurement& m : found.successful) {
      run.record(partition.key, {m.knob, m.time_s, m.energy_j}, new_now.contains(m.knob));
    }
    return found;
  }
};

}  // namespace

BaselinePlansJoin::BaselinePlansJoin(MethodResult& kareus, const schedule::InstructionDag& dag)
    : kareus_(kareus), dag_(dag), own_(kareus.points()), dominated_by_own_(own_) {}

void BaselinePlansJoin::add(const MethodResult& baseline) {
  KAREUS_CHECK(!finished_, "a finished join takes no more plans");
  DominatingOptions dominating(baseline.table, kareus_.table, dag_, kareus_.p_static_w);
  for (const FrontierPoint& p : baseline.frontier) {
    auto mapped = dominating.map(p.assignment);
    KAREUS_CHECK(mapped.has_value(),
                 fmt::format("a {} plan has no counterpart among Kareus's options", to_string(baseline.method)));
    const TimeEnergy te = pipeline::evaluate_assignment(kareus_.table, dag_, *mapped, kareus_.p_static_w);
    if (dominated_by_own_(te)) continue;
    FrontierPoint q;
    q.assignment = std::move(*mapped);
    q.time_s = q.planned_time_s = te.time_s;
    q.energy_j = q.model_energy_j = te.energy_j;
    mapped_.push_back(std::move(q));
  }
}

void BaselinePlansJoin::finish() {
  KAREUS_CHECK(!finished_, "a join finishes once");
  finished_ = true;
  std::vector<TimeEnergy> te = own_;
  for (const FrontierPoint& q : mapped_) te.push_back(q.time_energy());
  std::vector<FrontierPoint> front;
  for (std::size_t i : pareto_indices(te)) {
    front.push_back(std::move(i < own_.size() ? kareus_.frontier[i] : mapped_[i - own_.size()]));
  }
  kareus_.frontier = std::move(front);
}

compose::PartitionPoint MethodRun::measure(const workload::Partition& partition, const workload::Knob& knob) {
  if (auto it = cache_.find({partition.key, knob}); it != cache_.end()) return it->second;
  evaluate::EvalResult r = evaluator.evaluate(partition, knob);
  if (!r.ok()) {
    throw InputError({"", 0, 0, partition.key},
                     fmt::format("{} cannot evaluate {} at {} MHz, {} SMs, slot {}: {}", evaluator.name(),
                                 partition.key, knob.freq_mhz, knob.sms, knob.slot, r.message));
  }
  compose::PartitionPoint point{knob, r.time_s, r.energy_j};
  record(partition.key, point, true);
  return point;
}

std::optional<compose::PartitionPoint> MethodRun::measure_if_sampled(const workload::Partition& partition,
                                                                     const workload::Knob& knob) {
  if (auto it = cache_.find({partition.key, knob}); it != cache_.end()) return it->second;
  if (evaluator.provenance() == evaluate::Provenance::kMeasurement) {
    evaluate::EvalResult r = evaluator.evaluate(partition, knob);
    if (r.status == evaluate::EvalStatus::kNotMeasured) return std::nullopt;
    if (r.ok()) {
      compose::PartitionPoint point{knob, r.time_s, r.energy_j};
      record(partition.key, point, true);
      return point;
    }
  }
  return measure(partition, knob);
}

void MethodRun::record(const std::string& key, const compose::PartitionPoint& point, bool new_now) {
  if (cache_.emplace(std::pair{key, point.knob}, point).second && new_now) ++measurements_;
}

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

search::KnobSpace baseline_space(const workload::Partition& partition, const evaluate::Evaluator& evaluator,
                                 const search::GridOptions& grid, const std::vector<double>& clocks) {
  return search::knob_space_for(partition, evaluator.gpu(), grid, clocks);
}

// From the partition's search grid, so that Kareus's search measures exactly the knobs the
// baselines use. Perseus and Megatron-LM: the sequential knob (the segment un-split, its collective
// after the compute). Nanobatching+Perseus: the artifact's default nanobatch schedule, which fixes
// the launch point and the SM count rather than searching them (data/kareus-osdi26/README.md):
// each collective launched before its partition's first op (its first launch slot), with
// search::kDefaultNanobatchingSms SMs, the collective library's default channel count on A100
// NVLink (one SM per NCCL channel). That is what the artifact runs: its Nanobatching+Perseus
// script turns its scheduler off (tests/artifact/run_nanobatch_perseus.sh,
// model.enable_kareus_scheduler=False), so every partition takes the engine's no-schedule setting
// (kareus/megatron/core/partitions/partition_base.py, _get_comm_config: launch at op 0, no SM
// count), and a collective without an SM count is a plain torch.distributed call (NCCL's own
// channels).
workload::Knob baseline_knob(Method method, const search::KnobSpace& space, double freq_mhz) {
  KAREUS_CHECK(method != Method::kKareus, "Kareus searches its knobs");
  return space.knob(method == Method::kNanobatching ? space.nanobatching_knob(freq_mhz) : space.sequential_knob(freq_mhz));
}

const MethodStrategy& strategy_for(Method method) {
  static const BaselineStrategy megatron(Method::kMegatron), perseus(Method::kPerseus),
      nanobatching(Method::kNanobatching);
  static const KareusStrategy kareus;
  switch (method) {
    case Method::kMegatron: return megatron;
    case Method::kPerseus: return perseus;
    case Method::kNanobatching: return nanobatching;
    case Method::kKareus: return kareus;
  }
  KAREUS_CHECK(false, "no such method");
  return kareus;
}

}  // namespace kareus::planner
