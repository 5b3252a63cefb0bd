// Seeded measurement noise: off means the model's own numbers; on, the same knob always gets the
// same draw (any thread, any order), and over many knobs the relative scatter is sigma, centred.
#include "kareus/evaluate/noisy.hpp"

#include <gtest/gtest.h>

#include <cmath>

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

}  // namespace
}  // namespace kareus::evaluate
