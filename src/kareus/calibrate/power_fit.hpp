// Holding the power/performance model against measured stage profiles, and fitting it to them.
//
// A profile is the Perseus format `stage,instruction,frequency,time,energy` (MHz, s, J per GPU).
// Only shapes are compared: per (stage, instruction), time and average power (energy / time) at
// each clock are divided by their values at the profile's highest clock, and the model's
// transformer stage (stage_model.hpp) is divided likewise. Errors are |model / measured − 1|.
//
// The fit (`kareus hw fit`) keeps the base GPU's spec sheet and fits three power-model
// parameters to the measured power shape: the voltage knee, V_min / V_max, and the idle-SM share
// of SM capacitance. C_compute then sets the absolute level (the model's power at the profiles' top
// clocks equals the measured mean there: the silicon's power, fitted without the board's power
// limit) and C_copy keeps the base GPU's ratio to C_compute. The time shape is not fitted: it is the
// fixed stage mix's.
//
// Thread-safety: pure functions; results are plain values.
// Example:
//   auto curves = read_stage_profile("gpt3-175b+a100_sxm_bf16.csv");
//   ShapeCheck check = check_shape(load_gpu_preset("a100-sxm4-40gb"), curves);
//   fmt::print("{}\n", summary_line(check.summary));
#pragma once

#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "kareus/hardware/gpu.hpp"

namespace kareus::calibrate {

using hardware::GpuSpec;

// One (stage, instruction) of a measured profile, clocks ascending.
struct ProfileCurve {
  std::string source;  // the file it came from
  long stage = 0;
  std::string instruction;
  std::vector<double> freq_mhz;
  std::vector<double> time_s;
  std::vector<double> power_w;  // energy / time
};

// Reads a Perseus-format profile; InputError at file:line:column for a missing column, a bad or
// non-positive number, a (stage, instruction, frequency) given twice, or a curve with one clock.
std::vector<ProfileCurve> read_stage_profile(const std::filesystem::path& csv);

struct ShapeRow {
  std::string source;
  long stage = 0;
  std::string instruction;
  double freq_mhz = 0;
  double measured_time_ratio = 0, model_time_ratio = 0;    // time(f) / time(f_top)
  double measured_power_ratio = 0, model_power_ratio = 0;  // power(f) / power(f_top)

  double time_err() const;  // |model / measured − 1|
  double power_err() const;
};

// Errors as fractions (0.05 = 5%) over every row, the normalising clock included.
struct ShapeSummary {
  std::size_t points = 0;
  double time_err_median = 0, time_err_max = 0;
  double power_err_median = 0, power_err_max = 0;
};

struct ShapeCheck {
  std::vector<ShapeRow> rows;
  ShapeSummary summary;
};

// Holds `gpu`'s transformer stage against every curve; fits nothing. InputError when a curve's
// clocks exceed the GPU's max clock or no curves are given.
ShapeCheck check_shape(const GpuSpec& gpu, std::span<const ProfileCurve> curves);

// `time_err_median=<pct> time_err_max=<pct> power_err_median=<pct> power_err_max=<pct>`,
// percentages with two decimals.
std::string summary_line(const ShapeSummary& summary);

struct FitResult {
  GpuSpec gpu;       // the base GPU with the fitted power model and `calibration` filled in
  ShapeCheck check;  // of the fitted GPU against the curves
  int evaluations = 0;
};

// Fits the power model of `base` to the curves' power shape (deterministic: fixed starts, no
// randomness). InputError when the measured power leaves no room for dynamic power.
FitResult fit_power_model(const GpuSpec& base, std::span<const ProfileCurve> curves);

}  // namespace kareus::calibrate
