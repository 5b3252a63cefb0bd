// The model's representative transformer pipeline stage: a fixed mix of GEMM/attention work that is
// compute-bound at low clocks but runs into an HBM floor near max clock, plus memory-bound
// element-wise ops (norms, activations, residuals). Its time and average power against the clock
// are what `kareus hw check` holds against measured stage profiles, and what `kareus hw fit` fits
// the power model to. It knows no workload: shares are of the stage's time, floors relative to
// each op's compute time, so the same mix applies to any GPU.
//
// Why a floor on the GEMMs: large GEMM kernels pick tiles that put them near the GPU's machine
// balance, so at the top clocks their operand traffic, not the tensor cores, sets the pace;
// measured A100 stages speed up almost as 1/f at low clocks and barely at all near 1410 MHz.
//
// Thread-safety: pure functions on immutable data.
// Example:
//   StageSample lo = model_transformer_stage(gpu, 1005), hi = model_transformer_stage(gpu, 1410);
//   double slowdown = lo.time_rel / hi.time_rel, power_ratio = lo.power_w / hi.power_w;
#pragma once

#include <optional>
#include <span>
#include <string_view>

#include "kareus/hardware/gpu.hpp"

namespace kareus::hardware {

struct StageOp {
  std::string_view name;
  double compute_share = 0;    // compute-bound time at max clock, as a share of the stage
  double hbm_floor_ratio = 0;  // HBM-bound time over compute-bound time at max clock
  double efficiency = 0;       // fraction of peak FLOP/s reached while compute-bound
};

// The fixed mix (shares sum to about 0.91: the element-wise ops are HBM-bound).
std::span<const StageOp> transformer_stage_ops();

// The mix's floor ratio of its GEMMs (compute-share weighted) and of its attention: what the
// partition simulator (evaluate/simulated.hpp) applies to every GEMM and attention kernel, so that
// its time against clock has the measured shape the stage model was checked against.
double gemm_floor_ratio();
double attention_floor_ratio();

struct StageSample {
  double freq_mhz = 0;
  double time_rel = 0;  // stage time in units of its compute share at max clock; use ratios
  double power_w = 0;   // average power over the stage, static included
};

// Each op takes max(compute_share · f_max / f, compute_share · hbm_floor_ratio) and draws
// power_w() with all SMs computing at intensity efficiency · (compute time / op time) and HBM at
// the floor's share of its bandwidth; an op that would draw more than the GPU's power limit runs
// at the clock where it meets the limit (power_capped_clock_mhz).
StageSample model_transformer_stage(const GpuSpec& gpu, double freq_mhz);

// The lowest supported clock from which an op of the stage, GEMM-bound at that clock, would draw
// more than the power limit: locked at or above it, the stage throttles. None when no clock does.
std::optional<double> stage_throttle_clock_mhz(const GpuSpec& gpu);

}  // namespace kareus::hardware
