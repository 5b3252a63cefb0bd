#include "kareus/cli/search_flags.hpp"

#include <fmt/format.h>

#include "kareus/core/error.hpp"

namespace kareus::cli {

void add_search_flags(CLI::App& cmd, PartitionSearchFlags& flags, const SearchFlagsHelp& help) {
  cmd.add_option("--mode", flags.mode, std::string(help.mode))->capture_default_str();
  cmd.add_option("--budget", flags.budget, std::string(help.budget));
  cmd.add_option("--seed", flags.seed, std::string(help.seed))->capture_default_str();
  cmd.add_option("--measurement-noise", flags.measurement_noise,
                 "Relative scatter of one measurement that MOBO models, e.g. 0.01 for a GPU whose repeated "
                 "measurements of a knob scatter by 1% (default: the simulated GPU's --noise, else 0: "
                 "measurements taken as exact)");
  cmd.add_option("--remeasure", flags.remeasure,
                 "Measurements of one knob at most under --measurement-noise: MOBO may measure a knob of its "
                 "front again where that promises more than a new knob, each counted in the budget (default 1: "
                 "each knob once; a table of measurements holds one each)");
}

void apply_search_flags(const PartitionSearchFlags& flags, const evaluate::NoiseOptions& simulated_noise,
                        search::PartitionSearchOptions& options) {
  const auto mode = search::parse_search_mode(flags.mode);
  if (!mode) throw InputError({"", 0, 0, "--mode"}, fmt::format("expected mobo or exhaustive, got '{}'", flags.mode));
  if (flags.budget && *flags.budget < 1) {
    throw InputError({"", 0, 0, "--budget"}, fmt::format("the budget must be at least 1 measurement, got {}", *flags.budget));
  }
  options.mode = *mode;
  options.budget = flags.budget ? std::optional<std::size_t>(static_cast<std::size_t>(*flags.budget)) : std::nullopt;
  options.seed = flags.seed;
  evaluate::check_noise(simulated_noise);  // the default below: its error names --noise
  options.measurement_noise = modelled_noise(flags, simulated_noise);
  if (!(options.measurement_noise >= 0 && options.measurement_noise < 0.5)) {
    throw InputError({"", 0, 0, "--measurement-noise"},
                     fmt::format("expected a relative standard deviation in [0, 0.5), got {}",
                                 options.measurement_noise));
  }
  if (flags.remeasure && *flags.remeasure < 1) {
    throw InputError({"", 0, 0, "--remeasure"}, fmt::format("a knob is measured at least once, got {}", *flags.remeasure));
  }
  if (flags.remeasure) options.max_measurements_per_knob = *flags.remeasure;
}

double modelled_noise(const PartitionSearchFlags& flags, const evaluate::NoiseOptions& simulated_noise) {
  return flags.measurement_noise.value_or(simulated_noise.sigma);
}

}  // namespace kareus::cli
