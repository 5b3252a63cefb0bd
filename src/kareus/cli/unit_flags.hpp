// The frontier solver's --unit-time flag of `kareus plan` and `frontier`: `auto` (the default: the
// solver chooses it from the option table, pipeline/unit_choice.hpp) or a positive number of seconds.
//
// Example:
//   add_unit_time_flag(*cmd, flags->unit_time);
//   ...after parsing: options.unit_time_s = unit_time(flags.unit_time);
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>

namespace kareus::cli {

void add_unit_time_flag(CLI::App& cmd, std::string& value);

// nullopt for `auto`; InputError naming --unit-time for anything but a positive, finite number.
std::optional<double> unit_time(const std::string& value);

}  // namespace kareus::cli
