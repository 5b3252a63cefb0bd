// The DVFS power/performance model: monotone in clock and activity, voltage flat then rising,
// peak FLOP/s proportional to clock, zero activity draws exactly static power.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <map>

#include "kareus/core/error.hpp"
#include "kareus/hardware/gpu.hpp"
#include "kareus/hardware/stage_model.hpp"

namespace kareus::hardware {
namespace {

const GpuSpec& preset(const std::string& name) {
  static std::map<std::string, GpuSpec> cache;
  auto it = cache.find(name);
  if (it == cache.end()) it = cache.emplace(name, load_gpu_preset(name)).first;
  return it->second;
}

rc::Gen<std::string> gen_preset() {
  return rc::gen::elementOf(gpu_preset_names());
}

rc::Gen<Activity> gen_activity() {
  return rc::gen::apply(
      [](double compute, double split, double intensity, double hbm, double link) {
        return Activity{compute, intensity, (1 - compute) * split, hbm, link};
      },
      rc::gen::map(rc::gen::inRange(0, 1001), [](int x) { return x / 1000.0; }),
      rc::gen::map(rc::gen::inRange(0, 1001), [](int x) { return x / 1000.0; }),
      rc::gen::map(rc::gen::inRange(0, 1001), [](int x) { return x / 1000.0; }),
      rc::gen::map(rc::gen::inRange(0, 2001), [](int x) { return x * 1e9; }),
      rc::gen::map(rc::gen::inRange(0, 501), [](int x) { return x * 1e9; }));
}

RC_GTEST_PROP(PowerModel, PowerRisesWithClockAtFixedActivity, ()) {
  const GpuSpec& gpu = preset(*gen_preset());
  const Activity a = *gen_activity();
  const auto i = *rc::gen::inRange<std::size_t>(0, gpu.sm_clocks_mhz.size() - 1);
  const double lo = gpu.sm_clocks_mhz[i], hi = gpu.sm_clocks_mhz[i + 1];
  // Only switching capacitance draws power that grows with the clock: SMs that are busy but do no
  // arithmetic cost (next to) nothing, since the A100 fit finds the idle-SM capacitance ~0 (1e-11
  // nF on the spec-sheet presets, whose rise is lost in the static power's last bit).
  const PowerModel& p = gpu.power;
  const double switching_nf = (a.compute_sm_fraction + a.comm_sm_fraction) * p.idle_sm_capacitance_nf +
                              a.compute_sm_fraction * a.compute_intensity * p.compute_capacitance_nf +
                              a.comm_sm_fraction * p.copy_capacitance_nf;
  RC_ASSERT(power_w(gpu, lo, a) <= power_w(gpu, hi, a));
  if (switching_nf > 1e-6) {
    RC_ASSERT(power_w(gpu, lo, a) < power_w(gpu, hi, a));
  } else if (switching_nf == 0) {
    RC_ASSERT(power_w(gpu, lo, a) == power_w(gpu, hi, a));
  }
}

RC_GTEST_PROP(PowerModel, PowerRisesWithIntensityAndTraffic, ()) {
  const GpuSpec& gpu = preset(*gen_preset());
  const double f = *rc::gen::elementOf(gpu.sm_clocks_mhz);
  Activity a = *gen_activity();
  a.compute_sm_fraction = std::max(a.compute_sm_fraction, 0.01);
  a.comm_sm_fraction = std::min(a.comm_sm_fraction, 1 - a.compute_sm_fraction);
  Activity harder = a;
  harder.compute_intensity = std::min(1.0, a.compute_intensity + 0.1);
  harder.hbm_bytes_per_s += 1e9;
  RC_ASSERT(power_w(gpu, f, harder) > power_w(gpu, f, a));
  RC_ASSERT(power_w(gpu, f, a) >= gpu.static_power_w);
}

TEST(PowerModel, ZeroActivityDrawsStaticPower) {
  for (const auto& name : gpu_preset_names()) {
    const GpuSpec& gpu = preset(name);
    for (double f : {gpu.min_clock_mhz(), gpu.power.knee_clock_mhz, gpu.max_clock_mhz}) {
      EXPECT_DOUBLE_EQ(power_w(gpu, f, {}), gpu.static_power_w) << name << " at " << f;
    }
  }
}

TEST(PowerModel, VoltageFlatUpToTheKneeThenRisingToVmax) {
  for (const auto& name : gpu_preset_names()) {
    const GpuSpec& gpu = preset(name);
    const PowerModel& p = gpu.power;
    double last = 0;
    for (double f : gpu.sm_clocks_mhz) {
      double v = voltage_v(gpu, f);
      if (f <= p.knee_clock_mhz) {
        EXPECT_DOUBLE_EQ(v, p.v_min_v) << name << " at " << f;
      } else {
        EXPECT_GT(v, last) << name << " at " << f;
      }
      last = v;
    }
    EXPECT_DOUBLE_EQ(voltage_v(gpu, gpu.max_clock_mhz), p.v_max_v) << name;
    EXPECT_LT(p.v_min_v, p.v_max_v) << name;
  }
}

TEST(PowerModel, PeakFlopsProportionalToClock) {
  for (const auto& name : gpu_preset_names()) {
    const GpuSpec& gpu = preset(name);
    EXPECT_DOUBLE_EQ(peak_flops_at(gpu, gpu.max_clock_mhz), gpu.peak_bf16_flops) << name;
    for (double f : gpu.sm_clocks_mhz) {
      EXPECT_NEAR(peak_flops_at(gpu, f) / f, gpu.peak_bf16_flops / gpu.max_clock_mhz,
                  1e-9 * gpu.peak_bf16_flops / gpu.max_clock_mhz);
    }
  }
}

// Calibrated presets hold the measured level: the stage model's power at the profiles' top clock,
// without the board's limit, is the measured mean there.
TEST(PowerModel, CalibratedPresetsHoldTheMeasuredLevel) {
  for (const auto& name : gpu_preset_names()) {
    GpuSpec gpu = preset(name);
    if (!gpu.calibration.power) continue;
    gpu.power_limit_w = 0;
    EXPECT_NEAR(model_transformer_stage(gpu, gpu.max_clock_mhz).power_w,
                gpu.calibration.power->top_clock_power_w, 0.5)
        << name;
  }
}

TEST(PowerModel, ActivityOutOfRangeIsABug) {
  const GpuSpec& gpu = preset("a100-sxm4-40gb");
  EXPECT_THROW(power_w(gpu, 1410, {.compute_sm_fraction = 0.8, .comm_sm_fraction = 0.3}),
               InternalError);
  EXPECT_THROW(power_w(gpu, 1410, {.compute_sm_fraction = 1, .compute_intensity = 1.5}),
               InternalError);
  EXPECT_THROW(power_w(gpu, 1410, {.hbm_bytes_per_s = -1}), InternalError);
  EXPECT_THROW(power_w(gpu, 1425, {}), InternalError);
  EXPECT_THROW(voltage_v(gpu, 0), InternalError);
}

TEST(StageModel, SlowsWithLowerClockButLessThanOneOverF) {
  for (const auto& name : gpu_preset_names()) {
    const GpuSpec& gpu = preset(name);
    const auto top = model_transformer_stage(gpu, gpu.max_clock_mhz);
    double last_time = top.time_rel, last_power = top.power_w;
    const double throttle = stage_throttle_clock_mhz(gpu).value_or(gpu.max_clock_mhz + 1);
    for (auto it = gpu.sm_clocks_mhz.rbegin() + 1; it != gpu.sm_clocks_mhz.rend(); ++it) {
      const auto s = model_transformer_stage(gpu, *it);
      // At the power limit a lower locked clock may run where a higher one did.
      if (*it < throttle) {
        EXPECT_GT(s.time_rel, last_time) << name << " at " << *it;
        EXPECT_LT(s.power_w, last_power) << name << " at " << *it;
      } else {
        EXPECT_GE(s.time_rel, last_time * (1 - 1e-5)) << name << " at " << *it;
        EXPECT_LE(s.power_w, last_power * (1 + 1e-5)) << name << " at " << *it;
      }
      EXPECT_LT(s.time_rel / top.time_rel, gpu.max_clock_mhz / *it) << name << " at " << *it;
      last_time = s.time_rel;
      last_power = s.power_w;
    }
    EXPECT_LE(top.power_w, gpu.power_limit_w * (1 + 1e-9)) << name;
    EXPECT_GT(top.power_w, gpu.static_power_w) << name;
  }
}

// Once static power is charged for the time taken, a stage's energy against clock has an interior
// minimum: slow clocks pay static power for longer, fast ones pay V².
TEST(StageModel, EnergyHasAnInteriorMinimum) {
  for (const auto& name : gpu_preset_names()) {
    const GpuSpec& gpu = preset(name);
    std::vector<double> energy;
    for (double f : gpu.sm_clocks_mhz) {
      const auto s = model_transformer_stage(gpu, f);
      energy.push_back(s.power_w * s.time_rel);
    }
    auto best = std::min_element(energy.begin(), energy.end());
    EXPECT_NE(best, energy.begin()) << name;
    EXPECT_NE(best, energy.end() - 1) << name;
  }
}

}  // namespace
}  // namespace kareus::hardware
