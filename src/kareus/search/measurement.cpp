#include "kareus/search/measurement.hpp"

#include <algorithm>

#include <array>
#include <cmath>
#include <utility>

namespace kareus::search {
namespace {

constexpr std::array<std::pair<PickPass, std::string_view>, 9> kPassNames{{
    {PickPass::kBaseline, "baseline"},
    {PickPass::kInitial, "initial"},
    {PickPass::kHvReal, "hv_real"},
    {PickPass::kHvEffective, "hv_effective"},
    {PickPass::kFastest, "fastest"},
    {PickPass::kUncertain, "uncertain"},
    {PickPass::kBackfill, "backfill"},
    {PickPass::kExhaustive, "exhaustive"},
    {PickPass::kRandom, "random"},
}};

}  // namespace

std::string_view to_string(PickPass pass) {
  for (const auto& [p, name] : kPassNames) {
    if (p == pass) return name;
  }
  return "unknown";
}

std::optional<PickPass> parse_pick_pass(std::string_view text) {
  for (const auto& [p, name] : kPassNames) {
    if (name == text) return p;
  }
  return std::nullopt;
}

void average_in(Measurement& mean, const Measurement& m, int n) {
  const double weight = 1.0 / n;
  mean.time_s += (m.time_s - mean.time_s) * weight;
  mean.energy_j += (m.energy_j - mean.energy_j) * weight;
  mean.effective_energy_j += (m.effective_energy_j - mean.effective_energy_j) * weight;
}

std::size_t measured_again(std::span<const Measurement> measurements) {
  return static_cast<std::size_t>(
      std::ranges::count_if(measurements, [](const Measurement& m) { return m.ok && m.repeat > 0; }));
}

double effective_energy_relative_sd(double sigma, double time_s, double effective_energy_j, double static_power_w) {
  const double static_energy = static_power_w * time_s;
  return sigma * std::hypot(effective_energy_j + static_energy, static_energy) / std::abs(effective_energy_j);
}

}  // namespace kareus::search
