#include "kareus/sim/simulator.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "kareus/core/error.hpp"
#include "kareus/pipeline/dag.hpp"
#include "kareus/pipeline/schedule.hpp"

namespace kareus::sim {
namespace {

// The plan's schedule, checked instruction by instruction against what the plan lists.
pipeline::PipelineSchedule schedule_of(const plan::Plan& plan, const std::string& source) {
  pipeline::PipelineSchedule schedule =
      pipeline::PipelineSchedule::make(plan.schedule, plan.num_stages, plan.num_microbatches, plan.virtual_stages);
  for (int s = 0; s < plan.num_stages; ++s) {
    auto order = schedule.stage_order(s);
    const auto& listed = plan.stages.at(static_cast<std::size_t>(s));
    if (listed.size() != order.size()) {
      throw InputError({source, 0, 0, fmt::format("stages[{}].instructions", s)},
                       fmt::format("lists {} instructions; the {} schedule runs {} on this stage", listed.size(),
                                   pipeline::to_string(plan.schedule), order.size()));
    }
    for (std::size_t k = 0; k < order.size(); ++k) {
      const plan::PlannedInstruction& p = listed[k];
      const pipeline::Instruction& o = order[k];
      if (p.type != o.type || p.microbatch != o.microbatch || p.chunk != o.chunk || p.part != o.part) {
        throw InputError({source, 0, 0, fmt::format("stages[{}].instructions[{}]", s, k)},
                         fmt::format("is not what the {} schedule runs there (microbatch {} chunk {})",
                                     pipeline::to_string(plan.schedule), o.microbatch, o.chunk));
      }
      if (!(p.time_s > 0) || !(p.freq_mhz > 0) || !std::isfinite(p.energy_j)) {
        throw InputError({source, 0, 0, fmt::format("stages[{}].instructions[{}]", s, k)},
                         "needs a positive time and clock and a finite energy");
      }
    }
  }
  return schedule;
}

// A stage's clock requests: each takes effect at `effective_s`; before the first, the stage runs
// at the clock it was set to before the iteration (its first instruction's).
struct ClockTimeline {
  double initial_mhz = 0;
  std::vector<std::pair<double, double>> requests;  // (effective_s, freq_mhz), effective_s ascending

  double at(double t) const {
    double f = initial_mhz;
    for (const auto& [when, freq] : requests) {
      if (when > t) break;
      f = freq;
    }
    return f;
  }
  // The first request to take effect after t, if any.
  const std::pair<double, double>* next_after(double t) const {
    for (const auto& r : requests) {
      if (r.first > t) return &r;
    }
    return nullptr;
  }
};

}  // namespace

SimulationResult simulate(const plan::Plan& plan, const SimulationOptions& options) {
  if (!(options.jitter >= 0) || !std::isfinite(options.jitter)) {
    throw InputError({"", 0, 0, "--jitter"}, fmt::format("must be a non-negative fraction, got {}", options.jitter));
  }
  if (!(options.clock_switch_latency_s >= 0) || !std::isfinite(options.clock_switch_latency_s)) {
    throw InputError({"", 0, 0, "--switch-latency-ms"}, "must be non-negative");
  }
  if (!(options.transfer_bytes >= 0)) throw InputError({"", 0, 0, "transfer bytes"}, "must be non-negative");
  const pipeline::PipelineSchedule schedule = schedule_of(plan, options.plan_source);
  const pipeline::InstructionDag dag(schedule);
  const std::size_t n = dag.num_nodes();
  const double p_blocking_w = plan.p_blocking_w;

  SimulationResult result;
  result.planned_time_s = plan.time_s;
  result.planned_energy_j = plan.energy_j;
  result.p_blocking_w = p_blocking_w;
  result.num_stages = plan.num_stages;

  // Node v is the k-th instruction of its stage, in plan order (the DAG is stage-major).
  std::vector<const plan::PlannedInstruction*> planned(n);
  std::vector<std::size_t> position(n);
  for (int s = 0; s < plan.num_stages; ++s) {
    for (std::size_t k = 0; k < plan.stages[static_cast<std::size_t>(s)].size(); ++k) {
      const std::size_t v = dag.node_of(s, k);
      planned[v] = &plan.stages[static_cast<std::size_t>(s)][k];
      position[v] = k;
    }
  }
  // Jitter is drawn in node order, so it does not depend on the order events are processed in.
  std::vector<double> duration(n);
  std::mt19937_64 rng(options.seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  for (std::size_t v = 0; v < n; ++v) {
    double factor = 1;
    if (options.jitter > 0) factor = 1 + options.jitter * std::clamp(normal(rng), -3.0, 3.0);
    duration[v] = planned[v]->time_s * std::max(factor, 0.01);
  }

  std::vector<ClockTimeline> clocks(static_cast<std::size_t>(plan.num_stages));
  std::vector<double> last_requested(static_cast<std::size_t>(plan.num_stages));
  for (int s = 0; s < plan.num_stages; ++s) {
    const auto& listed = plan.stages[static_cast<std::size_t>(s)];
    if (!listed.empty()) clocks[static_cast<std::size_t>(s)].initial_mhz = last_requested[static_cast<std::size_t>(s)] = listed.front().freq_mhz;
  }

  std::vector<double> finish(n, 0.0);
  std::vector<SimulatedInstruction> records(n);
  double dynamic_energy_j = 0, makespan_s = 0;
  for (std::size_t v : dag.topological_order()) {
    const pipeline::Instruction& ins = dag.instruction(v);
    const auto stage = static_cast<std::size_t>(ins.stage);
    double ready = 0, stage_free = 0;
    for (std::size_t k = dag.predecessor_begin(v); k < dag.predecessor_begin(v + 1); ++k) {
      const std::size_t u = dag.edge_from(dag.predecessor_edge(k));
      const int from = dag.instruction(u).stage;
      if (from == ins.stage) {
        ready = std::max(ready, finish[u]);
        if (position[u] + 1 == position[v]) stage_free = finish[u];
        continue;
      }
      const double transfer_s = options.link ? options.link(from, ins.stage).transfer_s(options.transfer_bytes) : 0.0;
      const double arrival = finish[u] + transfer_s;
      ready = std::max(ready, arrival);
      if (options.transfer_bytes > 0 && options.link) {
        result.transfers.push_back({from, ins.stage, position[u], position[v], finish[u], arrival, options.transfer_bytes});
      }
    }

    // The runtime asks for the clock when the stage's previous instruction ends.
    const plan::PlannedInstruction& p = *planned[v];
    ClockTimeline& timeline = clocks[stage];
    if (p.freq_mhz != last_requested[stage]) {
      ++result.clock_changes;
      timeline.requests.emplace_back(stage_free + options.clock_switch_latency_s, p.freq_mhz);
      last_requested[stage] = p.freq_mhz;
    }
    // Run the work: `remaining` is in seconds at the planned clock; a slower clock in effect
    // consumes it in proportion to the clocks.
    SimulatedInstruction& r = records[v];
    r.stage = ins.stage;
    r.position = position[v];
    r.start_s = ready;
    r.freq_mhz = r.old_freq_mhz = p.freq_mhz;
    double t = ready, remaining = duration[v];
    for (;;) {
      const double clock = timeline.at(t);
      if (clock == p.freq_mhz) {
        t += remaining;
        break;
      }
      r.old_freq_mhz = clock;
      const double rate = clock / p.freq_mhz;
      const auto* next = timeline.next_after(t);
      if (next == nullptr || t + remaining / rate <= next->first) {
        r.old_clock_s += remaining / rate;
        t += remaining / rate;
        break;
      }
      r.old_clock_s += next->first - t;
      remaining -= (next->first - t) * rate;
      t = next->first;
    }
    if (r.old_clock_s > 0) ++result.late_clock_changes;
    r.end_s = finish[v] = t;
    // Dynamic energy follows the work done; P_blocking is charged for the time it took.
    const double dynamic_j = p.energy_j - p_blocking_w * p.time_s;
    r.energy_j = dynamic_j + p_blocking_w * (r.end_s - r.start_s);
    dynamic_energy_j += dynamic_j;
    makespan_s = std::max(makespan_s, t);
  }
  result.time_s = makespan_s;
  result.energy_j = dynamic_energy_j + p_blocking_w * plan.num_stages * makespan_s;
  result.instructions = std::move(records);
  std::sort(result.transfers.begin(), result.transfers.end(), [](const auto& a, const auto& b) {
    return std::tie(a.start_s, a.from_stage, a.from_position) < std::tie(b.start_s, b.from_stage, b.from_position);
  });
  return result;
}

}  // namespace kareus::sim
