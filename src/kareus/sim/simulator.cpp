#include "kareus/sim/simulator.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "kareus/core/error.hpp"
#include "kareus/schedule/dag.hpp"
#include "kareus/schedule/schedule.hpp"
#include "kareus/plan/validate.hpp"

namespace kareus::sim {
namespace {

// A clock request, tagged with the stage's instruction it is for, so that time at a clock not an
// instruction's own reads as late (an earlier instruction's) or early (a later one's).
struct ClockRequest {
  double effective_s = 0;
  double freq_mhz = 0;
  std::size_t position = 0;
};

// A stage's clock requests: each takes effect at `effective_s`; before the first, the stage runs
// at the clock it was set to before the iteration (its first instruction's).
struct ClockTimeline {
  ClockRequest initial;
  std::vector<ClockRequest> requests;  // effective_s ascending

  ClockRequest at(double t) const {
    ClockRequest in_effect = initial;
    for (const ClockRequest& r : requests) {
      if (r.effective_s > t) break;
      in_effect = r;
    }
    return in_effect;
  }
  // The first request to take effect after t, if any.
  const ClockRequest* next_after(double t) const {
    for (const auto& r : requests) {
      if (r.effective_s > t) return &r;
    }
    return nullptr;
  }
};

void check_options(const SimulationOptions& options) {
  if (!(options.jitter >= 0) || !std::isfinite(options.jitter)) {
    throw InputError({"", 0, 0, "--jitter"}, fmt::format("must be a non-negative fraction, got {}", options.jitter));
  }
  if (!(options.clock_switch_latency_s >= 0) || !std::isfinite(options.clock_switch_latency_s)) {
    throw InputError({"", 0, 0, "--switch-latency-ms"}, "must be non-negative");
  }
  if (!(options.transfer_bytes >= 0)) throw InputError({"", 0, 0, "transfer bytes"}, "must be non-negative");
  if (!(options.exposed_host_s >= 0) || !std::isfinite(options.exposed_host_s)) {
    throw InputError({"", 0, 0, "--engine"},
                     fmt::format("exposes {} s of host time per instruction; must be non-negative", options.exposed_host_s));
  }
  if (options.host_lead_instructions < 1) {
    throw InputError({"", 0, 0, "--host-lead"},
                     fmt::format("must be at least 1 instruction, got {}", options.host_lead_instructions));
  }
}

}  // namespace

std::string_view to_string(Alignment alignment) {
  switch (alignment) {
    case Alignment::kSync: return "sync";
    case Alignment::kGpuTimed: return "gpu-timed";
    case Alignment::kHostTimed: return "host-timed";
  }
  return "?";
}

Alignment parse_alignment(std::string_view text) {
  for (Alignment a : {Alignment::kSync, Alignment::kGpuTimed, Alignment::kHostTimed}) {
    if (text == to_string(a)) return a;
  }
  throw InputError({"", 0, 0, "--alignment"}, fmt::format("must be sync, gpu-timed or host-timed, got '{}'", text));
}

SimulationResult simulate(const plan::Plan& plan, const SimulationOptions& options) {
  check_options(options);
  plan::validate(plan, options.plan_source);
  const schedule::PipelineSchedule schedule =
      schedule::PipelineSchedule::make(plan.schedule, plan.num_stages, plan.num_microbatches, plan.virtual_stages);
  const schedule::InstructionDag dag(schedule);
  const std::size_t n = dag.num_nodes();
  const double p_blocking_w = plan.p_blocking_w;
  const double e = options.exposed_host_s;
  const bool sync = options.alignment == Alignment::kSync;
  const bool host_timed = options.alignment == Alignment::kHostTimed;
  const auto lead = static_cast<std::size_t>(options.host_lead_instructions);

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
      if (!(planned[v]->time_s > e)) {
        throw InputError({options.plan_source, 0, 0, fmt::format("stages[{}].instructions[{}].time_s", s, k)},
                         fmt::format("is {:.1f} us, no longer than the {:.1f} us the engine exposes at each "
                                     "instruction's start; was the plan composed under another engine (--engine)?",
                                     planned[v]->time_s * 1e6, e * 1e6));
      }
    }
  }
  // Jitter is drawn in node order, so it does not depend on the order events are processed in. The
  // span is the instruction's time on the GPU at its own clock, the work what of it the clock
  // paces: under kSync the first e is the host's, so span = planned (to the bit, unjittered).
  std::vector<double> span(n), work(n);
  std::mt19937_64 rng(options.seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  for (std::size_t v = 0; v < n; ++v) {
    double factor = 1;
    if (options.jitter > 0) factor = 1 + options.jitter * std::clamp(normal(rng), -3.0, 3.0);
    const double jittered = planned[v]->time_s * std::max(factor, 0.01);
    work[v] = std::max(jittered - e, 0.0);
    span[v] = sync ? jittered : work[v];
  }

  std::vector<ClockTimeline> clocks(static_cast<std::size_t>(plan.num_stages));
  std::vector<double> last_requested(static_cast<std::size_t>(plan.num_stages));
  // The stage's instruction k asks for its clock at `when_s`, if it differs from the one before.
  auto request = [&](std::size_t stage, std::size_t k, double when_s) {
    const double freq_mhz = plan.stages[stage][k].freq_mhz;
    if (freq_mhz == last_requested[stage]) return;
    ++result.clock_changes;
    clocks[stage].requests.push_back({when_s + options.clock_switch_latency_s, freq_mhz, k});
    last_requested[stage] = freq_mhz;
  };
  for (int s = 0; s < plan.num_stages; ++s) {
    const auto stage = static_cast<std::size_t>(s);
    const auto& listed = plan.stages[stage];
    if (listed.empty()) continue;
    clocks[stage].initial = {0, listed.front().freq_mhz, 0};
    last_requested[stage] = listed.front().freq_mhz;
    // The host issues the first `lead` instructions before the GPU has started any.
    if (host_timed) {
      for (std::size_t k = 1; k < std::min(lead, listed.size()); ++k) request(stage, k, 0);
    }
  }

  std::vector<double> finish(n, 0.0);
  std::vector<SimulatedInstruction> records(n);
  double dynamic_energy_j = 0, makespan_s = 0;
  for (std::size_t v : dag.topological_order()) {
    const schedule::Instruction& ins = dag.instruction(v);
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

    // Synced or GPU-timed, the clock is asked for when the stage's previous instruction ends; host
    // timed, the host asks for the clock of the instruction `lead` ahead as the GPU starts this one.
    const plan::PlannedInstruction& p = *planned[v];
    const std::size_t k = position[v];
    if (!host_timed) {
      request(stage, k, stage_free);
    } else if (k + lead < plan.stages[stage].size()) {
      request(stage, k + lead, ready);
    }
    // Run the work: `remaining` is in seconds at the planned clock; another clock in effect
    // consumes it in proportion to the clocks.
    const ClockTimeline& timeline = clocks[stage];
    SimulatedInstruction& r = records[v];
    r.stage = ins.stage;
    r.position = k;
    r.start_s = ready;
    r.freq_mhz = r.old_freq_mhz = r.early_freq_mhz = p.freq_mhz;
    r.exposed_s = sync ? e : 0;
    double t = ready + r.exposed_s, remaining = work[v];
    // Time at another instruction's clock: late if an earlier one's, early if a later one's.
    auto at_foreign_clock = [&](const ClockRequest& clock, double seconds) {
      if (clock.position < k) {
        r.old_clock_s += seconds;
        r.old_freq_mhz = clock.freq_mhz;
      } else {
        r.early_clock_s += seconds;
        r.early_freq_mhz = clock.freq_mhz;
      }
    };
    for (;;) {
      const ClockRequest clock = timeline.at(t);
      const bool own = clock.freq_mhz == p.freq_mhz;
      const double rate = clock.freq_mhz / p.freq_mhz;
      const ClockRequest* next = timeline.next_after(t);
      if (next == nullptr || t + remaining / rate <= next->effective_s) {
        if (!own) at_foreign_clock(clock, remaining / rate);
        t += remaining / rate;
        break;
      }
      if (!own) at_foreign_clock(clock, next->effective_s - t);
      remaining -= (next->effective_s - t) * rate;
      t = next->effective_s;
    }
    if (r.foreign_clock_s() == 0) t = ready + span[v];
    if (r.old_clock_s > 0) ++result.late_clock_changes;
    if (r.early_clock_s > 0) ++result.early_clock_changes;
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
