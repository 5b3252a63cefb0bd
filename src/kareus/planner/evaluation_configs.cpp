// The Kareus evaluation's configurations, read from data/configs/kareus-osdi26.json so that adding
// or changing one is a data change: each entry names a model and its parallelism, the file's
// `common` block holds what every entry shares (two stages, eight microbatches in the paper).
#include <fmt/format.h>

#include <set>

#include "kareus/core/error.hpp"
#include "kareus/core/io.hpp"
#include "kareus/core/paths.hpp"
#include "kareus/planner/planner.hpp"

namespace kareus::planner {
namespace {

constexpr const char* kFormat = "kareus-evaluation-configs";

std::filesystem::path configs_path() {
  return data_dir() / "configs" / "kareus-osdi26.json";
}

const nlohmann::json& member(const nlohmann::json& object, const char* key, const std::string& source,
                             const std::string& path) {
  const auto it = object.find(key);
  if (it == object.end()) throw InputError({source, 0, 0, path + key}, "is missing");
  return *it;
}

int positive_int(const nlohmann::json& object, const char* key, const std::string& source,
                 const std::string& path) {
  const nlohmann::json& value = member(object, key, source, path);
  if (!value.is_number_integer() || value.get<long>() <= 0 || value.get<long>() > 1'000'000) {
    throw InputError({source, 0, 0, path + key}, fmt::format("must be a positive integer, got {}", value.dump()));
  }
  return value.get<int>();
}

std::string text(const nlohmann::json& object, const char* key, const std::string& source, const std::string& path) {
  const nlohmann::json& value = member(object, key, source, path);
  if (!value.is_string() || value.get<std::string>().empty()) {
    throw InputError({source, 0, 0, path + key}, fmt::format("must be a non-empty string, got {}", value.dump()));
  }
  return value.get<std::string>();
}

}  // namespace

std::vector<Job> parse_evaluation_configs(const nlohmann::json& doc, const std::string& source) {
  if (!doc.is_object()) throw InputError({source, 0, 0, ""}, "must hold one JSON object");
  if (doc.value("format", "") != kFormat) {
    throw InputError({source, 0, 0, "format"}, fmt::format("must be \"{}\"", kFormat));
  }
  if (positive_int(doc, "version", source, "") != 1) {
    throw InputError({source, 0, 0, "version"}, "unsupported version (this build reads version 1)");
  }
  const nlohmann::json& common = member(doc, "common", source, "");
  const nlohmann::json& entries = member(doc, "configs", source, "");
  if (!common.is_object()) throw InputError({source, 0, 0, "common"}, "must be an object");
  if (!entries.is_array() || entries.empty()) throw InputError({source, 0, 0, "configs"}, "must be a non-empty array");

  std::vector<Job> jobs;
  std::set<std::string> names;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const std::string path = fmt::format("configs[{}].", i);
    const nlohmann::json& entry = entries[i];
    if (!entry.is_object()) throw InputError({source, 0, 0, fmt::format("configs[{}]", i)}, "must be an object");
    Job job;
    job.name = text(entry, "name", source, path);
    if (!names.insert(job.name).second) throw InputError({source, 0, 0, path + "name"}, fmt::format("'{}' appears twice", job.name));
    job.model = workload::load_model(text(entry, "model", source, path));
    workload::ParallelConfig p;
    p.tp = positive_int(entry, "tp", source, path);
    p.cp = positive_int(entry, "cp", source, path);
    p.microbatch_size = positive_int(entry, "mbs", source, path);
    p.seq_len = positive_int(entry, "seq", source, path);
    p.pp = positive_int(common, "pp", source, "common.");
    p.microbatches = positive_int(common, "microbatches", source, "common.");
    if (common.contains("hidden_dropout")) {
      const nlohmann::json& dropout = common["hidden_dropout"];
      if (!dropout.is_number()) throw InputError({source, 0, 0, "common.hidden_dropout"}, "must be a number");
      p.hidden_dropout = dropout.get<double>();
    }
    try {
      job.parallel = workload::validated(job.model, p);
    } catch (const InputError& e) {
      throw InputError({source, 0, 0, path + "name"}, fmt::format("{}: {}", job.name, e.what()));
    }
    jobs.push_back(std::move(job));
  }
  return jobs;
}

std::vector<Job> evaluation_configs() {
  const std::filesystem::path path = configs_path();
  return parse_evaluation_configs(read_json_file(path), path.string());
}

std::vector<std::string> evaluation_config_names() {
  std::vector<std::string> names;
  for (const Job& job : evaluation_configs()) names.push_back(job.name);
  return names;
}

Job evaluation_config(std::string_view name) {
  for (const Job& job : evaluation_configs()) {
    if (job.name == name) return job;
  }
  throw InputError({"", 0, 0, "--preset"}, fmt::format("unknown configuration '{}'; known: {}", name,
                                                       fmt::join(evaluation_config_names(), ", ")));
}

}  // namespace kareus::planner
