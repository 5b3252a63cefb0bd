// The frontier solver's flags the planning commands share: --unit-time (`kareus plan` and `frontier`):
// `auto` (the default: the solver chooses it from the option table, pipeline/unit_choice.hpp) or a
// positive number of seconds; --no-relaxation-plans (`kareus plan` and `compare`).
//
// Example:
//   add_unit_time_flag(*cmd, flags->unit_time);
//   add_no_relaxation_plans_flag(*cmd, flags->no_relaxation_plans);
//   ...after parsing: options.unit_time_s = unit_time(flags.unit_time);
//                     options.relaxation_plans = !flags.no_relaxation_plans;
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>

namespace kareus::cli {

void add_unit_time_flag(CLI::App& cmd, std::string& value);

// nullopt for `auto`; InputError naming --unit-time for anything but a positive, finite number.
std::optional<double> unit_time(const std::string& value);

// planner::PlannerOptions::relaxation_plans off: on very long pipelines the relaxation's bound costs
// several times the solve.
void add_no_relaxation_plans_flag(CLI::App& cmd, bool& value);

}  // namespace kareus::cli
