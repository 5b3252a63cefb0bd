// How a training job is split across GPUs and time: tensor (TP), context (CP), pipeline (PP) and
// data (DP) parallelism, the microbatching, activation checkpointing and the layers each pipeline
// stage holds.
//
// Thread-safety: plain values and pure functions.
// Example:
//   ParallelConfig p;                       // the first Kareus evaluation config
//   p.tp = 4; p.cp = 2;
//   p = validated(model, p);                // fills layers_per_stage, throws InputError if wrong
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kareus/workload/model.hpp"

namespace kareus::workload {

enum class Checkpointing { kFull, kNone };

std::string_view to_string(Checkpointing c);
std::optional<Checkpointing> parse_checkpointing(std::string_view text);

struct ParallelConfig {
  int tp = 8;
  int cp = 1;
  int pp = 2;
  int dp = 1;
  int microbatch_size = 8;  // sequences per microbatch; split into two nanobatches
  int seq_len = 4096;       // tokens per sequence
  int microbatches = 8;     // per iteration, per pipeline
  Checkpointing checkpointing = Checkpointing::kFull;
  // Megatron's hidden_dropout: the probability its bias-dropout-adds drop an element. Above 0 each
  // of them also writes a one-byte mask in the forward and reads it back in the backward. 0 by
  // default, as the models' published configs have it.
  double hidden_dropout = 0;
  // Layers on each pipeline stage, first stage first; empty = default_layers_per_stage().
  std::vector<int> layers_per_stage;

  int nanobatch_size() const { return microbatch_size / 2; }
  int gpus() const { return tp * cp * pp * dp; }
  bool operator==(const ParallelConfig&) const = default;
};

// The Kareus evaluation's split: even, then one layer moved from the last stage (which also runs
// the LM head and loss) to the first, e.g. 28 layers over PP=2 -> 15/13. With PP=1 all layers.
std::vector<int> default_layers_per_stage(long num_layers, int pp);

// Checks `parallel` against `model` and returns it with layers_per_stage filled in. Throws
// InputError naming the flag at fault: sizes below 1, TP not dividing the heads, KV groups, hidden
// or FFN size, CP not dividing the sequence into 2*CP load-balanced chunks, a microbatch that does
// not split into two equal nanobatches, or layers_per_stage not summing to the model's layers.
ParallelConfig validated(const ModelSpec& model, ParallelConfig parallel);

// Parses "15,13" into {15, 13}; throws InputError naming `field` on anything else.
std::vector<int> parse_layers_per_stage(std::string_view text, const std::string& field);

}  // namespace kareus::workload
