// The per-partition search flags of `kareus plan`, `compare`, `search` and `profile`: --mode
// (mobo or exhaustive), --budget (measurements per partition), --seed, --measurement-noise (the
// scatter of one measurement the search models) and --remeasure (how often one knob may be
// measured under it). Each command keeps its own default mode and help texts; the parsing and its
// error are one.
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

#include "kareus/evaluate/noisy.hpp"
#include "kareus/search/partition_search.hpp"

namespace kareus::cli {

struct PartitionSearchFlags {
  std::string mode = "mobo";
  std::optional<long long> budget;  // signed, so that a negative count is refused, not wrapped around
  std::uint64_t seed = 0;
  std::optional<double> measurement_noise;
  std::optional<int> remeasure;
};

struct SearchFlagsHelp {
  std::string_view mode, budget, seed;
};

void add_search_flags(CLI::App& cmd, PartitionSearchFlags& flags, const SearchFlagsHelp& help);

// Sets the mode, budget, seed, measurement noise and measurements per knob of `options`: the noise
// the flag gives, else `simulated_noise` (the --noise of a simulated GPU, which the search is then
// told of). InputError naming --mode and the value given, --budget below 1 measurement, --noise as
// check_noise does, --measurement-noise outside [0, 0.5), or --remeasure below 1.
void apply_search_flags(const PartitionSearchFlags& flags, const evaluate::NoiseOptions& simulated_noise,
                        search::PartitionSearchOptions& options);
// The measurement noise the search models: --measurement-noise, else the simulated GPU's --noise.
double modelled_noise(const PartitionSearchFlags& flags, const evaluate::NoiseOptions& simulated_noise);

}  // namespace kareus::cli
