// Seeded measurement noise: off means the model's own numbers; on, the same measurement always
// gets the same draw (any thread, any order), over many knobs, or many repetitions of one, the
// relative scatter is sigma, centred; a knob measured again draws afresh, a model answers the same.
#include "kareus/evaluate/noisy.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "kareus/core/error.hpp"
#include "kareus/evaluate/simulated.hpp"

namespace kareus::evaluate {
namespace {

struct World {
  workload::ModelSpec model = workload::load_model("llama-3.2-3b");
  std::vector<workload::Partition> parts =
      workload::build_partitions(model, workload::validated(model, workload::ParallelConfig{}));
  hardware::GpuSpec gpu = hardware::load_gpu_preset("a100-sxm4-40gb");
};
const World& world() {
  static const World w;
  return w;
}

TEST(Noise, OffIsTheModelItself) {
  Evaluator plain = make_simulated_evaluator(world().gpu);
  Evaluator off = make_noisy_evaluator(make_simulated_evaluator(world().gpu), {0, 5});
  const auto& p = workload::find_partition(world().parts, "fwd_mlp");
  for (double f : {900.0, 1200.0, 1410.0}) {
    EvalResult a = plain.evaluate(p, {f, 12, "linear_0"}), b = off.evaluate(p, {f, 12, "linear_0"});
    EXPECT_EQ(a.time_s, b.time_s);
    EXPECT_EQ(a.energy_j, b.energy_j);
  }
  EXPECT_EQ(off.name(), "simulated");
}

TEST(Noise, SameKnobSameDrawAndTheNameSaysSo) {
  Evaluator noisy = make_noisy_evaluator(make_simulated_evaluator(world().gpu), {0.01, 3});
  EXPECT_EQ(noisy.name(), "simulated+noise(1%, seed 3)");
  const auto& p = workload::find_partition(world().parts, "bwd_attn");
  const workload::Knob k{1005, 9, "linear_0"};
  const EvalResult first = noisy.evaluate(p, k);
  noisy.evaluate(p, {1410, 9, "linear_0"});
  const EvalResult again = noisy.evaluate(p, k);
  EXPECT_EQ(first.time_s, again.time_s);
  EXPECT_EQ(first.energy_j, again.energy_j);
  const EvalResult truth = make_simulated_evaluator(world().gpu).evaluate(p, k);
  EXPECT_NE(first.time_s, truth.time_s);
  EXPECT_THROW(NoisyEvaluator(make_simulated_evaluator(world().gpu), {0.7, 0}), InputError);
}

// Over every knob of every partition's grid: mean factor 1, standard deviation sigma, time and
// energy uncorrelated, and another seed gives other draws.
TEST(Noise, ScatterIsSigmaCentredAndIndependent) {
  const NoiseOptions o{0.02, 11}, other{0.02, 12};
  double n = 0, st = 0, se = 0, stt = 0, see = 0, ste = 0, same = 0;
  for (const auto& p : world().parts) {
    for (double f = 900; f <= 1410; f += 30) {
      for (int sms = 3; sms <= 30; sms += 3) {
        for (const std::string& slot : p.slot_names()) {
          const NoiseFactors a = noise_factors(o, p, {f, sms, slot});
          const double dt = a.time - 1, de = a.energy - 1;
          n += 1, st += dt, se += de, stt += dt * dt, see += de * de, ste += dt * de;
          same += noise_factors(other, p, {f, sms, slot}).time == a.time;
        }
      }
    }
  }
  ASSERT_GT(n, 2000);
  EXPECT_NEAR(st / n, 0, 3 * 0.02 / std::sqrt(n));
  EXPECT_NEAR(se / n, 0, 3 * 0.02 / std::sqrt(n));
  EXPECT_NEAR(std::sqrt(stt / n), 0.02, 0.002);
  EXPECT_NEAR(std::sqrt(see / n), 0.02, 0.002);
  EXPECT_NEAR(ste / n / (0.02 * 0.02), 0, 0.1);
  EXPECT_EQ(same, 0);
}

// A knob measured again: repetition 0 is the first measurement's draw; each repetition after it
// an independent one, scattered by sigma around 1; through the evaluator as through the factors.
// A deterministic model answers every repetition alike.
TEST(Noise, EachRepetitionOfAKnobIsItsOwnDrawAndTheFirstIsTheKnobs) {
  const NoiseOptions o{0.02, 5};
  const auto& p = workload::find_partition(world().parts, "bwd_mlp");
  const workload::Knob k{1200, 12, "linear_0"};
  Evaluator noisy = make_noisy_evaluator(make_simulated_evaluator(world().gpu), o);
  const Evaluator plain = make_simulated_evaluator(world().gpu);
  const EvalResult truth = plain.evaluate(p, k);
  EXPECT_EQ(noisy.evaluate(p, k, 0).time_s, noisy.evaluate(p, k).time_s);
  EXPECT_EQ(noise_factors(o, p, k, 0).time, noise_factors(o, p, k).time);
  double n = 0, st = 0, stt = 0, see = 0, ste = 0;
  std::set<double> draws;
  for (int r = 1; r <= 4000; ++r) {
    const NoiseFactors f = noise_factors(o, p, k, r);
    const EvalResult m = noisy.evaluate(p, k, r);
    EXPECT_DOUBLE_EQ(m.time_s, truth.time_s * f.time);
    EXPECT_DOUBLE_EQ(m.energy_j, truth.energy_j * f.energy);
    EXPECT_EQ(plain.evaluate(p, k, r).time_s, truth.time_s);
    const double dt = f.time - 1, de = f.energy - 1;
    n += 1, st += dt, stt += dt * dt, see += de * de, ste += dt * de;
    draws.insert(f.time);
  }
  EXPECT_EQ(draws.size(), 4000u);
  EXPECT_EQ(draws.count(noise_factors(o, p, k).time), 0u);
  EXPECT_NEAR(st / n, 0, 3 * 0.02 / std::sqrt(n));
  EXPECT_NEAR(std::sqrt(stt / n), 0.02, 0.0015);
  EXPECT_NEAR(std::sqrt(see / n), 0.02, 0.0015);
  EXPECT_NEAR(ste / n / (0.02 * 0.02), 0, 0.1);
}

}  // namespace
}  // namespace kareus::evaluate
