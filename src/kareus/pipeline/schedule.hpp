// Pipeline schedules: the order in which each stage runs the forward and backward instructions of
// the microbatches of one training iteration.
//
// Example:
//   PipelineSchedule s = PipelineSchedule::make(ScheduleKind::k1F1B, /*stages=*/4, /*microbatches=*/8);
//   for (const Instruction& i : s.stage_order(0)) ...
#pragma once

#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "kareus/pipeline/option_table.hpp"

namespace kareus::pipeline {

enum class ScheduleKind { k1F1B, kGPipe };

std::string_view to_string(ScheduleKind kind);
std::optional<ScheduleKind> parse_schedule_kind(std::string_view text);

struct Instruction {
  int stage = 0;
  InstructionType type = InstructionType::kForward;
  int microbatch = 0;
  bool operator==(const Instruction&) const = default;
};

class PipelineSchedule {
 public:
  // 1F1B as Perseus and Merak order it: stage s runs min(S-s-1, M) warm-up forwards, then
  // alternates forward and backward, then drains the remaining backwards. GPipe: every forward,
  // then every backward, in microbatch order. Throws InputError when stages or microbatches < 1.
  static PipelineSchedule make(ScheduleKind kind, int num_stages, int num_microbatches);

  ScheduleKind kind() const { return kind_; }
  int num_stages() const { return static_cast<int>(order_.size()); }
  int num_microbatches() const { return num_microbatches_; }
  std::span<const Instruction> stage_order(int stage) const {
    return order_.at(static_cast<std::size_t>(stage));
  }
  std::size_t num_instructions() const { return 2 * order_.size() * num_microbatches_; }

 private:
  ScheduleKind kind_ = ScheduleKind::k1F1B;
  int num_microbatches_ = 0;
  std::vector<std::vector<Instruction>> order_;
};

}  // namespace kareus::pipeline
