// The pipeline solver's input: per (stage, slot) the discrete execution options, each a measured or
// modelled (time, energy) per GPU with the knob that produces it. A slot is what an instruction
// runs: a forward, a whole backward, or, in a zero-bubble schedule, a backward's input-gradient
// half B (`backward_input`) or weight-gradient half W (`backward_weight`), each with its own options
// and so its own clock. Tables for schedules without the split leave B and W empty.
//
// Read from the Perseus profile format `stage,instruction,frequency,time,energy` (seconds, joules);
// any further columns are carried, as strings, in the option's opaque knob. `instruction` names a
// slot; Perseus's own profiles measure forward and backward only.
//
// Example:
//   OptionTable table = read_option_table("gpt3.csv", /*num_stages=*/8);
//   for (const StageOption& o : table.at(0, InstructionType::kForward)) ...
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kareus/core/error.hpp"
#include "kareus/core/shared_json.hpp"
#include "kareus/schedule/instruction.hpp"

namespace kareus::pipeline {

struct StageOption {
  double freq_mhz = 0;
  double time_s = 0;
  double energy_j = 0;
  SharedJson knob;  // opaque to the solver; null when the table has no knob columns

  bool operator==(const StageOption&) const = default;
};

struct OptionTable {
  // options[stage · chunks + chunk][slot], slot indexed by OptionSlot.
  std::vector<std::array<std::vector<StageOption>, schedule::kNumOptionSlots>> options;
  // Model chunks per stage (an interleaved schedule's V), each with options of its own.
  int chunks = 1;

  int num_stages() const { return static_cast<int>(options.size()) / chunks; }
  const std::vector<StageOption>& at(int stage, int chunk, schedule::OptionSlot slot) const {
    return options.at(index(stage, chunk))[static_cast<std::size_t>(slot)];
  }
  std::vector<StageOption>& at(int stage, int chunk, schedule::OptionSlot slot) {
    return options.at(index(stage, chunk))[static_cast<std::size_t>(slot)];
  }
  // A table of one chunk per stage.
  const std::vector<StageOption>& at(int stage, schedule::OptionSlot slot) const { return at(stage, single_chunk(), slot); }
  std::vector<StageOption>& at(int stage, schedule::OptionSlot slot) { return at(stage, single_chunk(), slot); }
  const std::vector<StageOption>& at(int stage, schedule::InstructionType type) const { return at(stage, schedule::option_slot(type)); }
  std::vector<StageOption>& at(int stage, schedule::InstructionType type) { return at(stage, schedule::option_slot(type)); }
  // True when every stage has B and W options (what a zero-bubble schedule needs).
  bool splits_backward() const;

 private:
  std::size_t index(int stage, int chunk) const {
    KAREUS_CHECK(chunk >= 0 && chunk < chunks, "chunk outside the option table");
    return static_cast<std::size_t>(stage) * static_cast<std::size_t>(chunks) + static_cast<std::size_t>(chunk);
  }
  int single_chunk() const {
    KAREUS_CHECK(chunks == 1, "a per-stage lookup on an option table with chunks");
    return 0;
  }
};

// Reads a Perseus-format profile for a pipeline of `num_stages` stages. Throws InputError naming
// file, line and field on: a missing path, an empty file, missing required columns, non-numeric or
// non-finite fields, non-positive time, energy or frequency, an unknown instruction, a stage outside
// 0..num_stages-1, or a stage without forward or backward options. Rows of backward_input and
// backward_weight fill B and W; a stage with one of them needs the other.
OptionTable read_option_table(const std::filesystem::path& path, int num_stages);

// The options an instruction draws from: its stage's, chunk's and slot's.
inline const std::vector<StageOption>& options_of(const OptionTable& table, const schedule::Instruction& ins) {
  return table.at(ins.stage, ins.chunk, schedule::option_slot(ins));
}

// A table of `virtual_stages` chunks per stage from one of whole stages (a profile that measures
// whole stages, as Perseus's do): every chunk gets the stage's options with time and energy divided
// by V. The profile does not say how much of a stage is its embedding or LM head, so they are
// spread over its chunks too; compose, which knows, gives each chunk its own (compose.hpp).
OptionTable chunk_option_table(const OptionTable& table, int virtual_stages);

// Checks the table is complete for `num_stages` stages; throws InputError naming `source`.
void validate_option_table(const OptionTable& table, const std::string& source);

}  // namespace kareus::pipeline
