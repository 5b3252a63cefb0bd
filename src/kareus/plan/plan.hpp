// A pipeline plan: for every stage, its instructions in run order with the clock, the knob and the
// (time, energy) of the option each one takes. Read and written as the documented `kareus-plan`
// JSON format (docs/plan-format.md), which the runtime loads inside a training job.
//
// The format alone: the solver's frontier point becomes a plan in planner/make_plan.hpp.
//
// Example:
//   Plan plan = read_plan("plan.json");
//   write_plan(plan, "copy.json");
#pragma once

#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kareus/core/shared_json.hpp"
#include "kareus/schedule/schedule.hpp"

namespace kareus::plan {

inline constexpr const char* kPlanFormat = "kareus-plan";
inline constexpr int kPlanFormatVersion = 1;
inline constexpr const char* kPlanSetFormat = "kareus-plan-set";

struct PlannedInstruction {
  schedule::InstructionType type = schedule::InstructionType::kForward;
  int microbatch = 0;
  double freq_mhz = 0;
  SharedJson knob;  // null when the option has none (a Perseus plan); shared with the option it took
  double time_s = 0;
  double energy_j = 0;
  int chunk = 0;  // the stage's model chunk (interleaved schedules; 0 otherwise)
  // A backward's part: whole, or a zero-bubble schedule's B ("backward_input") or W ("backward_weight").
  schedule::BackwardPart part = schedule::BackwardPart::kWhole;
  bool operator==(const PlannedInstruction&) const = default;
};

struct Plan {
  schedule::ScheduleKind schedule = schedule::ScheduleKind::k1F1B;
  int num_stages = 0;
  int num_microbatches = 0;
  int virtual_stages = 1;  // model chunks per stage (interleaved)
  double p_blocking_w = 0;
  double unit_time_s = 0;
  std::string energy_scope;  // which GPUs the energy covers
  double time_s = 0;
  double energy_j = 0;
  nlohmann::json source;  // where the options came from (free-form, for people)
  std::vector<std::vector<PlannedInstruction>> stages;  // per stage, run order
  bool operator==(const Plan&) const = default;
};

// One partition's communication knob as `kareus plan` writes it under an instruction's `knob`
// (docs/plan-format.md, "Kareus knobs"): the partition key, the launch slot of the other
// nanobatch's collective and the SMs it gets.
struct PartitionKnob {
  std::string key;
  std::string slot;
  int sms = 0;
  bool operator==(const PartitionKnob&) const = default;
};

// The communication knobs of one instruction: its own partitions and, with full activation
// checkpointing, those of the forward recomputed before a backward. Both empty for a clock-only
// plan (a Perseus profile's extra columns are not partition knobs).
struct InstructionKnobs {
  std::vector<PartitionKnob> partitions;
  std::vector<PartitionKnob> recompute;
  bool empty() const { return partitions.empty() && recompute.empty(); }
  // The knob of `key` among `partitions` (not `recompute`); null when absent.
  const PartitionKnob* find(std::string_view key) const;
  bool operator==(const InstructionKnobs&) const = default;
};

// Reads an instruction's `knob`: a value without "partitions" has no Kareus knobs; one with it
// must follow the schema, else an InputError naming `path` (e.g.
// stages[0].instructions[2].knob.partitions[1].sms) in `source`.
InstructionKnobs instruction_knobs(const nlohmann::json& knob, const std::string& path,
                                   const std::string& source);
// {"partitions": [...], "recompute": [...]}, both always present.
nlohmann::json to_json(const InstructionKnobs& knobs);

// The energy-scope sentence every plan and frontier carries.
std::string energy_scope_for(int num_stages);

// `plan` with the instructions of `stage` alone, the other stages' lists empty: what one pipeline rank
// keeps of it.
Plan with_stage_only(const Plan& plan, std::size_t stage);

nlohmann::json to_json(const Plan& plan);
// Throws InputError naming the JSON path at fault (e.g. stages[1].instructions[3].freq_mhz).
// Equal knobs share one tree: within the plan, and with `knobs` with every plan read through that
// pool (a set's plans take the same knobs thousands of times).
Plan plan_from_json(const nlohmann::json& json, const std::string& source, SharedJsonPool* knobs = nullptr);

void write_plan(const Plan& plan, const std::filesystem::path& path);
// A kareus-plan-set file (`{"format": "kareus-plan-set", "version": 1, "plans": [...]}`), each plan
// with its `frontier_index`, its row in the frontier it was taken from (frontier.csv); the two lists
// are parallel.
void write_plan_set(const std::vector<Plan>& plans, const std::vector<std::size_t>& frontier_indices,
                    const std::filesystem::path& path);
// Reads a kareus-plan file, or plan `index` of a kareus-plan-set file (as `kareus frontier --out`
// writes); a set without an index, or an index out of range, is an InputError.
Plan read_plan(const std::filesystem::path& path, std::optional<std::size_t> index = std::nullopt);
// How a consumer names a plan it read, in errors: the file, or "<file> plans[i]" for plan i of a set.
std::string plan_source(const std::filesystem::path& path, std::optional<std::size_t> index = std::nullopt);
// Every plan of a kareus-plan-set file (a frontier, as `kareus frontier --out` and `kareus plan
// --out` write it), in file order; a single kareus-plan file reads as a set of one. `as_read`, when
// given, takes each plan (its index, its plan_source name and itself) as soon as it is parsed,
// before the next is: a reader that keeps part of each plan (a pipeline rank, its stage) never
// holds the whole set.
using PlanReadHook = std::function<void(std::size_t index, const std::string& source, Plan& plan)>;
std::vector<Plan> read_plan_set(const std::filesystem::path& path, const PlanReadHook& as_read = {});

}  // namespace kareus::plan
