#include "kareus/evaluate/noisy.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string_view>

#include "kareus/core/error.hpp"

namespace kareus::evaluate {
namespace {

// SplitMix64 (Steele, Lea and Flood, OOPSLA 2014): a good 64-bit mixer, here as a hash step.
std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

std::uint64_t hash_text(std::uint64_t h, std::string_view text) {
  for (unsigned char c : text) h = mix(h ^ c);
  return mix(h ^ text.size());
}

// (0, 1): 53 random bits, never 0, so the logarithm below is finite.
double unit(std::uint64_t bits) { return (static_cast<double>(bits >> 11) + 0.5) * 0x1.0p-53; }

}  // namespace

NoiseFactors noise_factors(const NoiseOptions& options, const workload::Partition& partition,
                           const workload::Knob& knob, int repetition) {
  if (options.sigma <= 0) return {};
  std::uint64_t h = mix(options.seed);
  h = hash_text(h, partition.key);
  h = mix(h ^ static_cast<std::uint64_t>(std::llround(knob.freq_mhz * 1000)));
  h = mix(h ^ static_cast<std::uint64_t>(knob.sms));
  h = hash_text(h, knob.slot);
  // The first measurement's draw is the hash of the knob alone.
  if (repetition > 0) h = mix(h ^ (0xd6e8feb86659fd93ULL * static_cast<std::uint64_t>(repetition)));
  // Box–Muller: two independent standard normals from two uniforms.
  const double u1 = unit(mix(h ^ 1)), u2 = unit(mix(h ^ 2));
  const double r = std::sqrt(-2 * std::log(u1));
  const double z_time = r * std::cos(2 * std::numbers::pi * u2), z_energy = r * std::sin(2 * std::numbers::pi * u2);
  return {std::max(0.5, 1 + options.sigma * z_time), std::max(0.5, 1 + options.sigma * z_energy)};
}

void check_noise(const NoiseOptions& options) {
  if (!(std::isfinite(options.sigma) && options.sigma >= 0 && options.sigma < 0.5)) {
    throw InputError({"", 0, 0, "--noise"}, fmt::format("expected a relative noise in [0, 0.5), got {}", options.sigma));
  }
}

std::string describe_noise(const NoiseOptions& options) {
  return fmt::format("noise({:g}%, seed {})", 100 * options.sigma, options.seed);
}

NoisyEvaluator::NoisyEvaluator(Evaluator inner, NoiseOptions options) : inner_(std::move(inner)), options_(options) {
  check_noise(options);
}

std::string NoisyEvaluator::name() const { return inner_.name() + "+" + describe_noise(options_); }

EvalResult NoisyEvaluator::evaluate(const workload::Partition& partition, const workload::Knob& knob) const {
  return evaluate_again(partition, knob, 0);
}

EvalResult NoisyEvaluator::evaluate_again(const workload::Partition& partition, const workload::Knob& knob,
                                          int repetition) const {
  EvalResult r = inner_.evaluate(partition, knob);
  if (!r.ok()) return r;
  const NoiseFactors f = noise_factors(options_, partition, knob, repetition);
  r.time_s *= f.time;
  r.energy_j *= f.energy;
  return r;
}

Evaluator make_noisy_evaluator(Evaluator inner, NoiseOptions options) {
  if (options.sigma == 0) return inner;
  return Evaluator(std::make_unique<NoisyEvaluator>(std::move(inner), options));
}

}  // namespace kareus::evaluate
