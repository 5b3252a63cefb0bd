// What a stage runs: an instruction (a forward, or a backward whole or split) of one microbatch on
// one model chunk, and the option slot it draws its clock and knob from. The vocabulary every
// schedule, the solver, the plan format and the runtime share.
//
// Example:
//   Instruction ins{.stage = 0, .type = InstructionType::kBackward, .microbatch = 3,
//                   .chunk = 0, .part = BackwardPart::kInputGradient};
//   to_string(option_slot(ins));   // "backward_input"
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace kareus::schedule {

enum class InstructionType : std::uint8_t { kForward = 0, kBackward = 1 };

std::string_view to_string(InstructionType type);
std::optional<InstructionType> parse_instruction_type(std::string_view text);

// Which part of a backward an instruction runs: all of it, or, in a zero-bubble schedule, the
// input gradient (B, which the previous stage waits for) or the weight gradient (W, which nothing
// waits for).
enum class BackwardPart : std::uint8_t { kWhole, kInputGradient, kWeightGradient };

// The option set an instruction draws from: forward, whole backward, or a split backward's B or W.
enum class OptionSlot : std::uint8_t { kForward = 0, kBackward = 1, kBackwardInput = 2, kBackwardWeight = 3 };
inline constexpr std::size_t kNumOptionSlots = 4;
inline constexpr OptionSlot kAllOptionSlots[] = {OptionSlot::kForward, OptionSlot::kBackward,
                                                 OptionSlot::kBackwardInput, OptionSlot::kBackwardWeight};
constexpr OptionSlot option_slot(InstructionType type) {
  return type == InstructionType::kForward ? OptionSlot::kForward : OptionSlot::kBackward;
}
// "forward", "backward", "backward_input", "backward_weight": the plan format's instruction types.
std::string_view to_string(OptionSlot slot);
std::optional<OptionSlot> parse_option_slot(std::string_view text);

struct Instruction {
  int stage = 0;
  InstructionType type = InstructionType::kForward;
  int microbatch = 0;
  int chunk = 0;  // the stage's model chunk (interleaved: virtual stage chunk·stages + stage)
  BackwardPart part = BackwardPart::kWhole;  // backwards only
  bool operator==(const Instruction&) const = default;
};

constexpr OptionSlot option_slot(const Instruction& ins) {
  if (ins.type == InstructionType::kForward) return OptionSlot::kForward;
  switch (ins.part) {
    case BackwardPart::kInputGradient: return OptionSlot::kBackwardInput;
    case BackwardPart::kWeightGradient: return OptionSlot::kBackwardWeight;
    case BackwardPart::kWhole: break;
  }
  return OptionSlot::kBackward;
}

}  // namespace kareus::schedule
