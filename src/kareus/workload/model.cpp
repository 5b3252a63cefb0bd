#include "kareus/workload/model.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "kareus/core/error.hpp"
#include "kareus/core/io.hpp"
#include "kareus/core/paths.hpp"

namespace kareus::workload {
namespace {

std::filesystem::path models_dir() {
  return data_dir() / "models";
}

long positive_integer(const nlohmann::json& doc, const char* key, const std::string& source) {
  const auto it = doc.find(key);
  if (it == doc.end()) throw InputError({source, 0, 0, key}, "is missing");
  if (!it->is_number_integer() || it->get<long>() <= 0) {
    throw InputError({source, 0, 0, key},
                     fmt::format("must be a positive integer, got {}", it->dump()));
  }
  return it->get<long>();
}

bool boolean(const nlohmann::json& doc, const char* key, const std::string& source) {
  const auto it = doc.find(key);
  if (it == doc.end()) throw InputError({source, 0, 0, key}, "is missing");
  if (!it->is_boolean())
    throw InputError({source, 0, 0, key}, fmt::format("must be true or false, got {}", it->dump()));
  return it->get<bool>();
}

}  // namespace

std::vector<std::string> model_names() {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(models_dir(), ec)) {
    if (entry.path().extension() == ".json") names.push_back(entry.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

ModelSpec parse_model(const nlohmann::json& doc, const std::string& name,
                      const std::string& source) {
  if (!doc.is_object())
    throw InputError({source, 0, 0, ""}, "a model file must hold one JSON object");
  static const std::vector<std::string> kKeys = {
      "display_name", "hidden_size",     "num_attention_heads", "num_query_groups",
      "head_dim",     "ffn_hidden_size", "num_layers",          "vocab_size",
      "qk_norm",      "tied_embeddings"};
  for (const auto& [key, value] : doc.items()) {
    if (std::find(kKeys.begin(), kKeys.end(), key) == kKeys.end()) {
      throw InputError({source, 0, 0, key},
                       fmt::format("unknown key; known keys: {}", fmt::join(kKeys, ", ")));
    }
  }
  ModelSpec m;
  m.name = name;
  m.display_name = name;
  if (auto it = doc.find("display_name"); it != doc.end()) {
    if (!it->is_string()) throw InputError({source, 0, 0, "display_name"}, "must be a string");
    m.display_name = it->get<std::string>();
  }
  m.hidden_size = positive_integer(doc, "hidden_size", source);
  m.num_attention_heads = positive_integer(doc, "num_attention_heads", source);
  m.num_query_groups = positive_integer(doc, "num_query_groups", source);
  m.head_dim = doc.contains("head_dim") ? positive_integer(doc, "head_dim", source)
                                        : m.hidden_size / m.num_attention_heads;
  m.ffn_hidden_size = positive_integer(doc, "ffn_hidden_size", source);
  m.num_layers = positive_integer(doc, "num_layers", source);
  m.vocab_size = positive_integer(doc, "vocab_size", source);
  m.qk_norm = boolean(doc, "qk_norm", source);
  m.tied_embeddings = boolean(doc, "tied_embeddings", source);
  if (!doc.contains("head_dim") && m.hidden_size % m.num_attention_heads != 0) {
    throw InputError({source, 0, 0, "head_dim"},
                     "is required when hidden_size is not a multiple of num_attention_heads");
  }
  if (m.num_attention_heads % m.num_query_groups != 0) {
    throw InputError({source, 0, 0, "num_query_groups"},
                     fmt::format("{} does not divide num_attention_heads {}", m.num_query_groups,
                                 m.num_attention_heads));
  }
  return m;
}

ModelSpec load_model(std::string_view name_or_path) {
  std::filesystem::path path;
  std::string name{name_or_path};
  if (name.size() > 5 && name.ends_with(".json")) {
    path = name;
    name = path.stem().string();
  } else {
    path = models_dir() / (name + ".json");
    const bool safe =
        !name.empty() && name.find('/') == std::string::npos && name != "." && name != "..";
    if (!safe || !std::filesystem::is_regular_file(path)) {
      throw InputError(
          {"", 0, 0, "--model"},
          fmt::format("unknown model '{}'; known models: {} (or a path to a .json file)", name,
                      fmt::join(model_names(), ", ")));
    }
  }
  return parse_model(read_json_file(path), name, path.string());
}

}  // namespace kareus::workload
