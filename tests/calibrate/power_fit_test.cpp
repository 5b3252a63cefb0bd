// The A100 preset against the measured A100 stage profiles (the figure that matters), the fit that
// produced it, and bad profile input.
#include "kareus/calibrate/power_fit.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>

#include "kareus/core/error.hpp"

namespace kareus::calibrate {
namespace {

const std::string kProfiles = std::string(KAREUS_DATA_DIR) + "/perseus-sosp24/stage_profile/";

std::vector<ProfileCurve> a100_curves() {
  std::vector<ProfileCurve> curves;
  for (const char* file : {"gpt3-175b+a100_sxm_bf16.csv", "bloom+a100_sxm_bf16.csv"}) {
    auto more = read_stage_profile(kProfiles + file);
    curves.insert(curves.end(), more.begin(), more.end());
  }
  return curves;
}

TEST(StageProfile, ReadsEveryStageAndInstruction) {
  auto curves = read_stage_profile(kProfiles + "gpt3-175b+a100_sxm_bf16.csv");
  ASSERT_EQ(curves.size(), 16u);
  EXPECT_EQ(curves[0].stage, 0);
  EXPECT_EQ(curves[0].instruction, "forward");
  EXPECT_EQ(curves[1].instruction, "backward");
  for (const auto& c : curves) {
    EXPECT_EQ(c.freq_mhz.size(), 38u);
    EXPECT_EQ(c.freq_mhz.front(), 855);
    EXPECT_EQ(c.freq_mhz.back(), 1410);
    EXPECT_TRUE(std::is_sorted(c.freq_mhz.begin(), c.freq_mhz.end()));
  }
  // Power is energy / time: the measured parts draw about 475 W at 1410 MHz.
  EXPECT_NEAR(curves[0].power_w.back(), 475, 15);
}

// The acceptance figure: median relative error of the time and power shapes <= 5%, computed by
// the same function `kareus hw check` prints, on the preset of Perseus's boards (500 W: they ran
// these profiles unthrottled).
TEST(A100Calibration, ShapesFollowTheMeasuredProfiles) {
  const ShapeCheck check = check_shape(hardware::load_gpu_preset("a100-sxm4-80gb"), a100_curves());
  const ShapeSummary& s = check.summary;
  EXPECT_EQ(s.points, 2u * 16 * 38);
  EXPECT_LE(s.time_err_median, 0.05) << summary_line(s);
  EXPECT_LE(s.power_err_median, 0.05) << summary_line(s);
  // Looser bounds on the worst point, so a regression in shape shows up.
  EXPECT_LE(s.time_err_max, 0.08) << summary_line(s);
  EXPECT_LE(s.power_err_max, 0.12) << summary_line(s);
  std::cout << summary_line(s) << "\n";
}

// The 400 W board of the Kareus cluster, same silicon: locked at the top clocks it throttles.
TEST(A100Calibration, The40GbBoardThrottlesWherePerseussBoardsDidNot) {
  const ShapeCheck check = check_shape(hardware::load_gpu_preset("a100-sxm4-40gb"), a100_curves());
  EXPECT_GT(check.summary.power_err_max, 0.10) << summary_line(check.summary);
}

class A100Presets : public ::testing::TestWithParam<std::string> {};
INSTANTIATE_TEST_SUITE_P(Both, A100Presets, ::testing::Values("a100-sxm4-40gb", "a100-sxm4-80gb"),
                         [](const auto& p) { return p.param == "a100-sxm4-40gb" ? std::string("forty") : std::string("eighty"); });

TEST_P(A100Presets, ThePresetsNumbersAreWhatTheFitProduces) {
  const GpuSpec preset = hardware::load_gpu_preset(GetParam());
  const FitResult fit = fit_power_model(preset, a100_curves());
  const hardware::PowerModel &got = fit.gpu.power, &want = preset.power;
  auto near = [](double a, double b) { return std::abs(a - b) <= 1e-4 * std::abs(b); };
  EXPECT_TRUE(near(got.knee_clock_mhz, want.knee_clock_mhz)) << got.knee_clock_mhz;
  EXPECT_TRUE(near(got.v_min_v, want.v_min_v)) << got.v_min_v;
  EXPECT_EQ(got.v_max_v, want.v_max_v);
  EXPECT_TRUE(near(got.compute_capacitance_nf, want.compute_capacitance_nf))
      << got.compute_capacitance_nf;
  EXPECT_TRUE(near(got.idle_sm_capacitance_nf, want.idle_sm_capacitance_nf))
      << got.idle_sm_capacitance_nf;
  EXPECT_TRUE(near(got.copy_capacitance_nf, want.copy_capacitance_nf)) << got.copy_capacitance_nf;
  EXPECT_EQ(got.hbm_pj_per_byte, want.hbm_pj_per_byte);
  EXPECT_EQ(got.nvlink_pj_per_byte, want.nvlink_pj_per_byte);
  EXPECT_EQ(fit.check.summary.points, 2u * 16 * 38);
  EXPECT_TRUE(near(preset.calibration.power->power_err_median_pct,
                   100 * fit.check.summary.power_err_median));
}

TEST(A100Calibration, FitIsIndependentOfTheStartingPowerModel) {
  GpuSpec base = hardware::load_gpu_preset("a100-sxm4-40gb");
  const FitResult reference = fit_power_model(base, a100_curves());
  base.power.knee_clock_mhz = 400;
  base.power.v_min_v = 0.9;
  base.power.idle_sm_capacitance_nf = 0;
  base.power.compute_capacitance_nf *= 3;
  base.power.copy_capacitance_nf *= 3;
  EXPECT_EQ(fit_power_model(base, a100_curves()).gpu.power, reference.gpu.power);
}

TEST(A100Calibration, FittingAShiftedProfileMovesTheKnee) {
  // Stretch the measured clocks by 10%: the fitted knee follows, showing the fit reads the data.
  GpuSpec base = hardware::load_gpu_preset("a100-sxm4-40gb");
  auto curves = a100_curves();
  const double knee = fit_power_model(base, curves).gpu.power.knee_clock_mhz;
  for (auto& c : curves) {
    for (auto& f : c.freq_mhz) f = 1410 - (1410 - f) * 1.1;
  }
  EXPECT_LT(fit_power_model(base, curves).gpu.power.knee_clock_mhz, knee - 20);
}

class BadProfile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("kareus-hw-profile-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string error_of(const std::string& csv) {
    auto path = dir_ / "p.csv";
    std::ofstream(path) << csv;
    try {
      auto curves = read_stage_profile(path);
      check_shape(hardware::load_gpu_preset("a40"), curves);
    } catch (const InputError& e) {
      return e.what();
    }
    ADD_FAILURE() << "no error for " << csv;
    return {};
  }
  std::filesystem::path dir_;
};

TEST_F(BadProfile, MissingColumn) {
  EXPECT_NE(error_of("stage,instruction,frequency,time\n0,forward,1000,1\n").find("energy"),
            std::string::npos);
}

TEST_F(BadProfile, NonPositiveTimeHasLineAndColumn) {
  std::string e =
      error_of("stage,instruction,frequency,time,energy\n0,forward,1000,1,2\n0,forward,900,0,2\n");
  EXPECT_NE(e.find("p.csv:3:"), std::string::npos) << e;
}

TEST_F(BadProfile, DuplicateClock) {
  std::string e =
      error_of("stage,instruction,frequency,time,energy\n0,forward,1000,1,2\n0,forward,1000,1,2\n");
  EXPECT_NE(e.find("twice"), std::string::npos) << e;
}

TEST_F(BadProfile, SingleClockCurve) {
  std::string e = error_of("stage,instruction,frequency,time,energy\n0,forward,1000,1,2\n");
  EXPECT_NE(e.find("at least two"), std::string::npos) << e;
}

TEST_F(BadProfile, ClockAboveTheGpusMax) {
  std::string e =
      error_of("stage,instruction,frequency,time,energy\n0,forward,1000,1,2\n0,forward,1980,1,2\n");
  EXPECT_NE(e.find("max clock"), std::string::npos) << e;
}

}  // namespace
}  // namespace kareus::calibrate
