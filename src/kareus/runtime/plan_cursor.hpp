// Walks one pipeline rank through its stage's instructions of a `kareus-plan` (docs/plan-format.md)
// inside the training loop. At each instruction it checks that the loop runs what the plan says,
// asks the frequency controller for the instruction's SM clock (without waiting for it), and hands
// back the instruction's communication knobs (plan::InstructionKnobs: per partition key its SMs
// and launch slot, and the recomputed forward's under full checkpointing) for the framework to
// apply. A plan without knobs (a Perseus plan) gives empty knobs.
//
// Stragglers: a cursor may hold a whole frontier (plans.json). A data-parallel job runs as fast as
// its slowest pipeline, so when another pipeline is slower the others can slow to it and save
// energy: set_target_time(seconds, iteration) (or on_straggler) picks the least-energy plan whose
// iteration time meets `seconds` (plan::select_plan with a deadline target, as `kareus plan
// --target deadline:` does) and switches to it when `iteration` begins. The switch never happens
// inside an iteration, and since every rank of a pipeline must run the same plan, the call names
// the iteration it takes effect at: give every rank the same value (e.g. the step number agreed
// with the straggler report, plus one), and it switches at the same iteration on all of them.
//
// When the clock changes: by default the clock is asked for when the host begins the instruction,
// which in a framework that runs ahead of the GPU is early (the previous instruction's tail runs
// at it), unless the loop synchronises the device first, as Zeus's optimizer does, at the cost of
// the host's issue latency at every instruction. Given the framework's stream (set_stream), the
// cursor enqueues a marker there instead and the clock is asked for when the GPU reaches the
// instruction, the host never waiting (stream_marker.hpp).
//
// Thread-safety: not thread-safe; one cursor per rank, driven from the training loop's thread.
// Example:
//   PlanCursor cursor = PlanCursor::open_frontier("plans.json", /*stage=*/rank, &controller);
//   for (long step = 0;; ++step) {                  // one training iteration
//     const CommKnobs& knobs = cursor.on_instruction_begin("forward");
//     if (const auto* attn = knobs.find("fwd_attn")) use(attn->sms, attn->slot);
//     ...
//     cursor.on_step_end();
//     if (straggler_time_s) cursor.on_straggler(*straggler_time_s, step + 2);
//   }
#pragma once

#include <cstddef>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kareus/plan/plan.hpp"
#include "kareus/plan/select.hpp"
#include "kareus/runtime/frequency_controller.hpp"
#include "kareus/runtime/stream_marker.hpp"

namespace kareus::runtime {

using CommKnobs = plan::InstructionKnobs;

class PlanCursor {
 public:
  // `controller` may be null (knobs only, no clocks). Throws InputError when `stage` is not one of
  // the plan's, a clock is not a positive number, or a knob breaks the schema. `source` names the
  // plan in errors.
  PlanCursor(const plan::Plan& plan, int stage, FrequencyController* controller,
             std::string source = "plan");
  // A frontier of plans of one job (same schedule, stages and microbatches, else InputError),
  // starting on plans[start].
  PlanCursor(const std::vector<plan::Plan>& frontier, std::size_t start, int stage,
             FrequencyController* controller, std::string source = "plans");
  // Reads the plan with plan::read_plan (a kareus-plan file, or plan `index` of a plan set).
  static PlanCursor open(const std::filesystem::path& path, int stage,
                         FrequencyController* controller,
                         std::optional<std::size_t> index = std::nullopt);
  // Reads every plan of a plan set (plan::read_plan_set), validating each and keeping this rank's
  // stage of it as it is read, and starts on the one `start` selects.
  static PlanCursor open_frontier(const std::filesystem::path& path, int stage,
                                  FrequencyController* controller, plan::Target start = {});

  // `type` is one of the plan format's instruction types: "forward", "backward", or a zero-bubble
  // schedule's "backward_input" (B) and "backward_weight" (W); `microbatch`, when given, is checked
  // too. Throws InputError naming the position when the instruction is not the plan's next one, or
  // when the iteration's instructions are all consumed. The reference stays valid while the cursor
  // lives. The InstructionType overload means a forward or a whole backward.
  const CommKnobs& on_instruction_begin(std::string_view type,
                                        std::optional<int> microbatch = std::nullopt);
  const CommKnobs& on_instruction_begin(schedule::InstructionType type,
                                        std::optional<int> microbatch = std::nullopt);
  const CommKnobs& on_instruction_begin(schedule::OptionSlot type,
                                        std::optional<int> microbatch = std::nullopt);
  // From the next instruction on, ask for each clock when the GPU reaches the instruction on
  // `stream` (null: when the host begins it, the default). Every pending marker keeps
  // `controller_owner` alive when given (the C and Python APIs pass theirs); otherwise the
  // controller must outlive the stream's pending work.
  void set_stream(std::shared_ptr<StreamMarker> stream, std::shared_ptr<FrequencyController> controller_owner = {});
  bool gpu_timed() const { return stream_ != nullptr; }

  // Ends the iteration. Throws InputError when some of its instructions were not run; the cursor
  // rewinds to the iteration's start either way, and a switch due at the next iteration happens.
  void on_step_end();

  // From iteration `effective_iteration` on (0-based, as iteration() counts), run the frontier's
  // least-energy plan with time_s <= `target_time_s`, or the fastest plan when none is that fast.
  // Returns that plan's index. `effective_iteration` must not have begun on this rank: at least
  // iteration() between iterations (position() == 0), iteration() + 1 inside one; otherwise, or on
  // a time that is not positive, InputError. A later call for the same iteration replaces it.
  std::size_t set_target_time(double target_time_s, long effective_iteration);
  // The same, with the time the slowest data-parallel pipeline (the straggler) takes per iteration.
  std::size_t on_straggler(double iteration_time_s, long effective_iteration) {
    return set_target_time(iteration_time_s, effective_iteration);
  }

  int stage() const { return stage_; }
  long iteration() const { return iteration_; }       // 0-based, counts on_step_end calls
  std::size_t position() const { return position_; }  // instructions begun this iteration
  std::size_t instructions_per_iteration() const { return current().instructions(stage_).size(); }
  const plan::PlannedInstruction& instruction(std::size_t position) const;
  const CommKnobs& knobs(std::size_t position) const;
  // The plan this iteration runs, and its index in the frontier (0 for a single plan). Of its stages
  // only this rank's holds instructions: the cursor drops the others when it loads a plan.
  const plan::Plan& plan() const { return current().plan; }
  std::size_t plan_index() const { return plan_index_; }
  std::size_t frontier_size() const { return plans_.size(); }

 private:
  // A frontier whose plans were validated as they were read (open_frontier), and may hold this
  // rank's stage alone.
  struct Validated {};
  PlanCursor(Validated, const std::vector<plan::Plan>& frontier, std::size_t start, int stage,
             FrequencyController* controller, std::string source);
  void load_frontier(const std::vector<plan::Plan>& frontier, std::size_t start);

  // One plan, as this rank's stage runs it.
  struct StagePlan {
    plan::Plan plan;  // this rank's stage only
    const std::vector<plan::PlannedInstruction>& instructions(int stage) const {
      return plan.stages[static_cast<std::size_t>(stage)];
    }
    // Shared by the instructions whose knob is one tree (plan::SharedJson): a frontier's plans take
    // the same few hundred knobs tens of thousands of times.
    std::vector<std::shared_ptr<const CommKnobs>> knobs;
    std::vector<int> clocks_mhz;
  };
  // Each knob tree's decoded knobs, while plans are loaded.
  using DecodedKnobs = std::unordered_map<const nlohmann::json*, std::shared_ptr<const CommKnobs>>;
  StagePlan load(const plan::Plan& plan, const std::string& source, DecodedKnobs& decoded) const;
  const StagePlan& current() const { return plans_[plan_index_]; }
  void apply_due_switch();
  std::string describe(std::size_t position) const;
  std::string field(std::size_t position) const;

  int stage_ = 0;
  FrequencyController* controller_ = nullptr;
  std::shared_ptr<StreamMarker> stream_;
  std::shared_ptr<FrequencyController> controller_owner_;
  std::string source_;
  std::vector<StagePlan> plans_;
  std::size_t plan_index_ = 0;
  std::map<long, std::size_t> switches_;  // iteration -> plan index, not yet begun
  std::size_t position_ = 0;
  long iteration_ = 0;
};

}  // namespace kareus::runtime
