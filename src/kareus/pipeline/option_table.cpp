#include "kareus/pipeline/option_table.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "kareus/core/error.hpp"
#include "kareus/interop/perseus_profile.hpp"

namespace kareus::pipeline {

bool OptionTable::splits_backward() const {
  return num_stages() > 0 && std::all_of(options.begin(), options.end(), [](const auto& stage) {
           return !stage[static_cast<std::size_t>(schedule::OptionSlot::kBackwardInput)].empty() &&
                  !stage[static_cast<std::size_t>(schedule::OptionSlot::kBackwardWeight)].empty();
         });
}

OptionTable chunk_option_table(const OptionTable& table, int virtual_stages) {
  KAREUS_CHECK(virtual_stages >= 1, "virtual stages must be at least 1");
  KAREUS_CHECK(table.chunks == 1, "the table already has chunks");
  OptionTable out;
  out.chunks = virtual_stages;
  for (const auto& stage : table.options) {
    for (int chunk = 0; chunk < virtual_stages; ++chunk) {
      auto& per_slot = out.options.emplace_back(stage);
      for (auto& options : per_slot) {
        for (StageOption& o : options) {
          o.time_s /= virtual_stages;
          o.energy_j /= virtual_stages;
        }
      }
    }
  }
  return out;
}

OptionTable read_option_table(const std::filesystem::path& path, int num_stages) {
  using Column = interop::PerseusProfile::Column;
  if (num_stages < 1) throw InputError(fmt::format("--stages must be at least 1, got {}", num_stages));
  const interop::PerseusProfile profile = interop::read_perseus_profile(path);
  const std::vector<std::string> knob_fields = profile.extra_columns();

  OptionTable table;
  table.options.resize(static_cast<std::size_t>(num_stages));
  for (std::size_t row = 0; row < profile.rows(); ++row) {
    long stage = profile.stage(row);
    if (stage < 0 || stage >= num_stages) {
      profile.fail(row, Column::kStage,
                   fmt::format("stage {} is outside 0..{} (--stages {})", stage, num_stages - 1, num_stages));
    }
    auto slot = schedule::parse_option_slot(profile.instruction(row));
    if (!slot) {
      profile.fail(row, Column::kInstruction,
                   fmt::format("'{}' is not an instruction (forward, backward, backward_input or backward_weight)",
                               profile.instruction(row)));
    }
    StageOption option;
    option.freq_mhz = profile.frequency_mhz(row);
    option.time_s = profile.time_s(row);
    option.energy_j = profile.energy_j(row);
    if (!knob_fields.empty()) {
      nlohmann::json knob = nlohmann::json::object();
      const std::vector<std::string> cells = profile.extra(row);
      for (std::size_t k = 0; k < knob_fields.size(); ++k) knob[knob_fields[k]] = cells[k];
      option.knob = SharedJson(std::move(knob));
    }
    table.at(static_cast<int>(stage), *slot).push_back(std::move(option));
  }
  validate_option_table(table, path.string());
  return table;
}

void validate_option_table(const OptionTable& table, const std::string& source) {
  for (int stage = 0; stage < table.num_stages(); ++stage) {
    for (int chunk = 0; chunk < table.chunks; ++chunk) {
      const std::string where = table.chunks > 1 ? fmt::format("stage {} chunk {}", stage, chunk) : fmt::format("stage {}", stage);
      for (schedule::OptionSlot slot : {schedule::OptionSlot::kForward, schedule::OptionSlot::kBackward}) {
        if (table.at(stage, chunk, slot).empty()) {
          throw InputError({source, 0, 0, "instruction"}, fmt::format("{} has no {} options", where, to_string(slot)));
        }
      }
      const bool b = !table.at(stage, chunk, schedule::OptionSlot::kBackwardInput).empty();
      const bool w = !table.at(stage, chunk, schedule::OptionSlot::kBackwardWeight).empty();
      if (b != w) {
        throw InputError({source, 0, 0, "instruction"},
                         fmt::format("{} has {} options but no {} options: a backward splits into both", where,
                                     b ? "backward_input" : "backward_weight", b ? "backward_weight" : "backward_input"));
      }
    }
  }
}

}  // namespace kareus::pipeline
