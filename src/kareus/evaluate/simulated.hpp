// The simulated GPU (docs/architecture.md, evaluate): a model, not a measurement. It runs a partition as an
// event timeline. Compute ops run in order; op k with clock f and s_free SMs takes
//   t_k = max(F_k / (peak(f) · s_free/S · eff_k), r_k · F_k / (peak(f_max) · s_free/S · eff_k),
//             B_k / BW_hbm) + launch,
// where r_k, the floor ratio of GEMMs and attention, flattens their time near the top clocks as
// measured stages flatten (hardware/stage_model.hpp), and eff_k carries the kernel's wave
// quantization and, for a GEMM, each tile's prologue and epilogue (SimulationOptions::gemm_stages).
// The collective launches just before its slot's op and takes its SMs from compute until it ends.
// It moves NCCL's ring byte count at min(link, s · copy rate(f)): bandwidth grows with its SMs
// until the link saturates at NCCL's own channel count and max clock, and each SM's copy rate is
// proportional to the clock. Its HBM traffic
// (a few bytes per byte on the wire) contends with the op beside it: when the two together ask
// for more than the HBM delivers, both slow in proportion, which is why a collective beside a
// memory-bound op costs more than beside a GEMM. Beyond that, where a GPU file carries measured
// interference (hardware::GpuSpec::overlap_compute_slowdown and overlap_collective_slowdown, 1
// unless `kareus hw fit --partitions` fitted them), each compute kernel beside the moving
// collective takes that factor longer and the collective moves that factor slower, at the power of
// the same work spread over the longer time. No preset carries a factor other than 1: the public
// measurements (NVIDIA/nccl#1428: an A100 GEMM 1.76x slower beside an all-gather, SM loss
// included; parasailteam/coconet#6: an all-reduce 1.9x slower beside a GEMM; Lee et al.,
// arXiv:2507.03114: compute 18.9% slower on average) disagree by more than the effect on the
// Kareus cluster's plans, so the factors are the cluster's to measure. The partition ends when
// both are done. Energy
// integrates hardware::power_w over the timeline's phases. The sequential knob ("none") is the
// compute alone with every SM, then the collective alone, back to back, with the segment un-split
// (workload::unsplit: one kernel per op over both nanobatches' tokens, half charged to each).
// Power limit: the run goes at the locked clock unless its average power would pass the board's
// limit; then the whole run goes at the clock where its average power meets the limit
// (hardware::power_capped_clock_mhz). The average, not each kernel: the driver's controller acts
// on sampled board power and steps the clock over many kernels, so a 1 ms GEMM that alone would
// draw more than the limit, between memory-bound kernels and collectives that draw far less, runs
// at the locked clock. That is what the Kareus cluster's 400 W A100s measured
// (data/kareus-osdi26): the fastest plans run the first stage's forwards at 1410 MHz and the last
// clock steps up still shorten the iteration, where capping each kernel would throttle this
// workload's GEMMs near 1300 MHz and make the top clocks buy nothing; and what Perseus's A40
// stages measured, whose average power flattens at the 300 W limit.
// Cluster time scale: every phase lasts the GPU's time_scale times the model's, at the model's
// power (hardware::GpuSpec::time_scale; 1 unless a preset was fitted to measured plans), so a
// partition's time and energy, and a pipeline's frontier built from them, scale by it exactly.
// The HBM and link rates a timeline shows are the model's, before that stretch.
//
// Thread-safety: immutable after construction; evaluate() and timeline() may run concurrently.
// Example:
//   SimulatedEvaluator sim(hardware::load_gpu_preset("a100-sxm4-40gb"));
//   EvalResult r = sim.evaluate(partition, {1410, 12, "linear_0"});
//   Timeline t = sim.timeline(partition, {1410, 12, "linear_0"});   // the phases, for display
#pragma once

#include <utility>
#include <vector>

#include "kareus/evaluate/evaluator.hpp"
#include "kareus/hardware/stage_model.hpp"

namespace kareus::evaluate {

// The model's constants beyond the GPU's spec sheet. Defaults are for NVIDIA data-center GPUs with
// NVLink/NVSwitch and NCCL's ring algorithm, set from public GEMM, FlashAttention-2 and NCCL
// benchmark figures on A100; they are not fitted to any one measurement.
struct SimulationOptions {
  double gemm_efficiency = 0.80;           // large bf16 GEMMs, share of peak FLOP/s
  double attention_fwd_efficiency = 0.65;  // causal FlashAttention-2 forward
  double attention_bwd_efficiency = 0.55;  // and backward
  double memory_op_efficiency = 0.10;  // FLOP-rate share of element-wise kernels (rarely binding)
  double hbm_efficiency = 0.85;        // share of peak HBM bandwidth kernels reach
  // A GEMM or attention kernel never runs faster than its compute time at the max clock times
  // this ratio: near the top clocks operand traffic, not the tensor cores, sets the pace, as in
  // the measured A100 stages (hardware/stage_model.hpp, which these defaults come from).
  double gemm_floor_ratio = hardware::gemm_floor_ratio();
  double attention_floor_ratio = hardware::attention_floor_ratio();
  // Wave quantization: the thread blocks of a GEMM tile its output in gemm_tile_rows x
  // gemm_tile_cols blocks (either way round), one block per SM at a time: CUTLASS's default
  // threadblock for tensor-op GEMMs on sm80 is 128 x 256 x 64
  // (include/cutlass/gemm/device/default_gemm_configuration.h, DefaultGemmConfiguration<
  // OpClassTensorOp, Sm80>). When the tiles are few the reduction is split in up to
  // gemm_max_split_k pieces, as cuBLAS's split-K kernels do (the bound 4 is our assumption, not a
  // published figure). FlashAttention-2 runs one block per 128 queries of a (sequence, head) at
  // head dim 128 on sm80 (flash_fwd_launch_template.h, kBlockM = 128). A collective's SMs leave
  // compute fewer SMs, so a kernel that filled its last wave may spill into one more: the "tail
  // effect" of overlap NVIDIA's forums describe for a GEMM beside an NCCL all-gather.
  double gemm_tile_rows = 128;
  double gemm_tile_cols = 256;
  int gemm_max_split_k = 4;
  // Each tile also pays a fixed cost its main loop does not hide: CUTLASS's sm80 kernel (the same
  // 128 x 256 x 64 tile, kStages = 3; cuBLAS's sm80 bf16 kernels carry the same in their names,
  // "..._128x256_..._stages_64x3_...") keeps 3 stages of A and B tiles in shared memory, 144 KB
  // of the SM's 164 KB, so one block runs per SM: its prologue (loading gemm_stages - 1 stages
  // before the first MMA) and its epilogue (storing the output tile) leave the tensor cores idle.
  // Both move at the SM's share of the L2 bandwidth (GpuSpec::l2_bytes_per_clock; 0 = not
  // modelled). On A100 that is 1.35 iterations of 64 per tile: +22% on a K = 384 GEMM, +1% at
  // K = 8192, which is why a small model's TP shards run further below peak than a large one's.
  double gemm_tile_depth = 64;
  int gemm_stages = 3;
  double attention_block_queries = 128;
  double kernel_launch_s = 3e-6;       // gap per compute kernel
  // NCCL's bus bandwidth over NVLink per direction: nccl-tests all_reduce_perf on 8 A100 SXM4
  // over NVSwitch reports 200-208 GB/s busbw for large messages (NVIDIA/nccl-tests issues #149
  // and #178), 0.68 of the 300 GB/s per direction.
  double link_efficiency = 0.68;
  // A collective's copy rate per SM. NCCL runs one CTA (one SM) per channel and opens 24
  // channels on an 8-GPU A100 NVSwitch node (its INFO log "Channel 23/24" in NVIDIA/nccl-tests
  // #100; "the A100 platform (which has 24 channels)", NVIDIA/nccl #1055), the count its topology
  // search picks to fill the links. So a channel moves the bus bandwidth over the channels at the
  // max clock (204 GB/s / 24 = 8.5 GB/s per SM at 1410 MHz), in proportion to the SM clock its
  // loads and stores issue at: with fewer SMs than NCCL's count, or below the max clock, a
  // collective is bound by its SMs, not the link. Other GPUs: the same rule from their own link
  // and clock, with the A100's channel count (an assumption until their logs are cited).
  int nccl_channels = 24;
  // A collective's latency, NCCL's own model of it (src/graph/tuning.cc, unchanged from NCCL 2.7
  // to 2.28; PyTorch 2.8, which the Kareus artifact ran, ships 2.27): the ring algorithm's Simple
  // protocol costs a base 8.4 us plus 3.4 us per ring step over NVLink (2(n-1) steps for an
  // all-reduce, n-1 for an all-gather or reduce-scatter). Simple is what NCCL's tuner picks for
  // the layers' collectives: LL128 (14 us + 1.9 us per step, at 0.92 of the bandwidth) is faster
  // only while a transfer takes under about 0.2 ms (an 8-GPU all-reduce; less with fewer ranks).
  double collective_launch_s = 8.4e-6;
  double ring_step_latency_s = 3.4e-6;
  // HBM bytes read + written per byte this GPU sends: receive buffer write, reduction reads and
  // output writes.
  double all_reduce_hbm_per_wire_byte = 3.0;
  double all_gather_hbm_per_wire_byte = 2.0;
  double reduce_scatter_hbm_per_wire_byte = 3.0;
};

// One interval in which nothing changes: which op runs (if any), whether the collective runs.
struct TimelinePhase {
  double start_s = 0;
  double end_s = 0;
  int op = -1;              // index into Partition::ops, -1 = no compute
  bool collective = false;  // the collective occupies its SMs
  double hbm_share = 1;     // < 1: the two contend for HBM and each runs at this share of its speed
  double hbm_bytes_per_s = 0;
  double link_bytes_per_s = 0;
  double power_w = 0;
  double freq_mhz = 0;  // the clock it ran at: the locked one, or lower at the power limit
};

struct Timeline {
  std::vector<TimelinePhase> phases;
  double time_s = 0;
  double energy_j = 0;
  double compute_end_s = 0;
  double collective_start_s = 0;  // both 0 without a collective
  double collective_end_s = 0;
};

class SimulatedEvaluator final : public EvaluatorImpl {
 public:
  explicit SimulatedEvaluator(hardware::GpuSpec gpu, SimulationOptions options = {});

  std::string name() const override { return "simulated"; }
  Provenance provenance() const override { return Provenance::kModel; }
  bool thread_safe() const override { return true; }
  const hardware::GpuSpec& gpu() const override { return gpu_; }
  EvalResult evaluate(const workload::Partition& partition,
                      const workload::Knob& knob) const override;

  // The phases behind evaluate()'s numbers (same time and energy).
  Timeline timeline(const workload::Partition& partition, const workload::Knob& knob) const;
  // The compute alone with every SM, and the collective alone with `sms` SMs (zero without one).
  EvalResult compute_alone(const workload::Partition& partition, double freq_mhz) const;
  EvalResult collective_alone(const workload::Partition& partition, double freq_mhz, int sms) const;
  // Bytes per second the collective puts on the link with `sms` SMs at `freq_mhz`, alone.
  double collective_rate_bps(double freq_mhz, int sms) const;

  const SimulationOptions& options() const { return options_; }

 private:
  // One run at the clock the GPU goes at (freq_mhz, after the power limit).
  template <bool kRecord>
  void run(const workload::Partition& partition, double freq_mhz, int sms, long launch_op,
           bool with_compute, bool with_collective, Timeline* out, double& time_s,
           double& energy_j) const;
  // The clock a run locked at `locked_mhz` goes at: lower where its average power, from
  // run_at(f) -> (time, energy), would pass the board's limit.
  template <typename RunAt>
  double run_clock_mhz(double locked_mhz, RunAt&& run_at) const;
  // The sequential knob's run of an un-split segment at `freq_mhz`: compute, then the collective.
  std::pair<double, double> sequential_at(const workload::Partition& whole, double freq_mhz, int sms) const;

  hardware::GpuSpec gpu_;
  SimulationOptions options_;
  double hbm_bps_ = 0;  // effective HBM bandwidth
  double copy_bytes_per_sm_cycle_ = 0;  // SimulationOptions::nccl_channels' rule
  double gemm_tile_overhead_depth_ = 0;  // a GEMM tile's fixed cost in reduction elements
};

// An Evaluator wrapping a SimulatedEvaluator.
Evaluator make_simulated_evaluator(hardware::GpuSpec gpu, SimulationOptions options = {});

}  // namespace kareus::evaluate
