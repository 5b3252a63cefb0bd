#include "kareus/plan/select.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>

#include "kareus/core/error.hpp"

namespace kareus::plan {
namespace {

double parse_positive(std::string_view text, std::string_view what) {
  double value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || ptr != text.data() + text.size() || !std::isfinite(value) || value <= 0) {
    throw InputError({"", 0, 0, "--target"}, fmt::format("'{}' is not a positive number of {}", text, what));
  }
  return value;
}

}  // namespace

Target parse_target(std::string_view text) {
  if (text == "max-throughput") return {Target::Kind::kMaxThroughput, 0};
  if (text == "min-energy") return {Target::Kind::kMinEnergy, 0};
  if (text.starts_with("deadline:")) return {Target::Kind::kDeadline, parse_positive(text.substr(9), "seconds")};
  if (text.starts_with("energy:")) return {Target::Kind::kEnergyBudget, parse_positive(text.substr(7), "joules")};
  throw InputError({"", 0, 0, "--target"},
                   fmt::format("'{}' is not a target: use max-throughput, min-energy, deadline:SECONDS or "
                               "energy:JOULES", text));
}

std::string to_string(const Target& target) {
  switch (target.kind) {
    case Target::Kind::kMaxThroughput: return "max-throughput";
    case Target::Kind::kMinEnergy: return "min-energy";
    case Target::Kind::kDeadline: return fmt::format("deadline:{}", target.value);
    case Target::Kind::kEnergyBudget: return fmt::format("energy:{}", target.value);
  }
  return "?";
}

std::size_t select_plan(std::span<const TimeEnergy> frontier, const Target& target) {
  KAREUS_CHECK(!frontier.empty(), "cannot select a plan from an empty frontier");
  auto by_time = [&](std::size_t a, std::size_t b) {
    return std::tie(frontier[a].time_s, frontier[a].energy_j) < std::tie(frontier[b].time_s, frontier[b].energy_j);
  };
  auto by_energy = [&](std::size_t a, std::size_t b) {
    return std::tie(frontier[a].energy_j, frontier[a].time_s) < std::tie(frontier[b].energy_j, frontier[b].time_s);
  };
  std::size_t fastest = 0, frugal = 0;
  for (std::size_t i = 1; i < frontier.size(); ++i) {
    if (by_time(i, fastest)) fastest = i;
    if (by_energy(i, frugal)) frugal = i;
  }
  switch (target.kind) {
    case Target::Kind::kMaxThroughput: return fastest;
    case Target::Kind::kMinEnergy: return frugal;
    case Target::Kind::kDeadline: {
      std::optional<std::size_t> best;
      for (std::size_t i = 0; i < frontier.size(); ++i) {
        if (frontier[i].time_s <= target.value && (!best || by_energy(i, *best))) best = i;
      }
      if (!best) {
        throw InputError({"", 0, 0, "--target"},
                         fmt::format("deadline {:.4f} s is unreachable: plans take {:.4f} s to {:.4f} s",
                                     target.value, frontier[fastest].time_s, frontier[frugal].time_s));
      }
      return *best;
    }
    case Target::Kind::kEnergyBudget: {
      std::optional<std::size_t> best;
      for (std::size_t i = 0; i < frontier.size(); ++i) {
        if (frontier[i].energy_j <= target.value && (!best || by_time(i, *best))) best = i;
      }
      if (!best) {
        throw InputError({"", 0, 0, "--target"},
                         fmt::format("energy budget {:.1f} J is unreachable: plans need {:.1f} J to {:.1f} J",
                                     target.value, frontier[frugal].energy_j, frontier[fastest].energy_j));
      }
      return *best;
    }
  }
  return fastest;
}

std::optional<std::size_t> parse_plan_count(std::string_view text, std::string_view flag) {
  if (text == "all") return std::nullopt;
  std::size_t count = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), count);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
    throw InputError({"", 0, 0, std::string(flag)}, fmt::format("expected 'all' or a count, got '{}'", text));
  }
  return count;
}

std::vector<std::size_t> evenly_spaced_plans(std::size_t points, std::optional<std::size_t> count) {
  const std::size_t n = std::min(points, count.value_or(points));
  std::vector<std::size_t> indices;
  if (n == 0) return indices;
  if (n == 1) return {0};
  for (std::size_t k = 0; k < n; ++k) {
    std::size_t i = (k * (points - 1) + (n - 1) / 2) / (n - 1);
    if (indices.empty() || indices.back() != i) indices.push_back(i);
  }
  return indices;
}

}  // namespace kareus::plan
