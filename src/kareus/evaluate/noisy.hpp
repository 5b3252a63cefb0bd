// Measurement noise for a model evaluator: real measurements of the same knob scatter by a percent
// or two (power sampling, clock settling, run-to-run variation), and a search that only ever sees
// noise-free model values is tested on an easier problem than a GPU poses. NoisyEvaluator wraps
// an evaluator and multiplies its time and its energy each by (1 + sigma * z), z standard normal.
//
// z is drawn from a hash of (seed, partition key, knob, repetition), not from a shared stream: the
// same measurement gets the same noise on any thread and in any call order (a search run twice is
// byte-identical), and different knobs, partitions, seeds or repetitions of one knob (a search
// measuring a knob again) get independent draws. Every output names the noise
// (name() is e.g. "simulated+noise(1%, seed 0)").
//
// Thread-safety: as the wrapped evaluator; this layer holds no mutable state.
// Example:
//   Evaluator eval = make_noisy_evaluator(make_simulated_evaluator(gpu), {.sigma = 0.01, .seed = 7});
#pragma once

#include <cstdint>

#include "kareus/evaluate/evaluator.hpp"

namespace kareus::evaluate {

struct NoiseOptions {
  double sigma = 0;  // relative standard deviation of time and of energy; 0 = off
  std::uint64_t seed = 0;
};

// The noise factors (1 + sigma * z) for time and energy of one (partition, knob) measured for the
// `repetition`-th time after its first: independent standard normals z from a hash of the seed, the
// key, the knob and the repetition; clamped at 0.5 so that a rare draw never turns a cost negative.
struct NoiseFactors {
  double time = 1, energy = 1;
};
NoiseFactors noise_factors(const NoiseOptions& options, const workload::Partition& partition,
                           const workload::Knob& knob, int repetition = 0);

// InputError naming --noise unless 0 <= sigma < 0.5.
void check_noise(const NoiseOptions& options);
// "noise(1%, seed 0)": how every output that carries noise names it.
std::string describe_noise(const NoiseOptions& options);

class NoisyEvaluator final : public EvaluatorImpl {
 public:
  // check_noise's InputError.
  NoisyEvaluator(Evaluator inner, NoiseOptions options);

  std::string name() const override;
  Provenance provenance() const override { return inner_.provenance(); }
  bool thread_safe() const override { return inner_.thread_safe(); }
  const hardware::GpuSpec& gpu() const override { return inner_.gpu(); }
  EvalResult evaluate(const workload::Partition& partition, const workload::Knob& knob) const override;
  EvalResult evaluate_again(const workload::Partition& partition, const workload::Knob& knob,
                            int repetition) const override;

  const NoiseOptions& options() const { return options_; }
  const Evaluator& inner() const { return inner_; }

 private:
  Evaluator inner_;
  NoiseOptions options_;
};

// `inner` itself when sigma is 0, else wrapped.
Evaluator make_noisy_evaluator(Evaluator inner, NoiseOptions options);

}  // namespace kareus::evaluate
