#include "kareus/pipeline/unit_choice.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace kareus::pipeline {

double shared_unit_fraction(std::span<const OperationCost> costs, double unit_time_s) {
  long pairs = 0, shared = 0;
  for (const OperationCost& cost : costs) {
    const std::span<const Candidate> options = cost.modelled();
    auto units = [&](const Candidate& c) { return std::max(1L, std::lround(c.time_s / unit_time_s)); };
    for (std::size_t k = 1; k < options.size(); ++k) {
      ++pairs;
      if (units(options[k - 1]) == units(options[k])) ++shared;
    }
  }
  return pairs == 0 ? 0.0 : static_cast<double>(shared) / static_cast<double>(pairs);
}

UnitChoice choose_unit(std::span<const OperationCost> costs, double walk_length_s, std::size_t instructions) {
  UnitChoice choice;
  choice.instructions = instructions;
  auto steps_at = [&](double unit) { return std::max(0.0, walk_length_s) / unit; };
  choice.unit_time_s = kUnitSeries[0];
  choice.shared = choice.shared_at_coarsest = shared_unit_fraction(costs, kUnitSeries[0]);
  choice.reason = UnitChoice::Reason::kFinest;
  for (std::size_t k = 1;; ++k) {
    if (choice.shared <= kSharedLimit) {
      choice.reason = UnitChoice::Reason::kResolves;
      break;
    }
    if (k == std::size(kUnitSeries)) break;
    const double finer = kUnitSeries[k];
    if (steps_at(finer) * static_cast<double>(instructions) > kWalkBudget) {
      choice.reason = UnitChoice::Reason::kWalkBudget;
      choice.finer_unit_s = finer;
      choice.finer_walk_steps = steps_at(finer);
      break;
    }
    choice.unit_time_s = finer;
    choice.shared = shared_unit_fraction(costs, finer);
  }
  choice.walk_steps = steps_at(choice.unit_time_s);
  return choice;
}

std::string describe(const UnitChoice& choice) {
  std::string shared = fmt::format("{:.1f}% of adjacent options share a unit", 100 * choice.shared);
  if (choice.unit_time_s != kUnitSeries[0]) shared += fmt::format(", {:.1f}% at 1 ms", 100 * choice.shared_at_coarsest);
  switch (choice.reason) {
    case UnitChoice::Reason::kGiven:
      return "given";
    case UnitChoice::Reason::kResolves:
      return "chosen: " + shared;
    case UnitChoice::Reason::kWalkBudget:
      return fmt::format("chosen: {}; {} s would walk ~{:.0f} steps x {} instructions, past {:.0e}", shared,
                         choice.finer_unit_s, choice.finer_walk_steps, choice.instructions, kWalkBudget);
    case UnitChoice::Reason::kFinest:
      return "chosen, the finest tried: " + shared;
  }
  return "";
}

}  // namespace kareus::pipeline
