// A GPU as Kareus sees it: its spec sheet (SMs, SM clocks, peak FLOP/s, HBM and link bandwidth,
// TDP, static power) and the DVFS power/performance model (docs/architecture.md, hardware):
//
//   peak(f)   = peak_bf16_flops · f / f_max
//   V(f)      = v_min up to the knee clock, then linear up to v_max at f_max
//   P(f, a)   = P_static
//             + V(f)² · f · [ (a.compute + a.comm) · C_idle       every SM holding a kernel
//                           + a.compute · a.intensity · C_compute  the work those SMs do
//                           + a.comm · C_copy ]                    a collective's copy kernels
//             + HBM bytes/s · e_hbm + link bytes/s · e_link
//
// With P in W, C in nF, V in V and f in MHz, C·V²·f carries a factor 1e-3. An activity of zero
// draws exactly P_static, the power of a GPU blocked on P2P, so effective energy E − P_static·t is
// the energy of the work itself.
//
// Power limit: the board holds its power at or below power_limit_w (the TDP unless the job sets a
// lower one, as `nvidia-smi -pl` does). When the locked clock would draw more, the driver lowers
// the clock until the power fits; over its fast steps the clock averages to the one where power
// meets the limit (power_capped_clock_mhz). A locked clock above that buys nothing.
//
// Thread-safety: GpuSpec is a plain value; every function here is pure.
// Example:
//   GpuSpec a100 = load_gpu_preset("a100-sxm4-40gb");
//   double w = power_w(a100, 1005, {.compute_sm_fraction = 1, .compute_intensity = 0.8});
//   double flops = peak_flops_at(a100, 1005);
#pragma once

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "kareus/hardware/calibration.hpp"

namespace kareus::hardware {

// Parameters of the DVFS power model (static power lives on GpuSpec::static_power_w).
struct PowerModel {
  double knee_clock_mhz = 0;          // voltage is flat at v_min_v up to this clock
  double v_min_v = 0;                 // core voltage at and below the knee
  double v_max_v = 0;                 // core voltage at max clock
  double compute_capacitance_nf = 0;  // all SMs computing at intensity 1 (GEMM at peak)
  double copy_capacitance_nf = 0;     // all SMs running a collective's copy kernels
  double idle_sm_capacitance_nf = 0;  // all SMs holding a kernel but stalled (memory, barriers)
  double hbm_pj_per_byte = 0;         // DRAM energy per byte read or written
  double nvlink_pj_per_byte = 0;      // link energy per byte this GPU sends or receives

  bool operator==(const PowerModel&) const = default;
};

// One GPU type: spec sheet plus power model. A plain value; load once, share freely.
struct GpuSpec {
  std::string name;          // preset id, e.g. "a100-sxm4-40gb"
  std::string display_name;  // e.g. "NVIDIA A100 SXM4 40GB"
  std::string source;        // where the numbers come from (spec sheets, calibration)
  int sms = 0;
  std::vector<double> sm_clocks_mhz;  // supported SM clocks, ascending
  double max_clock_mhz = 0;           // == sm_clocks_mhz.back()
  double peak_bf16_flops = 0;         // dense, whole GPU at max clock, FLOP/s
  double hbm_bandwidth_bps = 0;       // device memory, bytes/s
  double nvlink_bandwidth_bps = 0;    // per direction, bytes/s
  // L2 bandwidth in bytes per SM clock, for the per-tile cost of multistage GEMM kernels
  // (evaluate/simulated.hpp); 0 where the GPU's kernels hide that cost or no figure is published.
  double l2_bytes_per_clock = 0;
  double tdp_w = 0;
  double power_limit_w = 0;   // the limit the driver holds (files: the TDP by default); 0 = none
  double static_power_w = 0;  // P_static / P_blocking: a GPU blocked on P2P
  // Measured over modelled time on the cluster the preset describes, every kernel and collective
  // alike, at the modelled power (so energy scales with it too): what that cluster's software and
  // boards lose to the public benchmark figures the model is built from, without saying why.
  // 1 where nothing was measured; `kareus hw fit --plans` sets it from measured plans.
  double time_scale = 1;
  // What a collective and the compute beside it cost each other beyond the model's SM stealing
  // and HBM sharing (L2 and memory-pipeline contention, the collective's flag polling under load;
  // public measurements of it disagree, see evaluate/simulated.hpp): while both run, each compute
  // kernel takes overlap_compute_slowdown times as long and the collective moves its bytes
  // overlap_collective_slowdown times as slowly. 1 (none) unless fitted to partitions measured on
  // the cluster (`kareus hw fit --partitions`).
  double overlap_compute_slowdown = 1;
  double overlap_collective_slowdown = 1;
  PowerModel power;
  Calibration calibration;  // how its numbers were fitted; empty for spec-only ones

  double min_clock_mhz() const { return sm_clocks_mhz.front(); }
  // True when `freq_mhz` is one of sm_clocks_mhz (to within 1e-6 MHz).
  bool supports_clock(double freq_mhz) const;
  // The supported clock nearest to `freq_mhz` (the lower one on a tie).
  double nearest_clock_mhz(double freq_mhz) const;

  bool operator==(const GpuSpec&) const = default;
};

// What the GPU is doing during an interval. Fractions are of the GPU's SMs; compute and comm SMs
// together are at most all of them, the rest sit idle (clock-gated, no dynamic power).
struct Activity {
  double compute_sm_fraction = 0;  // fraction of SMs busy with compute (0..1)
  double compute_intensity = 0;    // 0..1: how hard those SMs work (1 = GEMM at peak)
  double comm_sm_fraction = 0;     // fraction of SMs running a collective's copy kernels
  double hbm_bytes_per_s = 0;      // device-memory traffic, reads + writes
  double link_bytes_per_s = 0;     // NVLink traffic this GPU sends + receives
};

// Peak dense bf16 FLOP/s at `freq_mhz`: proportional to the clock.
double peak_flops_at(const GpuSpec& gpu, double freq_mhz);
// Core voltage at `freq_mhz`: flat up to the knee, linear to v_max at max clock.
double voltage_v(const GpuSpec& gpu, double freq_mhz);
// Static + dynamic (activity·C·V²·f) + HBM + link power. The model functions take any clock in
// (0, max_clock_mhz], supported or not; outside that, or activity outside its documented ranges,
// is a bug in the caller: InternalError.
double power_w(const GpuSpec& gpu, double freq_mhz, const Activity& activity);
// Power above static: what the activity itself costs.
double dynamic_power_w(const GpuSpec& gpu, double freq_mhz, const Activity& activity);
// All SMs computing at intensity 1 with HBM at full bandwidth.
Activity full_load_activity(const GpuSpec& gpu);

// The clock the GPU runs at with `freq_mhz` locked, when its power at clock f is power_at(f)
// (power rising with the clock): freq_mhz if power_at(freq_mhz) fits gpu.power_limit_w, else the
// clock where the power meets the limit, found by a fixed bisection of [min clock, max clock] so
// that every locked clock above it runs at exactly the same one; the min clock if even that draws
// more (the board cannot go lower).
template <typename PowerAt>
double power_capped_clock_mhz(const GpuSpec& gpu, double freq_mhz, PowerAt&& power_at) {
  const double limit = gpu.power_limit_w;
  if (limit <= 0 || power_at(freq_mhz) <= limit) return freq_mhz;
  double lo = gpu.min_clock_mhz(), hi = gpu.max_clock_mhz;
  if (power_at(lo) > limit) return std::min(lo, freq_mhz);
  for (int i = 0; i < 40; ++i) {  // (max − min) / 2^40: far below a MHz
    const double mid = (lo + hi) / 2;
    (power_at(mid) <= limit ? lo : hi) = mid;
  }
  return std::min(lo, freq_mhz);
}

// GPU JSON files (data/gpus/*.json) hold the fields of GpuSpec in spec-sheet units:
// "peak_bf16_tflops", "hbm_bandwidth_gb_per_s", "nvlink_bandwidth_gb_per_s_per_direction";
// "sm_clocks_mhz" is a list or {"min", "max", "step"}; "power_model" holds PowerModel's fields;
// "calibration" is optional (hardware/calibration.hpp); "power_limit_w" is optional (default: "tdp_w"); "time_scale" is
// optional (default 1), as are "overlap_compute_slowdown" and "overlap_collective_slowdown" (at
// least 1; default 1). Unknown fields are errors (a misspelt field would else be ignored).

// Names of the bundled presets, data_dir()/gpus/*.json, sorted.
std::vector<std::string> gpu_preset_names();
// Loads a bundled preset; InputError listing the known names if there is none called `name`.
GpuSpec load_gpu_preset(std::string_view name);
// Loads a GPU description from a JSON file; InputError naming the file and the field at fault.
GpuSpec load_gpu_spec(const std::filesystem::path& json);
// A preset name, or a path to a JSON file (anything ending in .json or containing a '/').
GpuSpec load_gpu(std::string_view name_or_path);
// Parses a GPU description; `source` names the input in errors.
GpuSpec gpu_spec_from_json(const nlohmann::ordered_json& doc, const std::string& source);
// The JSON a preset file holds (load_gpu_spec reads it back to an equal GpuSpec).
nlohmann::ordered_json to_json(const GpuSpec& gpu);
// `gpu` held at `power_limit_w` (as `nvidia-smi -pl` sets it): InputError naming `field` unless
// the limit lies above static power and at most the TDP, the highest a board accepts.
GpuSpec with_power_limit(GpuSpec gpu, double power_limit_w, const std::string& field);
// Checks ranges and consistency (clocks ascending and positive, knee within the clock range,
// static power below TDP, ...); throws InputError naming `source` and the field.
void validate(const GpuSpec& gpu, const std::string& source);

}  // namespace kareus::hardware
