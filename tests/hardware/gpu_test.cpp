// GPU presets: every bundled preset loads and is self-consistent; bad GPU JSON is an InputError
// that names the file and the field.
#include "kareus/hardware/gpu.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "kareus/core/error.hpp"
#include "kareus/core/json_fields.hpp"
#include "kareus/core/paths.hpp"

namespace kareus::hardware {
namespace {

using nlohmann::ordered_json;

TEST(GpuPresets, TheIssuesPresetsAreBundled) {
  auto names = gpu_preset_names();
  for (const char* expected : {"a100-sxm4-40gb", "a40", "h100-sxm", "h200"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), expected), names.end()) << expected;
  }
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
}

TEST(GpuPresets, EveryPresetLoadsAndIsSelfConsistent) {
  for (const auto& name : gpu_preset_names()) {
    SCOPED_TRACE(name);
    GpuSpec gpu = load_gpu_preset(name);
    EXPECT_EQ(gpu.name, name);
    EXPECT_FALSE(gpu.display_name.empty());
    EXPECT_FALSE(gpu.source.empty());
    EXPECT_GT(gpu.sms, 0);
    EXPECT_TRUE(std::is_sorted(gpu.sm_clocks_mhz.begin(), gpu.sm_clocks_mhz.end()));
    EXPECT_EQ(gpu.max_clock_mhz, gpu.sm_clocks_mhz.back());
    EXPECT_TRUE(gpu.supports_clock(gpu.max_clock_mhz));
    EXPECT_TRUE(gpu.supports_clock(gpu.min_clock_mhz()));
    EXPECT_LT(gpu.static_power_w, gpu.tdp_w);
    EXPECT_GE(gpu.power.knee_clock_mhz, gpu.min_clock_mhz());
    EXPECT_LE(gpu.power.knee_clock_mhz, gpu.max_clock_mhz);
    // FLOP/s per SM per cycle of a tensor-core GPU: between 256 and 8192 at bf16.
    double per_sm_cycle = gpu.peak_bf16_flops / gpu.sms / (gpu.max_clock_mhz * 1e6);
    EXPECT_GT(per_sm_cycle, 256);
    EXPECT_LT(per_sm_cycle, 8192);
    // Machine balance (FLOP per HBM byte) of data-centre GPUs: tens to a few hundreds.
    double balance = gpu.peak_bf16_flops / gpu.hbm_bandwidth_bps;
    EXPECT_GT(balance, 50);
    EXPECT_LT(balance, 500);
    // The same model structure everywhere: the A100 calibration's dimensionless ratios.
    EXPECT_NEAR(gpu.power.copy_capacitance_nf / gpu.power.compute_capacitance_nf, 0.3, 1e-3);
  }
}

// Spec-only presets take the A100 calibration's dimensionless structure; nothing else is fitted.
TEST(GpuPresets, SpecOnlyPresetsShareTheA100Structure) {
  const GpuSpec a100 = load_gpu_preset("a100-sxm4-40gb");
  ASSERT_TRUE(a100.calibration.power);
  auto knee_fraction = [](const GpuSpec& g) { return g.power.knee_clock_mhz / g.max_clock_mhz; };
  for (const char* name : {"a40", "h100-sxm", "h200"}) {
    SCOPED_TRACE(name);
    GpuSpec gpu = load_gpu_preset(name);
    EXPECT_TRUE(gpu.calibration.empty());
    EXPECT_NEAR(gpu.power.v_min_v / gpu.power.v_max_v, a100.power.v_min_v / a100.power.v_max_v,
                1e-4);
    EXPECT_NEAR(gpu.power.idle_sm_capacitance_nf / gpu.power.compute_capacitance_nf,
                a100.power.idle_sm_capacitance_nf / a100.power.compute_capacitance_nf, 1e-4);
    // Knees land on a supported clock, so within one step of the A100's fraction.
    double step = gpu.sm_clocks_mhz[1] - gpu.sm_clocks_mhz[0];
    EXPECT_NEAR(knee_fraction(gpu), knee_fraction(a100), step / gpu.max_clock_mhz);
    // Full load at the max clock over the TDP: how far past its limit the silicon would go.
    auto overdrive = [](const GpuSpec& g) { return power_w(g, g.max_clock_mhz, full_load_activity(g)) / g.tdp_w; };
    EXPECT_NEAR(overdrive(gpu), overdrive(a100), 1e-3);
    EXPECT_EQ(gpu.power_limit_w, gpu.tdp_w);
  }
}

TEST(GpuPresets, IssueSpecNumbers) {
  GpuSpec a100 = load_gpu_preset("a100-sxm4-40gb");
  EXPECT_EQ(a100.sms, 108);
  EXPECT_EQ(a100.sm_clocks_mhz.size(), 81u);
  EXPECT_EQ(a100.sm_clocks_mhz.front(), 210);
  EXPECT_EQ(a100.max_clock_mhz, 1410);
  EXPECT_TRUE(a100.supports_clock(1005));
  EXPECT_FALSE(a100.supports_clock(1000));
  EXPECT_EQ(a100.peak_bf16_flops, 312e12);
  EXPECT_EQ(a100.hbm_bandwidth_bps, 1555e9);
  EXPECT_EQ(a100.nvlink_bandwidth_bps, 300e9);
  EXPECT_EQ(a100.tdp_w, 400);
  EXPECT_EQ(a100.static_power_w, 85);
  GpuSpec a40 = load_gpu_preset("a40");
  EXPECT_EQ(a40.sms, 84);
  EXPECT_EQ(a40.max_clock_mhz, 1740);
  EXPECT_EQ(a40.hbm_bandwidth_bps, 696e9);
  EXPECT_EQ(a40.nvlink_bandwidth_bps, 56.25e9);
  EXPECT_EQ(a40.tdp_w, 300);
  EXPECT_EQ(a40.static_power_w, 70);
}

TEST(GpuPresets, NearestClock) {
  GpuSpec a100 = load_gpu_preset("a100-sxm4-40gb");
  EXPECT_EQ(a100.nearest_clock_mhz(1000), 1005);
  EXPECT_EQ(a100.nearest_clock_mhz(997.5), 990);  // tie: the lower
  EXPECT_EQ(a100.nearest_clock_mhz(5000), 1410);
  EXPECT_EQ(a100.nearest_clock_mhz(0), 210);
}

TEST(GpuPresets, UnknownNameListsTheKnownOnes) {
  try {
    load_gpu_preset("a100-typo");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    std::string message = e.what();
    EXPECT_NE(message.find("a100-typo"), std::string::npos) << message;
    for (const auto& name : gpu_preset_names())
      EXPECT_NE(message.find(name), std::string::npos) << message;
  }
  EXPECT_THROW(load_gpu_preset("../gpus/a40"), InputError);
}

TEST(GpuPresets, JsonRoundTrip) {
  for (const auto& name : gpu_preset_names()) {
    GpuSpec gpu = load_gpu_preset(name);
    EXPECT_EQ(gpu_spec_from_json(to_json(gpu), "round trip"), gpu) << name;
  }
}

class BadGpuJson : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        std::filesystem::temp_directory_path() / ("kareus-hw-test-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    doc_ = to_json(load_gpu_preset("a40"));
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Loads `doc` from a file; returns the InputError's field and message.
  std::pair<std::string, std::string> error_of(const ordered_json& doc) {
    return error_of_text(doc.dump(2));
  }
  std::pair<std::string, std::string> error_of_text(const std::string& text) {
    auto path = dir_ / "gpu.json";
    std::ofstream(path) << text;
    try {
      load_gpu_spec(path);
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(path.string()), std::string::npos) << e.what();
      return {e.location().field, e.what()};
    }
    ADD_FAILURE() << "no error for " << text;
    return {};
  }

  std::filesystem::path dir_;
  ordered_json doc_;
};

TEST_F(BadGpuJson, ValidFileLoads) {
  auto path = dir_ / "ok.json";
  std::ofstream(path) << doc_.dump(2);
  EXPECT_EQ(load_gpu_spec(path), load_gpu_preset("a40"));
  EXPECT_EQ(load_gpu(path.string()), load_gpu_preset("a40"));
}

TEST_F(BadGpuJson, MissingFieldIsNamed) {
  doc_.erase("tdp_w");
  EXPECT_EQ(error_of(doc_).first, "tdp_w");
}

TEST_F(BadGpuJson, WrongTypeIsNamed) {
  doc_["sms"] = "eighty-four";
  EXPECT_EQ(error_of(doc_).first, "sms");
}

TEST_F(BadGpuJson, NestedFieldIsNamedWithItsPath) {
  doc_["power_model"]["v_min_v"] = -0.5;
  EXPECT_EQ(error_of(doc_).first, "power_model.v_min_v");
  doc_ = to_json(load_gpu_preset("a40"));
  doc_["power_model"].erase("hbm_pj_per_byte");
  EXPECT_EQ(error_of(doc_).first, "power_model.hbm_pj_per_byte");
}

TEST_F(BadGpuJson, UnknownFieldIsNamed) {
  doc_["static_powr_w"] = 70;
  auto [field, message] = error_of(doc_);
  EXPECT_EQ(field, "static_powr_w");
  EXPECT_NE(message.find("unknown field"), std::string::npos) << message;
}

// The calibration is typed: each record's fields are checked and named like the GPU's own.
TEST_F(BadGpuJson, CalibrationFieldsAreNamedWithTheirPath) {
  const ordered_json a100 = to_json(load_gpu_preset("a100-sxm4-40gb"));
  doc_ = a100;
  doc_["calibration"]["time_scale"]["fitted_plans"] = "45";
  EXPECT_EQ(error_of(doc_).first, "calibration.time_scale.fitted_plans");
  doc_ = a100;
  doc_["calibration"]["time_scale"]["engin"] = "megatron-te-eager";
  EXPECT_EQ(error_of(doc_).first, "calibration.time_scale.engin");
  doc_ = a100;
  doc_["calibration"].erase("points");  // the power fit's fields are whole or absent
  EXPECT_EQ(error_of(doc_).first, "calibration.points");
  doc_ = a100;
  doc_["calibration"]["profiles"] = ordered_json::array({"a.csv", 3});
  EXPECT_EQ(error_of(doc_).first, "calibration.profiles");
  doc_ = a100;
  doc_["calibration"]["overlap"] = {{"method", "m"}, {"partitions", {"p"}}, {"measured_on", {"gpu"}}, {"pairs", 0},
                                    {"ratio_err_median_pct_before", 1}, {"ratio_err_median_pct", 1}};
  EXPECT_EQ(error_of(doc_).first, "calibration.overlap.pairs");
  doc_ = a100;
  doc_["calibration"]["note"] = "hand-edited";
  EXPECT_EQ(error_of(doc_).first, "calibration.note");
}

// What hw fit wrote is read back to the same text: the bundled files' calibrations, key for key.
TEST(GpuPresets, CalibrationReadsBackToTheFilesText) {
  for (const auto& name : gpu_preset_names()) {
    const ordered_json file = parse_json_file(data_dir() / "gpus" / (name + ".json"));
    const GpuSpec gpu = load_gpu_preset(name);
    EXPECT_EQ(file.contains("calibration"), !gpu.calibration.empty()) << name;
    if (file.contains("calibration")) {
      EXPECT_EQ(to_json(gpu.calibration).dump(1), file.at("calibration").dump(1)) << name;
    }
  }
}

TEST_F(BadGpuJson, InconsistentValuesAreNamed) {
  doc_["static_power_w"] = 400;  // above TDP
  EXPECT_EQ(error_of(doc_).first, "static_power_w");
  doc_ = to_json(load_gpu_preset("a40"));
  doc_["power_model"]["knee_clock_mhz"] = 5000;  // above max clock
  EXPECT_EQ(error_of(doc_).first, "power_model.knee_clock_mhz");
  doc_ = to_json(load_gpu_preset("a40"));
  doc_["sm_clocks_mhz"] = ordered_json::array({900, 800});
  EXPECT_EQ(error_of(doc_).first, "sm_clocks_mhz");
  doc_["sm_clocks_mhz"] = {{"min", 210}, {"max", 1000}, {"step", 7}};
  EXPECT_EQ(error_of(doc_).first, "sm_clocks_mhz.step");
}

// The time scale is optional (1: the model as built); given, it must be a positive number, and
// only presets fitted to measured plans carry one.
TEST_F(BadGpuJson, TheTimeScaleIsOptionalAndPositive) {
  EXPECT_EQ(load_gpu_preset("a40").time_scale, 1);
  EXPECT_FALSE(doc_.contains("time_scale"));
  doc_["time_scale"] = 1.25;
  auto path = dir_ / "scaled.json";
  std::ofstream(path) << doc_.dump(2);
  EXPECT_EQ(load_gpu_spec(path).time_scale, 1.25);
  for (const ordered_json& bad : {ordered_json(0), ordered_json(-1), ordered_json("slow")}) {
    doc_["time_scale"] = bad;
    EXPECT_EQ(error_of(doc_).first, "time_scale") << bad;
  }
  for (const auto& name : gpu_preset_names()) {
    const GpuSpec gpu = load_gpu_preset(name);
    EXPECT_EQ(gpu.time_scale != 1, gpu.calibration.time_scale.has_value()) << name;
  }
}

TEST_F(BadGpuJson, TheOverlapSlowdownsAreOptionalAndAtLeastOne) {
  for (const auto& name : gpu_preset_names()) {
    const GpuSpec gpu = load_gpu_preset(name);  // spec sheets and fits to other data: no overlap factor
    EXPECT_EQ(gpu.overlap_compute_slowdown, 1) << name;
    EXPECT_EQ(gpu.overlap_collective_slowdown, 1) << name;
  }
  for (const char* field : {"overlap_compute_slowdown", "overlap_collective_slowdown"}) {
    ordered_json doc = doc_;
    doc[field] = 1.5;
    auto path = dir_ / "interfering.json";
    std::ofstream(path) << doc.dump(2);
    const GpuSpec gpu = load_gpu_spec(path);
    EXPECT_EQ(std::string(field) == "overlap_compute_slowdown" ? gpu.overlap_compute_slowdown
                                                               : gpu.overlap_collective_slowdown,
              1.5);
    EXPECT_EQ(to_json(gpu).at(field), 1.5);  // written back only where set
    EXPECT_FALSE(to_json(load_gpu_preset("a40")).contains(field));
    for (const ordered_json& bad : {ordered_json(0.99), ordered_json(0), ordered_json(-2), ordered_json("x")}) {
      doc[field] = bad;
      EXPECT_EQ(error_of(doc).first, field) << bad;
    }
  }
}

TEST_F(BadGpuJson, SyntaxErrorHasLineAndColumn) {
  try {
    auto path = dir_ / "broken.json";
    std::ofstream(path) << "{\n  \"name\": \"x\",\n  oops\n}\n";
    load_gpu_spec(path);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(e.location().line, 3) << e.what();
    EXPECT_GT(e.location().column, 0) << e.what();
  }
}

TEST_F(BadGpuJson, MissingFileIsNamed) {
  EXPECT_THROW(load_gpu_spec(dir_ / "nope.json"), InputError);
}

}  // namespace
}  // namespace kareus::hardware
