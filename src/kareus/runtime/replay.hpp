// Replaying plans through the runtime without hardware: every stage's plan cursor, frequency
// controller and energy monitor run against a simulated GPU, on an injected clock that follows the
// plans' instruction times, so the whole loop runs instantly and deterministically (`kareus replay`).
//
// Each fake GPU draws P_blocking when idle and, while an instruction runs, a load chosen so that it
// draws the instruction's planned power at the instruction's planned clock (the load scales the A100
// preset's DVFS model of dynamic power, stretched to the plans' top clock). The measured energy
// therefore equals the plan's exactly when, and only when, every clock reaches the device before its
// instruction starts; a clock that is late, wrong or snapped shows up as a difference.
//
// With a straggler the plans are a whole frontier: the pipeline starts on `start_index` (its fastest
// plan), and from iteration N on another data-parallel pipeline takes F times that plan's time, so
// every iteration lasts that long (the fakes idle at P_blocking meanwhile). Every stage's cursor is
// told so up front (on_straggler with iteration N) and switches at N to the least-energy plan that
// still meets the straggler's time.
//
// Example:
//   ReplayReport r = replay_plans({plan}, 0, {.iterations = 3, .source = "plan.json"});
//   r.iterations[0].time_s == plan.time_s;   // when every clock lands in time
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "kareus/plan/plan.hpp"

namespace kareus::runtime {

struct ReplayStraggler {
  double slowdown = 1;  // the straggler's iteration time over the start plan's
  long iteration = 0;   // from which iteration on
};

struct ReplayOptions {
  int iterations = 1;
  std::optional<ReplayStraggler> straggler;
  std::optional<std::filesystem::path> energy_log;  // the monitor's CSV
  std::string source;                               // names the plans in errors
};

struct ReplayIteration {
  std::size_t plan_index = 0;
  double time_s = 0;
  std::vector<double> stage_energy_j;
  double energy_j = 0;          // over the stages
  double planned_energy_j = 0;  // its plan's, with any wait for the straggler at P_blocking
  double on_start_plan_j = 0;   // the start plan's, waiting alike: what staying would have cost
};

struct ReplayStage {
  double busy_s = 0;  // means over the iterations
  double energy_j = 0;
  std::size_t instructions = 0;
  long clock_changes = 0;
};

struct ReplayReport {
  std::vector<ReplayIteration> iterations;
  std::vector<ReplayStage> stages;
  double straggler_s = 0;      // the straggler's iteration time (0 without one)
  double worst_relative = 0;   // the largest relative difference from what was planned
};

// Plans of one job, validated (plan/validate.hpp); with a straggler a frontier, started on
// `start_index`. Throws InputError for iterations < 1 or a start outside the plans.
ReplayReport replay_plans(const std::vector<plan::Plan>& plans, std::size_t start_index, const ReplayOptions& options);

}  // namespace kareus::runtime
