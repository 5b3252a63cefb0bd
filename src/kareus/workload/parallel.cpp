#include "kareus/workload/parallel.hpp"

#include <fmt/format.h>

#include <charconv>
#include <numeric>

#include "kareus/core/error.hpp"

namespace kareus::workload {
namespace {

[[noreturn]] void fail(const char* flag, const std::string& message) {
  throw InputError({"", 0, 0, flag}, message);
}

void require_divides(const char* flag, int parts, long whole, const char* what) {
  if (whole % parts != 0) {
    fail(flag, fmt::format("{} does not divide the {} ({})", parts, what, whole));
  }
}

}  // namespace

std::string_view to_string(Checkpointing c) {
  return c == Checkpointing::kFull ? "full" : "none";
}

std::optional<Checkpointing> parse_checkpointing(std::string_view text) {
  if (text == "full") return Checkpointing::kFull;
  if (text == "none") return Checkpointing::kNone;
  return std::nullopt;
}

std::vector<int> default_layers_per_stage(long num_layers, int pp) {
  KAREUS_CHECK(pp >= 1 && num_layers >= pp, "default_layers_per_stage needs 1 <= pp <= layers");
  std::vector<int> layers(static_cast<std::size_t>(pp), static_cast<int>(num_layers / pp));
  for (long i = 0; i < num_layers % pp; ++i) ++layers[static_cast<std::size_t>(i)];
  if (pp > 1 && layers.back() > 1) {
    --layers.back();
    ++layers.front();
  }
  return layers;
}

std::vector<int> parse_layers_per_stage(std::string_view text, const std::string& field) {
  std::vector<int> layers;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    std::size_t comma = text.find(',', pos);
    std::string_view part =
        text.substr(pos, comma == std::string_view::npos ? text.size() - pos : comma - pos);
    int value = 0;
    auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), value);
    if (part.empty() || ec != std::errc() || end != part.data() + part.size()) {
      throw InputError(
          {"", 0, 0, field},
          fmt::format("expected comma-separated layer counts like 15,13, got '{}'", text));
    }
    layers.push_back(value);
    if (comma == std::string_view::npos) break;
    pos = comma + 1;
  }
  return layers;
}

ParallelConfig validated(const ModelSpec& model, ParallelConfig p) {
  if (p.tp < 1) fail("--tp", fmt::format("must be at least 1, got {}", p.tp));
  if (p.cp < 1) fail("--cp", fmt::format("must be at least 1, got {}", p.cp));
  if (p.pp < 1) fail("--pp", fmt::format("must be at least 1, got {}", p.pp));
  if (p.dp < 1) fail("--dp", fmt::format("must be at least 1, got {}", p.dp));
  if (p.microbatches < 1)
    fail("--microbatches", fmt::format("must be at least 1, got {}", p.microbatches));
  if (p.seq_len < 1) fail("--seq", fmt::format("must be at least 1, got {}", p.seq_len));
  if (!(p.hidden_dropout >= 0 && p.hidden_dropout < 1))
    fail("--hidden-dropout", fmt::format("must be in [0, 1), got {}", p.hidden_dropout));
  if (p.microbatch_size < 2) {
    fail("--mbs",
         fmt::format("must be at least 2 (a microbatch is split into two nanobatches), got {}",
                     p.microbatch_size));
  }
  if (p.microbatch_size % 2 != 0) {
    fail("--mbs",
         fmt::format("must be even (a microbatch is split into two equal nanobatches), got {}",
                     p.microbatch_size));
  }
  require_divides("--tp", p.tp, model.num_attention_heads, "attention heads");
  require_divides("--tp", p.tp, model.num_query_groups, "key/value groups");
  require_divides("--tp", p.tp, model.hidden_size, "hidden size");
  require_divides("--tp", p.tp, model.ffn_hidden_size, "FFN size");
  if (p.cp > 1 && p.seq_len % (2 * p.cp) != 0) {
    fail("--cp", fmt::format("CP {} does not divide the sequence ({}) into {} equal chunks (causal "
                             "load balancing gives each CP rank two)",
                             p.cp, p.seq_len, 2 * p.cp));
  }
  if (p.pp > model.num_layers) {
    fail("--pp",
         fmt::format("{} stages for {} layers: every stage needs a layer", p.pp, model.num_layers));
  }
  if (p.layers_per_stage.empty()) {
    p.layers_per_stage = default_layers_per_stage(model.num_layers, p.pp);
  } else {
    if (static_cast<int>(p.layers_per_stage.size()) != p.pp) {
      fail("--layers-per-stage",
           fmt::format("has {} entries for {} pipeline stages", p.layers_per_stage.size(), p.pp));
    }
    for (int n : p.layers_per_stage) {
      if (n < 1)
        fail("--layers-per-stage", fmt::format("every stage needs at least 1 layer, got {}", n));
    }
    const long total = std::accumulate(p.layers_per_stage.begin(), p.layers_per_stage.end(), 0L);
    if (total != model.num_layers) {
      fail("--layers-per-stage",
           fmt::format("sums to {} but {} has {} layers", total, model.name, model.num_layers));
    }
  }
  return p;
}

}  // namespace kareus::workload
