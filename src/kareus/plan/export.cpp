#include "kareus/plan/export.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "kareus/interop/artifact_format.hpp"
#include "kareus/core/error.hpp"
#include "kareus/core/io.hpp"
#include "kareus/plan/validate.hpp"

namespace kareus::plan {
namespace {

// Per stage, (instruction, MHz) in run order; the instruction by its plan type (B and W by theirs).
std::string frequency_lists(const Plan& plan) {
  std::string out = "[\n";
  for (const auto& stage : plan.stages) {
    out += "    [";
    for (std::size_t k = 0; k < stage.size(); ++k) {
      const PlannedInstruction& ins = stage[k];
      const schedule::OptionSlot slot = schedule::option_slot({0, ins.type, ins.microbatch, ins.chunk, ins.part});
      out += fmt::format("{}('{}', {})", k ? ", " : "", schedule::to_string(slot),
                         static_cast<long>(std::lround(ins.freq_mhz)));
    }
    out += "],\n";
  }
  return out + "]\n";
}

// An instruction's collective configs by the artifact's field name (a partition key); recomputed
// forward partitions of a checkpointed backward under their forward keys.
using FieldConfigs = std::map<std::string, std::string>;

bool is_field(std::string_view key, bool cp) {
  auto has = [&](std::span<const std::string_view> fields) {
    return std::find(fields.begin(), fields.end(), key) != fields.end();
  };
  return has(interop::artifact_forward_fields(cp)) || has(interop::artifact_backward_fields(cp));
}

void add_field(FieldConfigs& fields, const std::string& key, std::string config, const std::string& where) {
  if (!fields.emplace(key, std::move(config)).second) {
    throw InputError({where, 0, 0, "knob"}, fmt::format("sets partition {} twice", key));
  }
}

// Our knob: {"partitions": [{"key", "sms", "slot"}...], "recompute": [...]}.
void add_partition_list(const nlohmann::json& list, const std::string& where, std::string_view part,
                        FieldConfigs& out) {
  if (!list.is_array()) throw InputError({where, 0, 0, fmt::format("knob.{}", part)}, "must be a list");
  for (std::size_t i = 0; i < list.size(); ++i) {
    const nlohmann::json& p = list[i];
    const std::string field = fmt::format("knob.{}[{}]", part, i);
    if (!p.is_object() || !p.contains("key") || !p.contains("slot") || !p.contains("sms") ||
        !p.at("key").is_string() || !p.at("slot").is_string() || !p.at("sms").is_number_integer()) {
      throw InputError({where, 0, 0, field}, "needs 'key' and 'slot' (strings) and 'sms' (an integer)");
    }
    add_field(out, p.at("key").get<std::string>(),
              interop::format_artifact_config({interop::to_artifact_slot(p.at("slot").get<std::string>()),
                                      "none", p.at("sms").get<int>(),
                                      interop::kArtifactBlockSize, false}),
              where);
  }
}

FieldConfigs field_configs(const PlannedInstruction& ins, const std::string& where) {
  FieldConfigs out;
  const nlohmann::json& knob = *ins.knob;
  if (knob.is_object() && knob.contains("partitions")) {
    add_partition_list(knob.at("partitions"), where, "partitions", out);
    if (knob.contains("recompute")) add_partition_list(knob.at("recompute"), where, "recompute", out);
    return out;
  }
  // A knob carried from a profile whose columns already hold the artifact's config strings
  // (e.g. {"attention_configs": "linear_0-none-12-1024", ...} or {"fwd_qkv_ar": ...}): passed
  // through as written, each under the partition its column names.
  if (knob.is_object() && !knob.empty()) {
    const bool backward = ins.type == schedule::InstructionType::kBackward;
    for (const auto& [column, value] : knob.items()) {
      // Columns that are no schedule field, and fields this instruction leaves empty, are not ours.
      const std::optional<std::string> key = interop::artifact_profile_field(column, backward);
      if (!value.is_string() || !key || (!backward && key->starts_with("bwd_"))) continue;
      const std::string text = value.get<std::string>();
      if (text.empty()) continue;
      if (!interop::parse_artifact_config(text)) {
        throw InputError({where, 0, 0, fmt::format("knob.{}", column)},
                         fmt::format("'{}' is not an artifact config string (<start>-<end>-<SMs>-<block>)", text));
      }
      add_field(out, *key, text, where);
    }
    if (!out.empty()) return out;
  }
  throw InputError({where, 0, 0, "knob"},
                   "has no per-partition knobs; a clock-only plan exports as zeus-pfo, or as the "
                   "artifact's freqs file alone");
}

// The configs of `fields` in order, as Python string literals after the instruction's name.
std::string tuple_of(std::string_view name, std::initializer_list<std::span<const std::string_view>> groups,
                     const FieldConfigs& configs, const std::string& where) {
  std::string out = fmt::format("('{}'", name);
  for (std::span<const std::string_view> fields : groups) {
    for (std::string_view field : fields) {
      auto it = configs.find(std::string(field));
      if (it == configs.end()) {
        throw InputError({where, 0, 0, "knob"}, fmt::format("has no config for partition {}, which the "
                                                            "artifact's {} tuple needs", field, name));
      }
      out += fmt::format(", '{}'", it->second);
    }
  }
  return out + ")";
}

// The artifact's scheduler runs 1F1B: its grammar has no model chunk and no B/W split.
void require_one_f_one_b(const Plan& plan) {
  if (plan.schedule == schedule::ScheduleKind::k1F1B) return;
  throw InputError({"", 0, 0, "schedule"},
                   fmt::format("the Kareus artifact's schedule runs 1F1B only (forward and backward per microbatch, "
                               "no model chunks, no B/W split), and this plan is {}; export it as zeus-pfo",
                               schedule::to_string(plan.schedule)));
}

}  // namespace

std::string kareus_artifact_freqs(const Plan& plan) {
  require_one_f_one_b(plan);
  return frequency_lists(plan);
}

std::string zeus_pfo_schedule(const Plan& plan) { return frequency_lists(plan); }

ArtifactLayout artifact_layout(const Plan& plan) {
  std::optional<bool> cp, checkpointing;
  for (std::size_t s = 0; s < plan.stages.size(); ++s) {
    for (std::size_t k = 0; k < plan.stages[s].size(); ++k) {
      const PlannedInstruction& ins = plan.stages[s][k];
      const std::string where = fmt::format("stages[{}].instructions[{}]", s, k);
      const FieldConfigs configs = field_configs(ins, where);
      for (const auto& [key, config] : configs) {
        const bool tp_key = is_field(key, false), cp_key = is_field(key, true);
        if (!tp_key && !cp_key) {
          throw InputError({where, 0, 0, "knob"},
                           fmt::format("partition {} has no field in the artifact's schedule", key));
        }
        if (tp_key != cp_key) {  // fwd_mlp and bwd_mlp are fields of both
          if (cp && *cp != cp_key) {
            throw InputError({where, 0, 0, "knob"}, fmt::format("partition {} mixes TP-only and CP keys", key));
          }
          cp = cp_key;
        }
      }
      if (ins.type == schedule::InstructionType::kBackward) {
        const bool recomputes = std::any_of(configs.begin(), configs.end(),
                                            [](const auto& c) { return c.first.starts_with("fwd_"); });
        if (checkpointing && *checkpointing != recomputes) {
          throw InputError({where, 0, 0, "knob"},
                           "some backwards recompute the forward and others do not; the artifact's "
                           "schedule is either checkpointed or not");
        }
        checkpointing = recomputes;
      }
    }
  }
  return {cp.value_or(false), checkpointing.value_or(false)};
}

std::string kareus_artifact_scheds(const Plan& plan) {
  require_one_f_one_b(plan);
  const ArtifactLayout layout = artifact_layout(plan);
  const auto forward = interop::artifact_forward_fields(layout.context_parallel);
  const auto backward = interop::artifact_backward_fields(layout.context_parallel);
  std::string out = "[\n";
  for (std::size_t s = 0; s < plan.stages.size(); ++s) {
    const auto& stage = plan.stages[s];
    std::vector<std::string> tuples;
    // Without checkpointing the artifact wants one (forward, backward) pair per microbatch.
    std::map<int, std::pair<std::string, std::string>> pairs;
    for (std::size_t k = 0; k < stage.size(); ++k) {
      const PlannedInstruction& ins = stage[k];
      const std::string where = fmt::format("stages[{}].instructions[{}]", s, k);
      const FieldConfigs configs = field_configs(ins, where);
      if (ins.type == schedule::InstructionType::kForward) {
        std::string t = tuple_of("forward", {forward}, configs, where);
        if (layout.checkpointing) tuples.push_back(std::move(t));
        else pairs[ins.microbatch].first = std::move(t);
      } else if (layout.checkpointing) {
        tuples.push_back(tuple_of("backward", {forward, backward}, configs, where));
      } else {
        pairs[ins.microbatch].second = tuple_of("backward", {backward}, configs, where);
      }
    }
    for (auto& [microbatch, pair] : pairs) {
      if (pair.first.empty() || pair.second.empty()) {
        throw InputError({fmt::format("stages[{}]", s), 0, 0, "instructions"},
                         fmt::format("microbatch {} lacks its {}", microbatch,
                                     pair.first.empty() ? "forward" : "backward"));
      }
      tuples.push_back(fmt::format("({}, {})", pair.first, pair.second));
    }
    out += fmt::format("    [{}],\n", fmt::join(tuples, ", "));
  }
  return out + "]\n";
}

std::vector<std::string> export_plan(const Plan& plan, std::string_view format, const std::filesystem::path& dir,
                                     const std::string& source) {
  validate(plan, source);
  if (format == "zeus-pfo") {
    std::string text = zeus_pfo_schedule(plan);
    write_file_atomic(dir / "freqs_pipeline_00000.py", text);
    return {"freqs_pipeline_00000.py"};
  }
  if (format == "kareus-artifact") {
    std::string scheds = kareus_artifact_scheds(plan);  // first: it is the one that can fail
    std::string freqs = kareus_artifact_freqs(plan);
    write_file_atomic(dir / "freqs_pipeline_00000.py", freqs);
    write_file_atomic(dir / "scheds_pipeline_00000.py", scheds);
    return {"freqs_pipeline_00000.py", "scheds_pipeline_00000.py"};
  }
  throw InputError({"", 0, 0, "--format"},
                   fmt::format("'{}' is not an export format: use kareus-artifact or zeus-pfo", format));
}

}  // namespace kareus::plan
