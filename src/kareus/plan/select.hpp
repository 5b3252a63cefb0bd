// Picking one plan from a frontier: the fastest, the most frugal, the most frugal that meets a
// deadline, or the fastest within an energy budget.
//
// Example:
//   Target target = parse_target("deadline:3.1");
//   std::size_t chosen = select_plan(frontier_points, target);
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kareus/core/pareto.hpp"

namespace kareus::plan {

struct Target {
  enum class Kind { kMaxThroughput, kMinEnergy, kDeadline, kEnergyBudget };
  Kind kind = Kind::kMaxThroughput;
  double value = 0;  // seconds for kDeadline, joules for kEnergyBudget
};

// Parses max-throughput | min-energy | deadline:SECONDS | energy:JOULES; InputError otherwise.
Target parse_target(std::string_view text);
std::string to_string(const Target& target);

// Index of the chosen point of a non-empty frontier. An unreachable target is an InputError that
// states the reachable range.
std::size_t select_plan(std::span<const TimeEnergy> frontier, const Target& target);

// Which plans of a frontier a plan set holds: "all" (nullopt) or a count (`flag` names the option
// in the InputError for anything else).
std::optional<std::size_t> parse_plan_count(std::string_view text, std::string_view flag);

// Indices of `count` (nullopt: all) plans spread evenly over a frontier of `points` plans, time
// ascending: the fastest and the slowest among them whenever count >= 2.
std::vector<std::size_t> evenly_spaced_plans(std::size_t points, std::optional<std::size_t> count);

}  // namespace kareus::plan
