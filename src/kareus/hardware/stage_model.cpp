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

StageSample model_transformer_stage(const GpuSpec& gpu, double freq_mhz) {
  double time = 0, energy = 0;
  for (const StageOp& op : kOps) {
    const double compute = op.compute_share * gpu.max_clock_mhz / freq_mhz;
    const double floor = op.compute_share * op.hbm_floor_ratio;
    const double t = std::max(compute, floor);
    const Activity activity{.compute_sm_fraction = 1,
                            .compute_intensity = op.efficiency * compute / t,
                            .comm_sm_fraction = 0,
                            .hbm_bytes_per_s = gpu.hbm_bandwidth_bps * floor / t,
                            .link_bytes_per_s = 0};
    time += t;
    energy += power_w(gpu, freq_mhz, activity) * t;
  }
  return {freq_mhz, time, energy / time};
}

}  // namespace kareus::hardware
