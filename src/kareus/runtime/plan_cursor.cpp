#include "kareus/runtime/plan_cursor.hpp"

#include <fmt/format.h>

#include <cmath>

#include "kareus/core/error.hpp"

namespace kareus::runtime {

CommKnobs partition_knobs(const nlohmann::json& knob) {
  CommKnobs knobs;
  if (!knob.is_object()) return knobs;
  const nlohmann::json& source =
      knob.contains("partitions") && knob["partitions"].is_object() ? knob["partitions"] : knob;
  for (const auto& [key, value] : source.items()) {
    if (value.is_object()) knobs.emplace(key, value);
  }
  return knobs;
}

PlanCursor::PlanCursor(plan::Plan plan, int stage, FrequencyController* controller,
                       std::string source)
    : plan_(std::move(plan)), stage_(stage), controller_(controller), source_(std::move(source)) {
  if (stage < 0 || stage >= static_cast<int>(plan_.stages.size())) {
    throw InputError({source_, 0, 0, "stages"},
                     fmt::format("stage {} is not in the plan, which has {} stage{}", stage,
                                 plan_.stages.size(), plan_.stages.size() == 1 ? "" : "s"));
  }
  instructions_ = plan_.stages[static_cast<std::size_t>(stage)];
  if (instructions_.empty()) {
    throw InputError({source_, 0, 0, fmt::format("stages[{}].instructions", stage)}, "is empty");
  }
  for (std::size_t k = 0; k < instructions_.size(); ++k) {
    double f = instructions_[k].freq_mhz;
    if (!std::isfinite(f) || f < 1 || f > 1e6) {
      throw InputError({source_, 0, 0, field(k) + ".freq_mhz"},
                       fmt::format("{} is not a usable SM clock in MHz", f));
    }
    clocks_mhz_.push_back(static_cast<int>(std::lround(f)));
    knobs_.push_back(partition_knobs(instructions_[k].knob));
  }
}

PlanCursor PlanCursor::open(const std::filesystem::path& path, int stage,
                            FrequencyController* controller, std::optional<std::size_t> index) {
  std::string source = index ? fmt::format("{} plans[{}]", path.string(), *index) : path.string();
  return PlanCursor(plan::read_plan(path, index), stage, controller, source);
}

const plan::PlannedInstruction& PlanCursor::instruction(std::size_t position) const {
  if (position >= instructions_.size()) {
    throw InputError(fmt::format("position {} is past stage {}'s {} instructions", position, stage_,
                                 instructions_.size()));
  }
  return instructions_[position];
}

std::string PlanCursor::field(std::size_t position) const {
  return fmt::format("stages[{}].instructions[{}]", stage_, position);
}

std::string PlanCursor::describe(std::size_t position) const {
  const auto& i = instructions_[position];
  return fmt::format("{} of microbatch {}", pipeline::to_string(i.type), i.microbatch);
}

const CommKnobs& PlanCursor::on_instruction_begin(std::string_view type,
                                                  std::optional<int> microbatch) {
  auto parsed = pipeline::parse_instruction_type(type);
  if (!parsed) {
    throw InputError(
        fmt::format("instruction type '{}' is neither \"forward\" nor \"backward\"", type));
  }
  return on_instruction_begin(*parsed, microbatch);
}

const CommKnobs& PlanCursor::on_instruction_begin(pipeline::InstructionType type,
                                                  std::optional<int> microbatch) {
  if (position_ >= instructions_.size()) {
    throw InputError(
        {source_, 0, 0, fmt::format("stages[{}]", stage_)},
        fmt::format("iteration {}: the training loop began a {} instruction after all {} "
                    "of stage {}'s instructions; call on_step_end() after each iteration",
                    iteration_, pipeline::to_string(type), instructions_.size(), stage_));
  }
  const auto& expected = instructions_[position_];
  if (expected.type != type || (microbatch && *microbatch != expected.microbatch)) {
    std::string began =
        microbatch ? fmt::format("{} of microbatch {}", pipeline::to_string(type), *microbatch)
                   : fmt::format("a {}", pipeline::to_string(type));
    throw InputError(
        {source_, 0, 0, field(position_)},
        fmt::format("iteration {}, instruction {} of {} on stage {}: the training loop "
                    "began {}, but the plan runs {} here; the job's pipeline schedule "
                    "differs from the plan's ({}, {} microbatches)",
                    iteration_, position_, instructions_.size(), stage_, began, describe(position_),
                    pipeline::to_string(plan_.schedule), plan_.num_microbatches));
  }
  if (controller_) controller_->request_sm_clock(clocks_mhz_[position_]);
  return knobs_[position_++];
}

void PlanCursor::on_step_end() {
  std::size_t consumed = position_;
  position_ = 0;
  long iteration = iteration_++;
  if (consumed != instructions_.size()) {
    throw InputError(
        {source_, 0, 0, field(consumed)},
        fmt::format("iteration {} ended after {} of stage {}'s {} instructions; the "
                    "next one was {}",
                    iteration, consumed, stage_, instructions_.size(), describe(consumed)));
  }
}

}  // namespace kareus::runtime
