#include "kareus/sim/cluster.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "kareus/core/error.hpp"
#include "kareus/core/io.hpp"
#include "kareus/core/paths.hpp"

namespace kareus::sim {
namespace {

double positive(const nlohmann::json& doc, const std::string& key, const std::string& path, const std::string& file,
                bool zero_ok) {
  const std::string where = path.empty() ? key : path + "." + key;
  if (!doc.contains(key)) throw InputError({file, 0, 0, where}, "missing");
  if (!doc.at(key).is_number()) throw InputError({file, 0, 0, where}, "expected a number");
  const double value = doc.at(key).get<double>();
  if (!std::isfinite(value) || value < 0 || (!zero_ok && value == 0)) {
    throw InputError({file, 0, 0, where}, fmt::format("must be {}, got {}", zero_ok ? "non-negative" : "positive", value));
  }
  return value;
}

std::string text(const nlohmann::json& doc, const std::string& key, const std::string& fallback, const std::string& file) {
  if (!doc.contains(key)) return fallback;
  if (!doc.at(key).is_string()) throw InputError({file, 0, 0, key}, "expected a string");
  return doc.at(key).get<std::string>();
}

Link parse_link(const nlohmann::json& doc, const std::string& key, const std::string& file) {
  if (!doc.contains(key) || !doc.at(key).is_object()) throw InputError({file, 0, 0, key}, "expected an object");
  const auto& link = doc.at(key);
  return {positive(link, "bandwidth_gb_per_s", key, file, false) * 1e9, positive(link, "latency_us", key, file, true) * 1e-6};
}

}  // namespace

Link ClusterSpec::link_between(int a, int b, int gpus_per_stage) const {
  auto node_of = [&](int stage) { return static_cast<long>(stage) * gpus_per_stage / gpus_per_node; };
  // A stage wider than a node spans several; its peer rank in the other stage is then elsewhere.
  const bool same_node = gpus_per_stage <= gpus_per_node && node_of(a) == node_of(b);
  return same_node ? intra_node : inter_node;
}

std::vector<std::string> cluster_names() {
  std::vector<std::string> names;
  const auto dir = data_dir() / "clusters";
  if (std::filesystem::is_directory(dir)) {
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      if (entry.path().extension() == ".json") names.push_back(entry.path().stem().string());
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

ClusterSpec load_cluster_preset(std::string_view name_or_path) {
  std::filesystem::path path;
  if (name_or_path.ends_with(".json")) {
    path = std::string(name_or_path);
  } else {
    path = data_dir() / "clusters" / (std::string(name_or_path) + ".json");
    if (!std::filesystem::exists(path)) {
      throw InputError({"", 0, 0, "--cluster"}, fmt::format("unknown cluster '{}'; known: {}", name_or_path,
                                                            fmt::join(cluster_names(), ", ")));
    }
  }
  const std::string file = path.string();
  const nlohmann::json doc = read_json_file(path);
  if (!doc.is_object()) throw InputError({file, 0, 0, ""}, "expected an object");
  ClusterSpec spec;
  spec.name = text(doc, "name", path.stem().string(), file);
  spec.display_name = text(doc, "display_name", spec.name, file);
  spec.source = text(doc, "source", "", file);
  const double gpus = positive(doc, "gpus_per_node", "", file, false);
  if (gpus != std::floor(gpus) || gpus > 1e6) {
    throw InputError({file, 0, 0, "gpus_per_node"}, "expected an integer of at most a million");
  }
  spec.gpus_per_node = static_cast<int>(gpus);
  spec.intra_node = parse_link(doc, "intra_node", file);
  spec.inter_node = parse_link(doc, "inter_node", file);
  spec.clock_switch_latency_s = positive(doc, "clock_switch_latency_ms", "", file, true) * 1e-3;
  return spec;
}

}  // namespace kareus::sim
