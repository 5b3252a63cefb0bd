// Replays one training iteration of a plan on its pipeline's GPUs, event by event, with what the
// planner's DAG leaves out: the P2P transfers of activations and gradients between stages, the
// latency of each clock change, how the host's clock requests line up with the GPU's work, and
// optional per-instruction jitter. The result sits beside the planned figures, with every
// instruction's and transfer's realised start and end.
//
// The model: an instruction starts when its stage's previous instruction has finished and the
// transfers it waits for have arrived (a transfer leaves when its producer finishes and takes the
// link's latency plus bytes / bandwidth, on its own stream, without contending with others). A
// clock request takes effect the switch latency after it is made; while another clock is in
// effect the instruction's work runs at a rate in proportion to the clocks (compute-bound),
// drawing its planned dynamic energy per unit of work plus P_blocking for the time it takes. Idle
// GPUs draw P_blocking. Energy covers one GPU per stage, as the plan's.
//
// Alignment: the plan's instruction times were composed under an engine (engine::EngineSpec)
// that may expose e = host.instruction_s + host.launch_latency_s at each instruction's start
// (engine::instruction_time_s under sync_per_instruction); `exposed_host_s` is that e, and each
// instruction's work is its planned time (jittered) less e.
//   kSync       Zeus's device sync per instruction: the instruction takes its planned time, of
//               which the first e the GPU idles waiting for the host's first kernel (at any clock);
//               the clock is requested at the sync, when the stage's previous instruction ends, so
//               a switch latency up to e is hidden.
//   kGpuTimed   the host never waits, so the exposure is gone: the work alone, planned − e; the
//               request fires when the GPU reaches the instruction (the stage's previous end).
//   kHostTimed  the work alone, as kGpuTimed, but the host makes the request when it begins
//               issuing the instruction, `host_lead_instructions` ahead of the GPU: the stage's k-th
//               instruction's request is made at the start of its (k − lead)-th (at time 0 for
//               k < lead), so the clock lands early, on the tail of earlier instructions.
// An instruction running at an earlier instruction's clock is late (old_clock_s), at a later
// one's early (early_clock_s). With e = 0 kSync and kGpuTimed agree. With no transfers, no switch
// latency and no jitter, kSync (and any alignment when e = 0) reproduces the plan's time and
// energy exactly.
//
// Thread-safety: simulate() is a pure function of its arguments.
// Example:
//   SimulationResult r = simulate(plan, {.transfer_bytes = 32e6, .link = links, .seed = 1,
//                                        .alignment = Alignment::kSync, .exposed_host_s = 38.9e-6});
//   fmt::print("{} s planned, {} s realised\n", r.planned_time_s, r.time_s);
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "kareus/plan/plan.hpp"
#include "kareus/sim/cluster.hpp"

namespace kareus::sim {

// When a stage's clock request is made against its GPU's work (see the header comment).
enum class Alignment { kSync, kGpuTimed, kHostTimed };

std::string_view to_string(Alignment alignment);  // "sync", "gpu-timed", "host-timed"
// InputError naming --alignment for anything else.
Alignment parse_alignment(std::string_view text);

struct SimulationOptions {
  double transfer_bytes = 0;  // per GPU per microbatch, each direction (see stage_transfer_bytes)
  // The link from stage a to stage b; unset = no transfer time.
  std::function<Link(int a, int b)> link = {};
  double clock_switch_latency_s = 0;
  // Each instruction's planned duration is multiplied by 1 + jitter·z, z standard normal clamped
  // to ±3, drawn from `seed` in the plan's stage-major order, before e is taken out of its work;
  // 0 = none.
  double jitter = 0;
  std::uint64_t seed = 1;
  std::string plan_source = "plan";  // names the plan in errors, e.g. its file
  Alignment alignment = Alignment::kGpuTimed;
  // The engine's host time exposed at each instruction's start, included in the plan's times; 0
  // for an engine that never syncs.
  double exposed_host_s = 0;
  int host_lead_instructions = 1;  // kHostTimed: how far the host issues ahead of the GPU
};

struct SimulatedInstruction {
  int stage = 0;
  std::size_t position = 0;  // index into plan.stages[stage]
  double start_s = 0, end_s = 0;
  double energy_j = 0;
  double freq_mhz = 0;         // the plan's clock
  double old_clock_s = 0;      // how long it ran at an earlier clock while its own was pending
  double old_freq_mhz = 0;     // that clock (== freq_mhz when none)
  double early_clock_s = 0;    // how long it ran at a later instruction's clock, landed early
  double early_freq_mhz = 0;   // that clock (== freq_mhz when none)
  double exposed_s = 0;        // idle at its start waiting for the host's first kernel (kSync)

  double foreign_clock_s() const { return old_clock_s + early_clock_s; }  // at a clock not its own
};

struct SimulatedTransfer {
  int from_stage = 0, to_stage = 0;
  std::size_t from_position = 0, to_position = 0;
  double start_s = 0, end_s = 0;
  double bytes = 0;
};

struct SimulationResult {
  double planned_time_s = 0, planned_energy_j = 0;  // the plan's own figures
  double time_s = 0, energy_j = 0;                  // realised
  double p_blocking_w = 0;
  int num_stages = 0;
  long clock_changes = 0;       // instructions whose clock differs from the one before on the stage
  long late_clock_changes = 0;  // of those, how many started before their clock was in effect
  long early_clock_changes = 0;  // instructions some of whose time ran at a later instruction's clock
  std::vector<SimulatedInstruction> instructions;  // stage-major, run order
  std::vector<SimulatedTransfer> transfers;
};

// Throws InputError when the plan's instructions do not follow its schedule (naming
// stages[s].instructions[k]; also one not longer than exposed_host_s), or an option is out of
// range (negative jitter, latency or exposure, naming its flag; a host lead below 1).
SimulationResult simulate(const plan::Plan& plan, const SimulationOptions& options);

}  // namespace kareus::sim
