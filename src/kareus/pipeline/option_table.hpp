// The pipeline solver's input: per (stage, instruction type) the discrete execution options, each a
// measured or modelled (time, energy) per GPU with the knob that produces it.
//
// Read from the Perseus profile format `stage,instruction,frequency,time,energy` (seconds, joules);
// any further columns are carried, as strings, in the option's opaque knob.
//
// Example:
//   OptionTable table = read_option_table("gpt3.csv", /*num_stages=*/8);
//   for (const StageOption& o : table.at(0, InstructionType::kForward)) ...
#pragma once

#include <array>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kareus::pipeline {

enum class InstructionType : std::uint8_t { kForward = 0, kBackward = 1 };

std::string_view to_string(InstructionType type);
std::optional<InstructionType> parse_instruction_type(std::string_view text);

struct StageOption {
  double freq_mhz = 0;
  double time_s = 0;
  double energy_j = 0;
  nlohmann::json knob;  // opaque to the solver; null when the table has no knob columns

  bool operator==(const StageOption&) const = default;
};

struct OptionTable {
  // options[stage][type], type indexed by InstructionType.
  std::vector<std::array<std::vector<StageOption>, 2>> options;

  int num_stages() const { return static_cast<int>(options.size()); }
  const std::vector<StageOption>& at(int stage, InstructionType type) const {
    return options.at(static_cast<std::size_t>(stage))[static_cast<std::size_t>(type)];
  }
  std::vector<StageOption>& at(int stage, InstructionType type) {
    return options.at(static_cast<std::size_t>(stage))[static_cast<std::size_t>(type)];
  }
};

// Reads a Perseus-format profile for a pipeline of `num_stages` stages. Throws InputError naming
// file, line and field on: a missing path, an empty file, missing required columns, non-numeric or
// non-finite fields, non-positive time, energy or frequency, an unknown instruction, a stage outside
// 0..num_stages-1, or a stage without forward or backward options.
OptionTable read_option_table(const std::filesystem::path& path, int num_stages);

// Checks the table is complete for `num_stages` stages; throws InputError naming `source`.
void validate_option_table(const OptionTable& table, const std::string& source);

}  // namespace kareus::pipeline
