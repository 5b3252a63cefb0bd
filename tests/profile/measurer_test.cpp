// The measurement protocol on a fake GPU: the window is filled with whole runs, time and energy are
// per run, the knob's clock is the one the runs saw, the clocks are reset after, and the executor
// allocates once per partition. The fake runs the simulated model at the clock the device is
// really at, so a protocol that measured at the wrong clock or divided by the wrong count would
// disagree with the model evaluated independently here.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cmath>

#include "kareus/core/error.hpp"
#include "kareus/evaluate/noisy.hpp"
#include "kareus/evaluate/simulated.hpp"
#include "kareus/hardware/gpu.hpp"
#include "kareus/profile/fake_executor.hpp"
#include "kareus/profile/measurer.hpp"
#include "kareus/workload/model.hpp"

namespace kareus::profile {
namespace {

struct Rig {
  hardware::GpuSpec gpu = hardware::load_gpu_preset("a100-sxm4-40gb");
  std::shared_ptr<runtime::ManualTimeSource> time = std::make_shared<runtime::ManualTimeSource>();
  std::shared_ptr<runtime::FakeGpu> device =
      std::make_shared<runtime::FakeGpu>(runtime::make_fake_gpu_config(gpu, 0, time));
  LocalGroup world;
  FakeExecutor executor;
  runtime::FrequencyController controller{{device}, {.reset_on_signals = false}};
  runtime::EnergyMonitor monitor{{device}, {.time = time}};
  Measurer measurer;
  explicit Rig(MeasurementOptions options, FakeExecutorOptions fake = {})
      : executor(gpu, device, time, nullptr, fake),
        measurer(world, executor, controller, monitor,
                 [&] {
                   options.idle = [t = time](double s) { t->advance_s(s); };
                   return options;
                 }()) {}
};

std::vector<workload::Partition> partitions(int tp) {
  workload::ModelSpec model = workload::load_model("llama-3.2-3b");
  workload::ParallelConfig parallel;
  parallel.tp = tp;
  return workload::build_partitions(model, workload::validated(model, parallel));
}

TEST(Measurer, TimeAndEnergyPerRunMatchTheModelAtTheKnobsClock) {
  Rig rig({.warmup_s = 0.5, .window_s = 5, .cool_down_s = 0.2});
  const auto parts = partitions(8);
  const evaluate::SimulatedEvaluator sim(rig.gpu);
  for (const auto& key : {"fwd_attn", "bwd_mlp"}) {
    const workload::Partition& p = workload::find_partition(parts, key);
    for (double mhz : {1410.0, 1005.0}) {
      const workload::Knob knob{mhz, 12, p.slots.front().name};
      const KnobMeasurement m = rig.measurer.measure(p, knob);
      const evaluate::EvalResult want = sim.evaluate(p, knob);
      EXPECT_NEAR(m.time_s, want.time_s, 1e-9 * want.time_s) << key << " @" << mhz;
      // The fake draws the model's mean power up to the bisection's resolution.
      EXPECT_NEAR(m.energy_j, want.energy_j, 1e-6 * want.energy_j) << key << " @" << mhz;
      // Whole runs filling the window, not one more than needed.
      EXPECT_GE(static_cast<double>(m.repetitions) * m.time_s, 5.0 - 1e-9);
      EXPECT_LT(static_cast<double>(m.repetitions - 1) * m.time_s, 5.0);
      ASSERT_EQ(m.rank_time_s.size(), 1u);
      EXPECT_EQ(rig.device->locked_sm_clocks_mhz(), std::make_pair(static_cast<int>(mhz), static_cast<int>(mhz)));
    }
    EXPECT_EQ(rig.executor.allocations(key), 1);
  }
  rig.measurer.reset_clocks();
  EXPECT_FALSE(rig.device->locked_sm_clocks_mhz().has_value());
}

// `profile --device fake --noise` measures what the noisy simulated GPU reports for the same knob:
// the same seeded draw, on time and on the energy the device draws over that time.
TEST(Measurer, FakeNoiseIsTheNoisySimulatedGpusForTheSameKnob) {
  const evaluate::NoiseOptions noise{.sigma = 0.03, .seed = 11};
  Rig rig({.warmup_s = 0.5, .window_s = 5, .cool_down_s = 0.2}, {.noise = noise});
  const auto parts = partitions(8);
  const evaluate::Evaluator noisy =
      evaluate::make_noisy_evaluator(evaluate::make_simulated_evaluator(rig.gpu), noise);
  const evaluate::SimulatedEvaluator clean(rig.gpu);
  int moved = 0;
  for (const auto& key : {"fwd_attn", "bwd_mlp"}) {
    const workload::Partition& p = workload::find_partition(parts, key);
    for (double mhz : {1410.0, 1005.0}) {
      const workload::Knob knob{mhz, 12, p.slots.front().name};
      const KnobMeasurement m = rig.measurer.measure(p, knob);
      const evaluate::EvalResult want = noisy.evaluate(p, knob);
      EXPECT_NEAR(m.time_s, want.time_s, 1e-9 * want.time_s) << key << " @" << mhz;
      EXPECT_NEAR(m.energy_j, want.energy_j, 1e-6 * want.energy_j) << key << " @" << mhz;
      moved += std::abs(m.time_s / clean.evaluate(p, knob).time_s - 1) > 1e-6;
    }
  }
  EXPECT_GT(moved, 0);
  EXPECT_THROW(FakeExecutor(rig.gpu, rig.device, rig.time, nullptr, {.noise = {.sigma = 0.7}}), InputError);
}

TEST(Measurer, StoppingTheControllerResetsTheClocks) {
  Rig rig({.warmup_s = 0, .window_s = 1, .cool_down_s = 0});
  const auto parts = partitions(2);
  rig.measurer.measure(workload::find_partition(parts, "fwd_mlp"), {1200, 8, "none"});
  ASSERT_TRUE(rig.device->locked_sm_clocks_mhz().has_value());
  rig.controller.stop();
  EXPECT_FALSE(rig.device->locked_sm_clocks_mhz().has_value());
}

TEST(Measurer, RejectsAWindowThatIsNotPositive) {
  const auto make = [](double window_s) { Rig rig({.window_s = window_s}); };
  EXPECT_THROW(make(0), InputError);
  EXPECT_THROW(make(std::nan("")), InputError);
}

// Any knob of any partition, any window: the window holds the agreed whole runs and the figures are
// the model's at that knob, whatever was measured before (the protocol carries no state over).
RC_GTEST_PROP(Measurer, AnyKnobAndWindowMeasuresTheModel, ()) {
  const int tp = *rc::gen::element(2, 4, 8);
  const auto parts = partitions(tp);
  const auto& p = parts[*rc::gen::inRange<std::size_t>(0, parts.size())];
  const double window_s = *rc::gen::element(0.3, 1.0, 5.0);
  Rig rig({.warmup_s = *rc::gen::element(0.0, 0.5), .window_s = window_s, .cool_down_s = 0.1});
  const auto& clocks = rig.gpu.sm_clocks_mhz;
  for (int k = 0; k < 3; ++k) {
    const double mhz = clocks[*rc::gen::inRange<std::size_t>(clocks.size() / 2, clocks.size())];
    std::vector<std::string> slots = p.slot_names();
    const std::string slot = slots[*rc::gen::inRange<std::size_t>(0, slots.size())];
    const workload::Knob knob{mhz, p.collective ? *rc::gen::inRange(1, 40) : 0, slot};
    const KnobMeasurement m = rig.measurer.measure(p, knob);
    const evaluate::EvalResult want = evaluate::SimulatedEvaluator(rig.gpu).evaluate(p, knob);
    RC_ASSERT(std::abs(m.time_s - want.time_s) <= 1e-9 * want.time_s);
    RC_ASSERT(std::abs(m.energy_j - want.energy_j) <= 1e-6 * want.energy_j);
    RC_ASSERT(static_cast<double>(m.repetitions) * m.time_s >= window_s - 1e-9);
    RC_ASSERT(static_cast<double>(m.repetitions - 1) * m.time_s < window_s);
  }
}

}  // namespace
}  // namespace kareus::profile
