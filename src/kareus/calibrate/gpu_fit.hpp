// Fitting a GPU file to measurements: the power model to stage profiles, the time scale to
// measured plans, overlap's interference to measured partitions, in the one order they depend on,
// each recorded in the GPU's calibration with the command that made it.
//
// Order: the power fit compares shapes and keeps the base's time scale, overlap factors and their
// records; the time scale comes after it, since where the power limit throttles a plan's time
// depends on the power model; overlap's ratios at one clock come last (the time scale cancels in
// them, the power model does not: the limit).
//
// Thread-safety: pure; evaluates on simulated GPUs of its own.
// Example:
//   GpuFit fit = fit_gpu(hardware::load_gpu("a100-sxm4-40gb"), {.profiles = read_stage_profile("p.csv")});
//   write_file_atomic("a100.json", hardware::to_json(fit.gpu).dump(2));
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "kareus/calibrate/overlap_fit.hpp"
#include "kareus/calibrate/plan_check.hpp"
#include "kareus/calibrate/power_fit.hpp"

namespace kareus::calibrate {

struct GpuFitRequest {
  std::vector<ProfileCurve> profiles;  // empty: the power model is kept
  std::vector<ReferencePlan> plans;    // empty: the time scale is kept
  std::vector<std::string> plan_files;
  std::vector<MeasuredPartition> partitions;  // empty: the overlap factors are kept
  std::vector<std::string> partition_dirs;
  PlannerOptions plan_options;  // the engine the plans were measured through
  std::string command;          // recorded in every calibration record
};

struct TimeScaleReport {
  TimeScaleFit fit;
  PlanCheck at_scale_1, fitted;  // every plan, without frontiers
};

struct GpuFit {
  hardware::GpuSpec gpu;  // the base with every fit applied and recorded
  std::optional<FitResult> power;
  std::optional<TimeScaleReport> time_scale;
  std::optional<OverlapFit> overlap;
  std::set<std::string> measured_on;  // the partitions' GPUs and evaluators
};

// InputError when nothing is given to fit, or what each fit throws.
GpuFit fit_gpu(hardware::GpuSpec base, const GpuFitRequest& request);

}  // namespace kareus::calibrate
