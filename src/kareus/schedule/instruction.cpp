#include "kareus/schedule/instruction.hpp"

namespace kareus::schedule {

std::string_view to_string(InstructionType type) {
  return type == InstructionType::kForward ? "forward" : "backward";
}

std::optional<InstructionType> parse_instruction_type(std::string_view text) {
  if (text == "forward") return InstructionType::kForward;
  if (text == "backward") return InstructionType::kBackward;
  return std::nullopt;
}

namespace {
constexpr std::string_view kSlotNames[] = {"forward", "backward", "backward_input", "backward_weight"};
}  // namespace

std::string_view to_string(OptionSlot slot) { return kSlotNames[static_cast<std::size_t>(slot)]; }

std::optional<OptionSlot> parse_option_slot(std::string_view text) {
  for (OptionSlot slot : kAllOptionSlots) {
    if (to_string(slot) == text) return slot;
  }
  return std::nullopt;
}

}  // namespace kareus::schedule
