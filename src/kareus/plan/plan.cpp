#include "kareus/plan/plan.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <exception>
#include <functional>
#include <string_view>
#include <utility>

#include "kareus/core/error.hpp"
#include "kareus/core/io.hpp"

namespace kareus::plan {

using schedule::InstructionType;

std::string energy_scope_for(int num_stages) {
  return fmt::format(
      "one GPU per pipeline stage ({} GPU{}), idle time charged at P_blocking", num_stages,
      num_stages == 1 ? "" : "s");
}

namespace {

// A backward split by a zero-bubble schedule is written as "backward_input" (B) or
// "backward_weight" (W); readers that know only forward and backward reject such plans.
constexpr std::pair<schedule::BackwardPart, std::string_view> kPartNames[] = {
    {schedule::BackwardPart::kInputGradient, "backward_input"},
    {schedule::BackwardPart::kWeightGradient, "backward_weight"},
};

std::string instruction_type_name(InstructionType type, schedule::BackwardPart part) {
  for (const auto& [p, name] : kPartNames) {
    if (type == InstructionType::kBackward && part == p) return std::string(name);
  }
  return std::string(schedule::to_string(type));
}

}  // namespace

Plan with_stage_only(const Plan& plan, std::size_t stage) {
  KAREUS_CHECK(stage < plan.stages.size(), "a stage of the plan");
  Plan out;
  out.schedule = plan.schedule;
  out.num_stages = plan.num_stages;
  out.num_microbatches = plan.num_microbatches;
  out.virtual_stages = plan.virtual_stages;
  out.p_blocking_w = plan.p_blocking_w;
  out.unit_time_s = plan.unit_time_s;
  out.energy_scope = plan.energy_scope;
  out.time_s = plan.time_s;
  out.energy_j = plan.energy_j;
  out.source = plan.source;
  out.stages.resize(plan.stages.size());
  out.stages[stage] = plan.stages[stage];
  return out;
}

nlohmann::json to_json(const Plan& plan) {
  nlohmann::json stages = nlohmann::json::array();
  for (std::size_t s = 0; s < plan.stages.size(); ++s) {
    nlohmann::json instructions = nlohmann::json::array();
    for (const PlannedInstruction& i : plan.stages[s]) {
      nlohmann::json entry = {{"type", instruction_type_name(i.type, i.part)},
                              {"microbatch", i.microbatch},
                              {"freq_mhz", i.freq_mhz},
                              {"time_s", i.time_s},
                              {"energy_j", i.energy_j}};
      if (plan.virtual_stages > 1) entry["chunk"] = i.chunk;
      if (!i.knob.is_null()) entry["knob"] = *i.knob;
      instructions.push_back(std::move(entry));
    }
    stages.push_back({{"stage", s}, {"instructions", std::move(instructions)}});
  }
  nlohmann::json out = {{"format", kPlanFormat},
                        {"version", kPlanFormatVersion},
                        {"schedule", schedule::to_string(plan.schedule)},
                        {"num_stages", plan.num_stages},
                        {"num_microbatches", plan.num_microbatches},
                        {"p_blocking_w", plan.p_blocking_w},
                        {"unit_time_s", plan.unit_time_s},
                        {"energy_scope", plan.energy_scope},
                        {"time_s", plan.time_s},
                        {"energy_j", plan.energy_j}};
  if (plan.virtual_stages > 1) out["virtual_stages"] = plan.virtual_stages;
  if (!plan.source.is_null()) out["source"] = plan.source;
  out["stages"] = std::move(stages);
  return out;
}

namespace {

// Reads one field with its JSON path in every error.
template <typename T>
T field(const nlohmann::json& object, const std::string& key, const std::string& path,
        const std::string& source) {
  std::string where = path.empty() ? key : path + "." + key;
  if (!object.is_object() || !object.contains(key)) {
    throw InputError({source, 0, 0, where}, "missing");
  }
  try {
    return object.at(key).get<T>();
  } catch (const nlohmann::json::exception&) {
    throw InputError({source, 0, 0, where},
                     fmt::format("has the wrong type ({})", object.at(key).type_name()));
  }
}

// An integer field, rejected unless it is a JSON integer within [min, max].
int integer_field(const nlohmann::json& object, const std::string& key, const std::string& path,
                  const std::string& source, long min, long max) {
  std::string where = path.empty() ? key : path + "." + key;
  const auto value = field<nlohmann::json>(object, key, path, source);
  if (!value.is_number_integer()) {
    throw InputError({source, 0, 0, where}, fmt::format("expected an integer, got {}", value.dump()));
  }
  const auto number = value.get<long long>();
  if (number < min || number > max) {
    throw InputError({source, 0, 0, where}, fmt::format("{} is outside {}..{}", number, min, max));
  }
  return static_cast<int>(number);
}

}  // namespace

std::string plan_source(const std::filesystem::path& path, std::optional<std::size_t> index) {
  return index ? fmt::format("{} plans[{}]", path.string(), *index) : path.string();
}

Plan plan_from_json(const nlohmann::json& json, const std::string& source, SharedJsonPool* knobs) {
  SharedJsonPool own;  // a plan's instructions alone repeat its options' knobs thousands of times
  SharedJsonPool& pool = knobs ? *knobs : own;
  Plan plan;
  if (field<std::string>(json, "format", "", source) != kPlanFormat) {
    throw InputError({source, 0, 0, "format"}, fmt::format("expected \"{}\"", kPlanFormat));
  }
  int version = integer_field(json, "version", "", source, 0, 1 << 30);
  if (version != kPlanFormatVersion) {
    throw InputError({source, 0, 0, "version"},
                     fmt::format("version {} is not supported (this build reads {})", version,
                                 kPlanFormatVersion));
  }
  auto schedule = schedule::parse_schedule_kind(field<std::string>(json, "schedule", "", source));
  if (!schedule) {
    throw InputError({source, 0, 0, "schedule"}, fmt::format("expected one of {}", schedule::schedule_kind_names()));
  }
  plan.schedule = *schedule;
  plan.num_stages = integer_field(json, "num_stages", "", source, 1, 1 << 20);
  plan.num_microbatches = integer_field(json, "num_microbatches", "", source, 1, 1 << 20);
  if (json.contains("virtual_stages")) plan.virtual_stages = integer_field(json, "virtual_stages", "", source, 1, 1 << 10);
  plan.p_blocking_w = field<double>(json, "p_blocking_w", "", source);
  plan.unit_time_s = field<double>(json, "unit_time_s", "", source);
  plan.energy_scope = field<std::string>(json, "energy_scope", "", source);
  plan.time_s = field<double>(json, "time_s", "", source);
  plan.energy_j = field<double>(json, "energy_j", "", source);
  if (json.contains("source")) plan.source = json.at("source");
  auto stages = field<nlohmann::json>(json, "stages", "", source);
  if (!stages.is_array() || static_cast<int>(stages.size()) != plan.num_stages) {
    throw InputError({source, 0, 0, "stages"},
                     fmt::format("expected an array of num_stages = {} entries", plan.num_stages));
  }
  for (std::size_t s = 0; s < stages.size(); ++s) {
    std::string stage_path = fmt::format("stages[{}]", s);
    auto instructions = field<nlohmann::json>(stages[s], "instructions", stage_path, source);
    if (!instructions.is_array()) {
      throw InputError({source, 0, 0, stage_path + ".instructions"}, "expected an array");
    }
    std::vector<PlannedInstruction> list;
    for (std::size_t k = 0; k < instructions.size(); ++k) {
      std::string path = fmt::format("{}.instructions[{}]", stage_path, k);
      const auto& entry = instructions[k];
      PlannedInstruction ins;
      const auto type_name = field<std::string>(entry, "type", path, source);
      auto type = schedule::parse_instruction_type(type_name);
      for (const auto& [part, name] : kPartNames) {
        if (type_name == name) {
          type = InstructionType::kBackward;
          ins.part = part;
        }
      }
      if (!type) {
        throw InputError({source, 0, 0, path + ".type"},
                         "expected \"forward\", \"backward\", \"backward_input\" or \"backward_weight\"");
      }
      ins.type = *type;
      if (entry.contains("chunk")) ins.chunk = integer_field(entry, "chunk", path, source, 0, plan.virtual_stages - 1);
      ins.microbatch = integer_field(entry, "microbatch", path, source, 0, plan.num_microbatches - 1);
      ins.freq_mhz = field<double>(entry, "freq_mhz", path, source);
      ins.time_s = field<double>(entry, "time_s", path, source);
      ins.energy_j = field<double>(entry, "energy_j", path, source);
      if (entry.contains("knob")) ins.knob = pool.intern(entry.at("knob"));
      list.push_back(std::move(ins));
    }
    plan.stages.push_back(std::move(list));
  }
  return plan;
}

const PartitionKnob* InstructionKnobs::find(std::string_view key) const {
  for (const PartitionKnob& k : partitions) {
    if (k.key == key) return &k;
  }
  return nullptr;
}

InstructionKnobs instruction_knobs(const nlohmann::json& knob, const std::string& path,
                                   const std::string& source) {
  InstructionKnobs knobs;
  if (!knob.is_object() || !knob.contains("partitions")) return knobs;
  auto read_list = [&](const char* name, std::vector<PartitionKnob>& out) {
    if (!knob.contains(name)) return;
    std::string list_path = fmt::format("{}.{}", path, name);
    const nlohmann::json& list = knob.at(name);
    if (!list.is_array()) throw InputError({source, 0, 0, list_path}, "expected an array");
    for (std::size_t k = 0; k < list.size(); ++k) {
      std::string entry_path = fmt::format("{}[{}]", list_path, k);
      PartitionKnob entry;
      entry.key = field<std::string>(list[k], "key", entry_path, source);
      entry.slot = field<std::string>(list[k], "slot", entry_path, source);
      entry.sms = integer_field(list[k], "sms", entry_path, source, 0, 1 << 20);
      for (const PartitionKnob& seen : out) {
        if (seen.key == entry.key) {
          throw InputError({source, 0, 0, entry_path + ".key"},
                           fmt::format("partition '{}' appears twice", entry.key));
        }
      }
      out.push_back(std::move(entry));
    }
  };
  read_list("partitions", knobs.partitions);
  read_list("recompute", knobs.recompute);
  return knobs;
}

nlohmann::json to_json(const InstructionKnobs& knobs) {
  auto list = [](const std::vector<PartitionKnob>& entries) {
    nlohmann::json out = nlohmann::json::array();
    for (const PartitionKnob& k : entries)
      out.push_back({{"key", k.key}, {"slot", k.slot}, {"sms", k.sms}});
    return out;
  };
  return {{"partitions", list(knobs.partitions)}, {"recompute", list(knobs.recompute)}};
}

void write_plan(const Plan& plan, const std::filesystem::path& path) {
  write_file_atomic(path, to_json(plan).dump(1) + "\n");
}

void write_plan_set(const std::vector<Plan>& plans, const std::vector<std::size_t>& frontier_indices,
                    const std::filesystem::path& path) {
  KAREUS_CHECK(plans.size() == frontier_indices.size(), "a frontier index per plan");
  // A plan a line, written as it is serialised: a long pipeline's set held whole as one document
  // takes gigabytes (bench/results/plan_sets.md).
  AtomicFileWriter file(path);
  file.append(fmt::format(R"({{"format": "{}", "version": {}, "plans": [)", kPlanSetFormat, kPlanFormatVersion));
  for (std::size_t i = 0; i < plans.size(); ++i) {
    nlohmann::json doc = to_json(plans[i]);
    doc["frontier_index"] = frontier_indices[i];
    file.append(i == 0 ? "\n" : ",\n");
    file.append(doc.dump());
  }
  file.append("\n]}\n");
  file.commit();
}

namespace {

bool is_plan_set(const nlohmann::json& json) {
  return json.is_object() && json.value("format", "") == kPlanSetFormat;
}

// A plan file parsed as it is read. Each element of a top-level "plans" array goes to `take` (its
// index and document) as soon as it is parsed and is then dropped, so that a set of long pipelines'
// plans never lives whole as one document. The first exception `take` throws stops its calls; it is
// kept for the caller, who knows whether the file is a set.
struct PlanFile {
  nlohmann::json json;  // the file without its set's plans
  std::size_t set_plans = 0;
  std::exception_ptr failed;
};

PlanFile parse_plan_file(const std::filesystem::path& path,
                         const std::function<void(std::size_t, const nlohmann::json&)>& take) {
  using Event = nlohmann::json::parse_event_t;
  PlanFile file;
  std::string top_key;
  auto keep = [&](int depth, Event event, nlohmann::json& parsed) {
    if (event == Event::key && depth == 1) top_key = parsed.get<std::string>();
    // An element of the top-level value's "plans" ends at depth 2 (an object, an array or a scalar).
    const bool element_ends = event == Event::object_end || event == Event::array_end || event == Event::value;
    if (depth != 2 || top_key != "plans" || !element_ends) return true;
    if (!file.failed) {
      try {
        take(file.set_plans, parsed);
      } catch (...) {
        file.failed = std::current_exception();
      }
    }
    ++file.set_plans;
    return false;
  };
  file.json = read_json_file(path, keep);
  return file;
}

}  // namespace

Plan read_plan(const std::filesystem::path& path, std::optional<std::size_t> index) {
  std::optional<Plan> chosen;
  const PlanFile file = parse_plan_file(path, [&](std::size_t i, const nlohmann::json& plan) {
    if (index && i == *index) chosen = plan_from_json(plan, plan_source(path, i));
  });
  if (is_plan_set(file.json)) {
    const std::size_t count = file.set_plans;
    if (!index) {
      throw InputError({path.string(), 0, 0, ""},
                       fmt::format("holds {} plans; choose one with --index 0..{}", count, count == 0 ? 0 : count - 1));
    }
    if (*index >= count) {
      throw InputError({path.string(), 0, 0, "plans"},
                       fmt::format("index {} is out of range: the set holds {} plans", *index, count));
    }
    if (file.failed) std::rethrow_exception(file.failed);
    return std::move(*chosen);
  }
  if (index) throw InputError({path.string(), 0, 0, ""}, "holds a single plan; --index applies to plan sets");
  return plan_from_json(file.json, path.string());
}

std::vector<Plan> read_plan_set(const std::filesystem::path& path, const PlanReadHook& as_read) {
  std::vector<Plan> plans;
  SharedJsonPool knobs;
  const PlanFile file = parse_plan_file(path, [&](std::size_t i, const nlohmann::json& plan) {
    const std::string source = plan_source(path, i);
    plans.push_back(plan_from_json(plan, source, &knobs));
    if (as_read) as_read(i, source, plans.back());
  });
  if (!is_plan_set(file.json)) {
    plans.assign(1, plan_from_json(file.json, path.string()));
    if (as_read) as_read(0, path.string(), plans.front());
    return plans;
  }
  const auto list = file.json.find("plans");
  if (list == file.json.end() || !list->is_array() || file.set_plans == 0) {
    throw InputError({path.string(), 0, 0, "plans"}, "expected a non-empty array of plans");
  }
  if (file.failed) std::rethrow_exception(file.failed);
  return plans;
}

}  // namespace kareus::plan
