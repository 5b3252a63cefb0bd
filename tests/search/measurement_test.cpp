// The effective energy's scatter the search models, against the scatter the noisy evaluator draws:
// for any time, energy, static power and noise, the relative sd of E·f_e − P·t·f_t over many draws
// of the evaluator's own noise factors matches effective_energy_relative_sd().
#include "kareus/search/measurement.hpp"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <cmath>

#include "kareus/evaluate/noisy.hpp"

namespace kareus::search {
namespace {

RC_GTEST_PROP(EffectiveEnergyNoise, IsTheScatterOfTheNoisyEvaluatorsDraws, ()) {
  const double sigma = *rc::gen::inRange(5, 50) / 1000.0;
  const double time_s = *rc::gen::inRange(1, 1000) * 1e-5;
  const double static_power_w = *rc::gen::inRange(1, 300);
  const double effective_share = *rc::gen::inRange(20, 96) / 100.0;  // of the energy
  const double energy_j = static_power_w * time_s / (1 - effective_share);
  const double effective_j = energy_j - static_power_w * time_s;

  workload::Partition partition;
  partition.key = "fwd_mlp";
  const workload::Knob knob{1410, 12, "linear_0"};
  constexpr int kDraws = 20000;
  double sum = 0, sum2 = 0;
  for (int d = 0; d < kDraws; ++d) {
    const evaluate::NoiseFactors f = evaluate::noise_factors({sigma, static_cast<std::uint64_t>(d)}, partition, knob);
    const double relative = (energy_j * f.energy - static_power_w * time_s * f.time) / effective_j - 1;
    sum += relative;
    sum2 += relative * relative;
  }
  const double mean = sum / kDraws;
  const double measured_sd = std::sqrt(sum2 / kDraws - mean * mean);
  const double modelled_sd = effective_energy_relative_sd(sigma, time_s, effective_j, static_power_w);
  // The sd of 20,000 normal draws is within 2.5% of the truth at about 5 standard errors.
  RC_ASSERT(std::abs(measured_sd / modelled_sd - 1) < 0.025);
  RC_ASSERT(modelled_sd >= sigma * (1 - 1e-12));
}

TEST(EffectiveEnergyNoise, WithoutStaticPowerIsTheEnergysOwn) {
  EXPECT_DOUBLE_EQ(effective_energy_relative_sd(0.01, 0.002, 0.5, 0), 0.01);
  // Static power a third of the energy: sigma·√(1 + 1/9) / (2/3).
  EXPECT_NEAR(effective_energy_relative_sd(0.01, 0.001, 200, 1e5), 0.01 * std::sqrt(1 + 1.0 / 9) * 1.5, 1e-12);
}

}  // namespace
}  // namespace kareus::search
