#include "kareus/calibrate/gpu_fit.hpp"

#include "kareus/core/error.hpp"
#include "kareus/evaluate/simulated.hpp"

namespace kareus::calibrate {
namespace {

// The power fit compares shapes: the time scale, the overlap factors and their records stay.
FitResult fit_power(hardware::GpuSpec& gpu, const GpuFitRequest& request) {
  FitResult fit = fit_power_model(gpu, request.profiles);
  hardware::GpuSpec fitted = fit.gpu;
  fitted.time_scale = gpu.time_scale;
  fitted.overlap_compute_slowdown = gpu.overlap_compute_slowdown;
  fitted.overlap_collective_slowdown = gpu.overlap_collective_slowdown;
  fitted.calibration.power->command = request.command;
  fitted.calibration.time_scale = gpu.calibration.time_scale;
  fitted.calibration.overlap = gpu.calibration.overlap;
  gpu = std::move(fitted);
  return fit;
}

TimeScaleReport fit_scale(hardware::GpuSpec& gpu, const GpuFitRequest& request) {
  const PlannerOptions& options = request.plan_options;
  gpu.time_scale = 1;
  TimeScaleReport r;
  r.at_scale_1 = check_plans(request.plans, evaluate::make_simulated_evaluator(gpu), options, false);
  r.fit = fit_time_scale(r.at_scale_1, 1);
  gpu.time_scale = r.fit.time_scale;
  r.fitted = check_plans(request.plans, evaluate::make_simulated_evaluator(gpu), options, false);
  gpu.calibration.time_scale = hardware::TimeScaleRecord{
      .method = "median over the plans of Megatron-LM and Perseus (which overlap nothing) of measured over model "
                "time, the model at time scale 1; Nanobatching+Perseus plans are not fitted, only checked",
      .plans = request.plan_files,
      .engine = options.engine.name,
      .fitted_plans = static_cast<int>(r.fit.plans),
      .checked_plans = static_cast<int>(request.plans.size()),
      .time_err_median_pct_at_scale_1 = 100 * r.at_scale_1.time_err_median,
      .energy_err_median_pct_at_scale_1 = 100 * r.at_scale_1.energy_err_median,
      .time_err_median_pct = 100 * r.fitted.time_err_median,
      .energy_err_median_pct = 100 * r.fitted.energy_err_median,
      .command = request.command};
  return r;
}

OverlapFit fit_interference(hardware::GpuSpec& gpu, const GpuFitRequest& request,
                            const std::set<std::string>& measured_on) {
  OverlapFit fit = fit_overlap(gpu, request.partitions);
  gpu.overlap_compute_slowdown = fit.compute_slowdown;
  gpu.overlap_collective_slowdown = fit.collective_slowdown;
  gpu.calibration.overlap = hardware::OverlapRecord{
      .method = "least squared log error of each overlapped knob's measured time over its partition's sequential "
                "knob at the same clock, against the model's same ratio; both factors in [1, 4]",
      .partitions = request.partition_dirs,
      .measured_on = std::vector<std::string>(measured_on.begin(), measured_on.end()),
      .pairs = static_cast<int>(fit.pairs.size()),
      .ratio_err_median_pct_before = 100 * fit.err_median_before,
      .ratio_err_median_pct = 100 * fit.err_median_after,
      .command = request.command};
  return fit;
}

}  // namespace

GpuFit fit_gpu(hardware::GpuSpec base, const GpuFitRequest& request) {
  if (request.profiles.empty() && request.plans.empty() && request.partitions.empty()) {
    throw InputError({"", 0, 0, "--profile"},
                     "give --profile (to fit the power model), --plans (the time scale), --partitions (overlap's "
                     "interference) or several");
  }
  GpuFit out;
  out.gpu = std::move(base);
  for (const MeasuredPartition& m : request.partitions) out.measured_on.insert(m.measured_on);
  if (!request.profiles.empty()) out.power = fit_power(out.gpu, request);
  if (!request.plans.empty()) out.time_scale = fit_scale(out.gpu, request);
  if (!request.partitions.empty()) out.overlap = fit_interference(out.gpu, request, out.measured_on);
  return out;
}

}  // namespace kareus::calibrate
