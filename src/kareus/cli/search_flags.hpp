// The per-partition search flags of `kareus plan`, `compare`, `search` and `profile`: --mode
// (mobo or exhaustive), --budget (measurements per partition) and --seed. Each command keeps its
// own default mode and help texts; the parsing and its error are one.
//
// Example:
//   add_search_flags(*cmd, flags->search, {.mode = "...", .budget = "...", .seed = "Seed of the search"});
//   ...after parsing: apply_search_flags(flags.search, options.search);
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "kareus/search/partition_search.hpp"

namespace kareus::cli {

struct PartitionSearchFlags {
  std::string mode = "mobo";
  std::optional<long long> budget;  // signed, so that a negative count is refused, not wrapped around
  std::uint64_t seed = 0;
};

struct SearchFlagsHelp {
  std::string_view mode, budget, seed;
};

void add_search_flags(CLI::App& cmd, PartitionSearchFlags& flags, const SearchFlagsHelp& help);

// Sets the mode, budget and seed of `options`; InputError naming --mode and the value given, or
// --budget below 1 measurement.
void apply_search_flags(const PartitionSearchFlags& flags, search::PartitionSearchOptions& options);

}  // namespace kareus::cli
