#include "kareus/engine/engine.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "kareus/core/error.hpp"
#include "kareus/core/json_fields.hpp"
#include "kareus/core/paths.hpp"

namespace kareus::engine {
namespace {

using json = nlohmann::ordered_json;

constexpr double kUs = 1e-6;

constexpr HostCostField kCostFields[] = {
    {"partition_op_us", &HostCosts::partition_op_s},
    {"layer_op_us", &HostCosts::layer_op_s},
    {"collective_call_us", &HostCosts::collective_call_s},
    {"event_us", &HostCosts::event_s},
    {"partition_us", &HostCosts::partition_s},
    {"instruction_us", &HostCosts::instruction_s},
    {"launch_latency_us", &HostCosts::launch_latency_s},
};

std::map<std::string, int> read_calls(JsonFields& fields, const std::string& key) {
  std::map<std::string, int> calls;
  const json* v = fields.find(key);
  if (!v) return calls;
  if (!v->is_object()) fields.fail(key, "expected an object of op name -> calls");
  for (const auto& [name, n] : v->items()) {
    if (!n.is_number_integer() || n.get<long long>() < 0 || n.get<long long>() > 1000) {
      fields.fail(key + "." + name, "expected a whole number of calls, 0 to 1000");
    }
    calls[name] = static_cast<int>(n.get<long long>());
  }
  return calls;
}

int calls_of(const std::map<std::string, int>& calls, const std::string& name) {
  auto it = calls.find(name);
  return it == calls.end() ? 1 : it->second;
}

double layer_path_s(const EngineSpec& e, const workload::Partition& whole) {
  double h = 0;
  for (const workload::ComputeOp& op : whole.ops) h += calls_of(e.layer_calls, op.name) * e.host.layer_op_s;
  if (whole.collective) h += calls_of(e.collective_calls, whole.collective->name) * e.host.collective_call_s;
  return h;
}

}  // namespace

std::span<const HostCostField> host_cost_fields() { return kCostFields; }

bool EngineSpec::idle() const {
  return host == HostCosts{} && !sync_per_instruction && !sync_per_loop_op && !sync_per_module_op;
}

std::string op_sync_name(const EngineSpec& e) {
  if (e.sync_per_loop_op) return e.sync_per_module_op ? "partition_loop+modules" : "partition_loop";
  return e.sync_per_module_op ? "modules" : "none";
}

std::string op_sync_where(const EngineSpec& e) {
  if (e.sync_per_loop_op) return e.sync_per_module_op ? "the nanobatched loop and the un-split modules" : "the nanobatched loop";
  return e.sync_per_module_op ? "the un-split modules" : "";
}

EngineSpec engine_from_json(const json& doc, const std::string& source) {
  JsonFields f(doc, source, "");
  if (const json* format = f.find("format"); format && *format != "kareus-engine") {
    f.fail("format", "expected \"kareus-engine\"");
  }
  if (const json* version = f.find("version"); version && *version != 1) f.fail("version", "expected 1");
  EngineSpec e;
  e.name = f.text("name");
  e.display_name = f.text("display_name");
  e.source = f.text("source");
  {
    JsonFields host(f.require("host"), source, "host");
    for (const HostCostField& c : kCostFields) e.host.*c.member = host.non_negative(std::string(c.key)) * kUs;
    host.reject_unknown();
  }
  const std::string sync = f.text("sync");
  if (sync == "instruction") e.sync_per_instruction = true;
  else if (sync != "none") f.fail("sync", fmt::format("'{}': expected \"instruction\" or \"none\"", sync));
  if (f.find("op_sync")) {
    const std::string op_sync = f.text("op_sync");
    e.sync_per_loop_op = op_sync == "partition_loop" || op_sync == "partition_loop+modules";
    e.sync_per_module_op = op_sync == "modules" || op_sync == "partition_loop+modules";
    if (op_sync_name(e) != op_sync) {
      f.fail("op_sync", fmt::format("'{}': expected \"none\", \"partition_loop\", \"modules\" or "
                                    "\"partition_loop+modules\"", op_sync));
    }
  }
  e.partition_calls = read_calls(f, "partition_calls");
  e.layer_calls = read_calls(f, "layer_calls");
  e.collective_calls = read_calls(f, "collective_calls");
  // Every constant that costs something says where it comes from.
  const json& sources = f.require("sources");
  if (!sources.is_object()) f.fail("sources", "expected an object of constant -> citation");
  for (const HostCostField& c : kCostFields) {
    const std::string key(c.key);
    if (e.host.*c.member > 0 && (!sources.contains(key) || !sources[key].is_string() ||
                                 sources[key].get<std::string>().empty())) {
      f.fail(fmt::format("sources.{}", c.key), "missing: every nonzero host cost cites its measurement");
    }
  }
  e.sources = sources;
  f.reject_unknown();
  return e;
}

json to_json(const EngineSpec& e) {
  json host = json::object();
  for (const HostCostField& c : kCostFields) host[std::string(c.key)] = e.host.*c.member / kUs;
  json doc = {{"format", "kareus-engine"}, {"version", 1},          {"name", e.name},
              {"display_name", e.display_name}, {"source", e.source}, {"host", std::move(host)},
              {"sync", e.sync_per_instruction ? "instruction" : "none"},
              {"op_sync", op_sync_name(e)}};
  if (!e.partition_calls.empty()) doc["partition_calls"] = e.partition_calls;
  if (!e.layer_calls.empty()) doc["layer_calls"] = e.layer_calls;
  if (!e.collective_calls.empty()) doc["collective_calls"] = e.collective_calls;
  doc["sources"] = e.sources;
  return doc;
}

EngineSpec load_engine_spec(const std::filesystem::path& path) {
  return engine_from_json(parse_json_file(path), path.string());
}

std::vector<std::string> engine_preset_names() { return preset_names(data_dir() / "engines"); }

EngineSpec load_engine_preset(std::string_view name) {
  const auto path = preset_path(data_dir() / "engines", name, "engine");
  EngineSpec e = load_engine_spec(path);
  if (e.name != name) {
    throw InputError({path.string(), 0, 0, "name"}, fmt::format("'{}' differs from the file name '{}'", e.name, name));
  }
  return e;
}

EngineSpec load_engine(std::string_view name_or_path) {
  return names_a_file(name_or_path) ? load_engine_spec(std::filesystem::path(name_or_path))
                                    : load_engine_preset(name_or_path);
}

IssuePath path_of(const workload::Knob& knob) { return knob.sequential() ? IssuePath::kModules : IssuePath::kLoop; }

IssuePath issue_path(const EngineSpec& e, const workload::Knob& knob, bool instruction_overlaps) {
  return e.sync_per_loop_op && instruction_overlaps ? IssuePath::kLoop : path_of(knob);
}

double host_time_s(const EngineSpec& e, const workload::Partition& partition, IssuePath path) {
  if (path == IssuePath::kModules || !partition.collective) {
    const double share = partition.per_layer ? 0.5 : 1.0;
    return share * layer_path_s(e, workload::unsplit(partition));
  }
  // The per-op loop: every compute op; before the slot's op (after the last, for a sequential knob)
  // the other nanobatch's collective, after the comm stream waits on an event the compute stream
  // recorded; at the end the compute stream waits on the collective. Three event calls.
  double h = e.host.partition_s + calls_of(e.collective_calls, partition.collective->name) * e.host.collective_call_s +
             3 * e.host.event_s;
  for (const workload::ComputeOp& op : partition.ops) h += calls_of(e.partition_calls, op.name) * e.host.partition_op_s;
  return h;
}

double host_time_s(const EngineSpec& e, const workload::Partition& partition, const workload::Knob& knob) {
  return host_time_s(e, partition, path_of(knob));
}

double exposed_host_time_s(const EngineSpec& e, const workload::Partition& partition, IssuePath path) {
  const bool loop = path == IssuePath::kLoop && partition.collective;
  return (loop ? e.sync_per_loop_op : e.sync_per_module_op) ? host_time_s(e, partition, path) : 0.0;
}

double instruction_time_s(const EngineSpec& e, double gpu_time_s, double host_time_s) {
  if (e.sync_per_instruction) {
    return e.host.instruction_s + e.host.launch_latency_s + std::max(gpu_time_s, host_time_s);
  }
  return std::max(gpu_time_s, e.host.instruction_s + host_time_s);
}

}  // namespace kareus::engine
