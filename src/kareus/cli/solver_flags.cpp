#include "kareus/cli/solver_flags.hpp"

#include <charconv>
#include <cmath>

#include "kareus/core/error.hpp"

namespace kareus::cli {

void add_unit_time_flag(CLI::App& cmd, std::string& value) {
  cmd.add_option("--unit-time", value,
                 "Frontier solver time unit in seconds, or auto: 1 ms, refined (0.5, 0.2, 0.1 ms, ...) until at most "
                 "5% of an operation's adjacent options share a unit, as far as the walk's budget allows "
                 "(the summary says which and why)")
      ->capture_default_str();
}

void add_no_relaxation_plans_flag(CLI::App& cmd, bool& value) {
  cmd.add_flag("--no-relaxation-plans", value,
               "Solve every method's frontier without the relaxation's plans (docs/solver.md): faster on very "
               "long pipelines, where the relaxation's bound costs several times the solve (Llama 3.3 70B, "
               "interleaved PP 16, 10,240 instructions: compare 31 s against 159 s), but further from the exact "
               "frontier near the fastest plans");
}

std::optional<double> unit_time(const std::string& value) {
  if (value == "auto") return std::nullopt;
  double seconds = 0;
  const char* end = value.data() + value.size();
  const auto [at, error] = std::from_chars(value.data(), end, seconds);
  if (error != std::errc{} || at != end || !(seconds > 0) || !std::isfinite(seconds)) {
    throw InputError({"", 0, 0, "--unit-time"}, "must be auto or a positive number of seconds");
  }
  return seconds;
}

}  // namespace kareus::cli
