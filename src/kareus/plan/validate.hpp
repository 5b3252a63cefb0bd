// What every consumer of a plan requires of it, checked in one place: `kareus simulate`, `replay`,
// `export` (both formats), `hw check --plans` and the runtime's cursors (C++, C and Python) call
// validate() on what they read before anything else, so the same malformed file gets the same
// located one-line error everywhere and nothing is written.
//
// A plan is valid when:
// - every stage lists exactly the instructions its schedule runs there, in order (type,
//   microbatch, model chunk, B/W part);
// - every instruction has a positive finite time, a finite non-negative energy and a positive
//   finite clock, within the GPU's range when the plan names its GPU (`source.gpu`);
// - every partition knob (docs/plan-format.md, "Kareus knobs") follows the schema, gives an
//   overlapped collective at least 1 SM and, with `source.gpu`, fewer than the GPU's SMs, and names
//   a slot its partition has when the plan lists its partitions' launch slots (`source.launch_slots`);
// - the plan's own time is positive and finite and its energy finite (the cursor selects by them).
// A set is valid when each plan is and all are of one job (schedule, stages, microbatches, chunks).
//
// Example:
//   Plan p = read_plan("plan.json");
//   validate(p, "plan.json");   // InputError, e.g. "plan.json: stages[0].instructions[3].freq_mhz: ..."
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kareus/hardware/gpu.hpp"
#include "kareus/plan/plan.hpp"

namespace kareus::plan {

// What a plan records of its GPU under `source.gpu` for validate(): its name, clock range and SMs.
nlohmann::json gpu_limits_json(const hardware::GpuSpec& gpu);

// Throws InputError naming `source` and the JSON path at fault.
void validate(const Plan& plan, const std::string& source);
// Each plan as "<source> plans[i]", then that they are of one job; an empty set is an error.
void validate_set(const std::vector<Plan>& plans, const std::string& source);
// That `plan` (named `where` in the error) runs the job `first` does: its schedule, stages,
// microbatches and chunks.
void check_same_job(const Plan& plan, const Plan& first, const std::string& where);

}  // namespace kareus::plan
