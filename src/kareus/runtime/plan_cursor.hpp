// Walks one pipeline rank through its stage's instructions of a `kareus-plan` (docs/plan-format.md)
// inside the training loop. At each instruction it checks that the loop runs what the plan says,
// asks the frequency controller for the instruction's SM clock (without waiting for it), and hands
// back the communication knobs of each partition for the framework to apply.
//
// Knobs: an instruction's `knob` object maps partition keys (fwd_attn, bwd_mlp, ...) to that
// partition's knob object, either directly or under "partitions"; other members (e.g. columns
// carried from a Perseus profile) are not partition knobs. A plan without knobs (a Perseus plan)
// gives an empty map.
//
// Thread-safety: not thread-safe; one cursor per rank, driven from the training loop's thread.
// Example:
//   PlanCursor cursor = PlanCursor::open("plan.json", /*stage=*/rank, &controller);
//   for (...) {                                    // one training iteration
//     const CommKnobs& knobs = cursor.on_instruction_begin("forward");
//     ...
//     cursor.on_step_end();
//   }
#pragma once

#include <cstddef>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kareus/plan/plan.hpp"
#include "kareus/runtime/frequency_controller.hpp"

namespace kareus::runtime {

using CommKnobs = std::map<std::string, nlohmann::json>;  // partition key -> knob

// The partition knobs of one instruction's `knob` (see above).
CommKnobs partition_knobs(const nlohmann::json& knob);

class PlanCursor {
 public:
  // `controller` may be null (knobs only, no clocks). Throws InputError when `stage` is not one of
  // the plan's or a clock is not a positive number. `source` names the plan in errors.
  PlanCursor(plan::Plan plan, int stage, FrequencyController* controller,
             std::string source = "plan");
  // Reads the plan with plan::read_plan (a kareus-plan file, or plan `index` of a plan set).
  static PlanCursor open(const std::filesystem::path& path, int stage,
                         FrequencyController* controller,
                         std::optional<std::size_t> index = std::nullopt);

  // `type` is "forward" or "backward"; `microbatch`, when given, is checked too. Throws InputError
  // naming the position when the instruction is not the plan's next one, or when the iteration's
  // instructions are all consumed. The reference stays valid while the cursor lives.
  const CommKnobs& on_instruction_begin(std::string_view type,
                                        std::optional<int> microbatch = std::nullopt);
  const CommKnobs& on_instruction_begin(pipeline::InstructionType type,
                                        std::optional<int> microbatch = std::nullopt);
  // Ends the iteration. Throws InputError when some of its instructions were not run; the cursor
  // rewinds to the iteration's start either way.
  void on_step_end();

  int stage() const { return stage_; }
  long iteration() const { return iteration_; }       // 0-based, counts on_step_end calls
  std::size_t position() const { return position_; }  // instructions begun this iteration
  std::size_t instructions_per_iteration() const { return instructions_.size(); }
  const plan::PlannedInstruction& instruction(std::size_t position) const;
  const plan::Plan& plan() const { return plan_; }

 private:
  std::string describe(std::size_t position) const;
  std::string field(std::size_t position) const;

  plan::Plan plan_;
  int stage_ = 0;
  FrequencyController* controller_ = nullptr;
  std::string source_;
  std::vector<plan::PlannedInstruction> instructions_;
  std::vector<CommKnobs> knobs_;
  std::vector<int> clocks_mhz_;
  std::size_t position_ = 0;
  long iteration_ = 0;
};

}  // namespace kareus::runtime
