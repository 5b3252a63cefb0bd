#include "kareus/hardware/stage_model.hpp"

#include <algorithm>
#include <array>

namespace kareus::hardware {
namespace {

// Shares and floors chosen once, by hand, to give a transformer stage's shape: about 10% of the
// time memory-bound, the rest GEMM-like with floors spread around the compute time at max clock so
// the approach to the floor is gradual. Not refitted per GPU.
constexpr std::array kOps = {
    StageOp{"qkv_gemm", 0.20, 1.00, 0.80},      StageOp{"attention", 0.20, 1.04, 0.70},
    StageOp{"out_proj_gemm", 0.08, 0.98, 0.80}, StageOp{"fc1_gemm", 0.21, 1.08, 0.80},
    StageOp{"fc2_gemm", 0.21, 1.12, 0.80},      StageOp{"elementwise", 0.01, 10.0, 0.80},
};

}  // namespace

std::span<const StageOp> transformer_stage_ops() {
  return kOps;
}

double gemm_floor_ratio() {
  double weighted = 0, shares = 0;
  for (const StageOp& op : kOps) {
    if (op.name.ends_with("_gemm")) weighted += op.compute_share * op.hbm_floor_ratio, shares += op.compute_share;
  }
  return weighted / shares;
}

double attention_floor_ratio() {
  for (const StageOp& op : kOps) {
    if (op.name == "attention") return op.hbm_floor_ratio;
  }
  return 0;
}

namespace {

struct OpSample {
  double time = 0, power_w = 0;
};

OpSample model_op(const GpuSpec& gpu, const StageOp& op, double freq_mhz) {
  const double compute = op.compute_share * gpu.max_clock_mhz / freq_mhz;
  const double floor = op.compute_share * op.hbm_floor_ratio;
  const double t = std::max(compute, floor);
  const Activity activity{.compute_sm_fraction = 1,
                          .compute_intensity = op.efficiency * compute / t,
                          .comm_sm_fraction = 0,
                          .hbm_bytes_per_s = gpu.hbm_bandwidth_bps * floor / t,
                          .link_bytes_per_s = 0};
  return {t, power_w(gpu, freq_mhz, activity)};
}

}  // namespace

StageSample model_transformer_stage(const GpuSpec& gpu, double freq_mhz) {
  double time = 0, energy = 0;
  for (const StageOp& op : kOps) {
    const double run_mhz =
        power_capped_clock_mhz(gpu, freq_mhz, [&](double f) { return model_op(gpu, op, f).power_w; });
    const OpSample s = model_op(gpu, op, run_mhz);
    time += s.time;
    energy += s.power_w * s.time;
  }
  return {freq_mhz, time, energy / time};
}

std::optional<double> stage_throttle_clock_mhz(const GpuSpec& gpu) {
  if (gpu.power_limit_w <= 0) return std::nullopt;
  for (double f : gpu.sm_clocks_mhz) {
    for (const StageOp& op : kOps) {
      if (model_op(gpu, op, f).power_w > gpu.power_limit_w) return f;
    }
  }
  return std::nullopt;
}

}  // namespace kareus::hardware
