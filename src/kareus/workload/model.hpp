// Model architectures: the shape numbers a transformer layer's op list is built from. Each model is
// a data file, data/models/<name>.json, so a user adds one without touching code.
//
// Thread-safety: ModelSpec is a plain value; the loaders read files and share no state.
// Example:
//   ModelSpec m = load_model("llama-3.2-3b");
//   long q_width = m.num_attention_heads * m.head_dim;
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace kareus::workload {

// A decoder-only, pre-norm (RMSNorm), RoPE, SwiGLU transformer without biases (Llama, Qwen3).
struct ModelSpec {
  std::string name;          // the file's stem, what --model takes
  std::string display_name;  // for reports
  long hidden_size = 0;
  long num_attention_heads = 0;
  long num_query_groups = 0;  // key/value heads
  long head_dim = 0;
  long ffn_hidden_size = 0;  // width of each of the gate and up projections
  long num_layers = 0;
  long vocab_size = 0;
  bool qk_norm = false;  // RMSNorm on each query/key head before RoPE (Qwen3)
  bool tied_embeddings = false;

  bool operator==(const ModelSpec&) const = default;
};

// Names of the bundled models (data_dir()/models/*.json), sorted.
std::vector<std::string> model_names();

// Loads a model by name from data_dir()/models/, or from a path when `name_or_path` ends in .json.
// Throws InputError naming the known models when the name is unknown, or naming file and field
// when the file is malformed.
ModelSpec load_model(std::string_view name_or_path);

// Parses one model document; `name` becomes ModelSpec::name and `source` names the input in errors.
// Unknown keys, missing keys and non-positive sizes are InputErrors naming the field.
ModelSpec parse_model(const nlohmann::json& doc, const std::string& name,
                      const std::string& source);

}  // namespace kareus::workload
