// Replays one training iteration of a plan on its pipeline's GPUs, event by event, with what the
// planner's DAG leaves out: the P2P transfers of activations and gradients between stages, the
// latency of each clock change, and optional per-instruction jitter. The result sits beside the
// planned figures, with every instruction's and transfer's realised start and end.
//
// The model: an instruction starts when its stage's previous instruction has finished and the
// transfers it waits for have arrived (a transfer leaves when its producer finishes and takes the
// link's latency plus bytes / bandwidth, on its own stream, without contending with others). A
// clock is requested when the stage's previous instruction ends and takes effect the switch
// latency later; until then the instruction runs at the clock in effect, at a rate in proportion
// to the clock (compute-bound), drawing its planned dynamic energy per unit of work plus P_blocking
// for the longer time. Idle GPUs draw P_blocking. Energy covers one GPU per stage, as the plan's.
// With no transfers, no switch latency and no jitter the replay reproduces the plan's time and
// energy exactly.
//
// Thread-safety: simulate() is a pure function of its arguments.
// Example:
//   SimulationResult r = simulate(plan, {.transfer_bytes = 32e6, .link = links, .seed = 1});
//   fmt::print("{} s planned, {} s realised\n", r.planned_time_s, r.time_s);
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kareus/plan/plan.hpp"
#include "kareus/sim/cluster.hpp"

namespace kareus::sim {

struct SimulationOptions {
  double transfer_bytes = 0;  // per GPU per microbatch, each direction (see stage_transfer_bytes)
  // The link from stage a to stage b; unset = no transfer time.
  std::function<Link(int a, int b)> link = {};
  double clock_switch_latency_s = 0;
  // Each instruction's duration is multiplied by 1 + jitter·z, z standard normal clamped to ±3,
  // drawn from `seed` in the plan's stage-major order; 0 = none.
  double jitter = 0;
  std::uint64_t seed = 1;
  std::string plan_source = "plan";  // names the plan in errors, e.g. its file
};

struct SimulatedInstruction {
  int stage = 0;
  std::size_t position = 0;  // index into plan.stages[stage]
  double start_s = 0, end_s = 0;
  double energy_j = 0;
  double freq_mhz = 0;         // the plan's clock
  double old_clock_s = 0;      // how long it ran at the previous clock while the switch was pending
  double old_freq_mhz = 0;     // that clock (== freq_mhz when none)
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
  std::vector<SimulatedInstruction> instructions;  // stage-major, run order
  std::vector<SimulatedTransfer> transfers;
};

// Throws InputError when the plan's instructions do not follow its schedule (naming
// stages[s].instructions[k]), or an option is out of range (negative jitter or latency).
SimulationResult simulate(const plan::Plan& plan, const SimulationOptions& options);

}  // namespace kareus::sim
