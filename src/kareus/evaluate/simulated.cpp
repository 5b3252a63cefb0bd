#include "kareus/evaluate/simulated.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kareus/core/error.hpp"

namespace kareus::evaluate {
namespace {

using workload::CollectiveKind;
using workload::ComputeOp;
using workload::OpKind;
using workload::Pass;

double efficiency(const SimulationOptions& o, const ComputeOp& op) {
  switch (op.kind) {
    case OpKind::kGemm:
      return o.gemm_efficiency;
    case OpKind::kAttention:
      return op.pass == Pass::kForward ? o.attention_fwd_efficiency : o.attention_bwd_efficiency;
    default:
      return o.memory_op_efficiency;
  }
}

double floor_ratio(const SimulationOptions& o, const ComputeOp& op) {
  switch (op.kind) {
    case OpKind::kGemm:
      return o.gemm_floor_ratio;
    case OpKind::kAttention:
      return o.attention_floor_ratio;
    default:
      return 0;
  }
}

// How much longer than a perfectly balanced run a kernel takes because its thread blocks fill
// the SMs in whole waves (the last wave part empty), pad the shape to whole tiles and, for a GEMM,
// pay each tile's fixed cost (`tile_overhead_depth`, in reduction elements: see the constructor):
// waves x SMs x block work over the op's work, 1 when the shape is not given.
double wave_factor(const SimulationOptions& o, const ComputeOp& op, double free_sms,
                   double tile_overhead_depth) {
  if (op.rows <= 0 || op.cols <= 0) return 1;
  // One output tile per SM at a time; `split` pieces of the reduction when the tiles are few.
  auto gemm = [&](double rows, double cols, double inner) {
    double best = std::numeric_limits<double>::infinity();
    for (auto [tr, tc] : {std::pair{o.gemm_tile_rows, o.gemm_tile_cols}, std::pair{o.gemm_tile_cols, o.gemm_tile_rows}}) {
      const double tiles = std::ceil(rows / tr) * std::ceil(cols / tc);
      for (int split = 1; split <= o.gemm_max_split_k && inner / split >= o.gemm_tile_rows; ++split) {
        const double waves = std::ceil(tiles * split / free_sms);
        best = std::min(best, waves * free_sms * tr * tc * (inner / split + tile_overhead_depth) /
                                  (rows * cols * inner));
      }
    }
    return std::isfinite(best) ? best : 1.0;
  };
  if (op.kind == OpKind::kGemm) {
    if (op.pass == Pass::kForward) return gemm(op.rows, op.cols, op.inner);
    // Backward: the input gradient [rows x inner] (reduction over cols) and the weight gradient
    // [inner x cols] (reduction over rows), half the FLOPs each.
    return (gemm(op.rows, op.inner, op.cols) + gemm(op.inner, op.cols, op.rows)) / 2;
  }
  if (op.kind == OpKind::kAttention) {
    const double blocks = std::ceil(op.rows / o.attention_block_queries) * op.cols;
    const double waves = std::ceil(blocks / free_sms);
    return waves * free_sms / (op.rows / o.attention_block_queries * op.cols);
  }
  return 1;
}

double hbm_per_wire_byte(const SimulationOptions& o, CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllReduce:
      return o.all_reduce_hbm_per_wire_byte;
    case CollectiveKind::kAllGather:
      return o.all_gather_hbm_per_wire_byte;
    case CollectiveKind::kReduceScatter:
      return o.reduce_scatter_hbm_per_wire_byte;
  }
  return 0;
}

}  // namespace

SimulatedEvaluator::SimulatedEvaluator(hardware::GpuSpec gpu, SimulationOptions options)
    : gpu_(std::move(gpu)),
      options_(options),
      hbm_bps_(gpu_.hbm_bandwidth_bps * options.hbm_efficiency) {
  KAREUS_CHECK(
      gpu_.sms >= 2 && gpu_.max_clock_mhz > 0 && hbm_bps_ > 0 && gpu_.nvlink_bandwidth_bps > 0,
      "the simulated GPU needs SMs, clocks, HBM and link bandwidth");
  KAREUS_CHECK(options_.nccl_channels >= 1, "NCCL runs at least one channel");
  copy_bytes_per_sm_cycle_ = gpu_.nvlink_bandwidth_bps * options_.link_efficiency /
                             (options_.nccl_channels * gpu_.max_clock_mhz * 1e6);
  if (gpu_.l2_bytes_per_clock > 0) {
    // A tile's fixed cost, in the reduction depth its main loop covers in the same time: the
    // prologue loads gemm_stages - 1 stages of operands and the epilogue stores the bf16 output
    // tile, at this SM's share of the L2 bandwidth (every SM does the same at once), while its
    // tensor cores wait. Both scale with the clock, as the main loop does.
    const double e = workload::kBytesPerElement;
    const double tile_bytes =
        (options_.gemm_stages - 1) * (options_.gemm_tile_rows + options_.gemm_tile_cols) *
            options_.gemm_tile_depth * e +
        options_.gemm_tile_rows * options_.gemm_tile_cols * e;
    const double overhead_cycles = tile_bytes / (gpu_.l2_bytes_per_clock / gpu_.sms);
    const double flops_per_sm_cycle = gpu_.peak_bf16_flops / (gpu_.max_clock_mhz * 1e6 * gpu_.sms);
    const double cycles_per_depth = 2 * options_.gemm_tile_rows * options_.gemm_tile_cols /
                                    (flops_per_sm_cycle * options_.gemm_efficiency);
    gemm_tile_overhead_depth_ = overhead_cycles / cycles_per_depth;
  }
}

double SimulatedEvaluator::collective_rate_bps(double freq_mhz, int sms) const {
  const double link = gpu_.nvlink_bandwidth_bps * options_.link_efficiency;
  const double copy = sms * copy_bytes_per_sm_cycle_ * freq_mhz * 1e6;
  return std::min(link, copy);
}

template <bool kRecord>
void SimulatedEvaluator::run(const workload::Partition& partition, double freq_mhz, int sms,
                             long launch_op, bool with_compute, bool with_collective, Timeline* out,
                             double& time_s, double& energy_j) const {
  const double all_sms = gpu_.sms;
  const double peak_flops = hardware::peak_flops_at(gpu_, freq_mhz);
  const double top_peak_flops = hardware::peak_flops_at(gpu_, gpu_.max_clock_mhz);
  const std::size_t n = with_compute ? partition.ops.size() : 0;
  const workload::Collective* coll =
      with_collective && partition.collective ? &*partition.collective : nullptr;
  KAREUS_CHECK(!coll || (sms >= 1 && sms < gpu_.sms), "a collective needs 1..SMs-1 SMs");

  // The collective first pays its launch and per-step latency (holding its SMs, moving nothing),
  // then moves its bytes.
  double coll_latency_s = 0, coll_bytes = 0, coll_hbm_factor = 0;
  if (coll) {
    coll_latency_s =
        options_.collective_launch_s + coll->ring_steps() * options_.ring_step_latency_s;
    coll_bytes = coll->wire_bytes();
    coll_hbm_factor = hbm_per_wire_byte(options_, coll->kind);
  }
  bool coll_active = false, coll_done = coll == nullptr;
  std::size_t k = 0;
  double op_left = 1;  // fraction of op k still to run
  double t = 0, e = 0;
  if constexpr (kRecord) {
    if (n == 0) out->compute_end_s = 0;
  }
  constexpr double kInf = std::numeric_limits<double>::infinity();

  while (true) {
    if (!coll_active && !coll_done && static_cast<long>(k) >= launch_op) {
      coll_active = true;
      if constexpr (kRecord) out->collective_start_s = t;
    }
    const bool op_running = k < n;
    if (!op_running && !coll_active) break;

    // The phase at clock f: the op's and the collective's speeds, and the power they draw.
    struct Phase {
      double op_time_s = 0, dt_op = kInf, dt_coll = kInf, share = 1, coll_link_bps = 0, power_w = 0;
      hardware::Activity activity;
    };
    const bool moving = coll_active && coll_latency_s <= 0;
    auto phase_at = [&](double f) {  // f: the clock the run goes at
      Phase ph;
      double op_hbm_bps = 0, compute_time_s = 0, op_eff = 0, free_share = 1;
      if (op_running) {
        const ComputeOp& op = partition.ops[k];
        free_share = coll_active ? (all_sms - sms) / all_sms : 1.0;
        op_eff = efficiency(options_, op);
        // The SMs left to compute run the op's blocks in whole waves.
        const double waves = wave_factor(options_, op, coll_active ? all_sms - sms : all_sms,
                                         gemm_tile_overhead_depth_);
        compute_time_s = waves * op.flops / (peak_flops * free_share * op_eff);
        const double floor_s =
            waves * floor_ratio(options_, op) * op.flops / (top_peak_flops * free_share * op_eff);
        // Helper kernels (op.helper_bytes) run alone around the main one, at the HBM's speed.
        ph.op_time_s = std::max({compute_time_s, floor_s, op.hbm_bytes / hbm_bps_}) + op.helper_bytes / hbm_bps_ +
                       options_.kernel_launch_s;
        op_hbm_bps = (op.hbm_bytes + op.helper_bytes) / ph.op_time_s;
      }
      ph.coll_link_bps = moving ? collective_rate_bps(f, sms) : 0;
      const double coll_hbm_bps = ph.coll_link_bps * coll_hbm_factor;
      // Contention: when compute and collective together ask for more than the HBM delivers, each
      // gets its proportional share and runs at that share of its speed.
      const double demand = op_hbm_bps + coll_hbm_bps;
      ph.share = demand > hbm_bps_ ? hbm_bps_ / demand : 1.0;
      // The GPU's measured interference, on top of that share: slower, so asking for less, never
      // leaving the other more.
      const bool both = moving && op_running;
      const double op_slowdown = both ? gpu_.overlap_compute_slowdown : 1.0;
      const double coll_slowdown = both ? gpu_.overlap_collective_slowdown : 1.0;
      ph.op_time_s *= op_slowdown;
      ph.coll_link_bps /= coll_slowdown;
      ph.dt_op = op_running ? op_left * ph.op_time_s / ph.share : kInf;
      ph.dt_coll = !coll_active ? kInf : (moving ? coll_bytes / (ph.coll_link_bps * ph.share) : coll_latency_s);
      if (op_running) {
        ph.activity.compute_sm_fraction = free_share;
        ph.activity.compute_intensity = std::min(1.0, op_eff * compute_time_s * ph.share / ph.op_time_s);
      }
      if (coll_active) ph.activity.comm_sm_fraction = sms / all_sms;
      ph.activity.hbm_bytes_per_s = (op_hbm_bps / op_slowdown + coll_hbm_bps / coll_slowdown) * ph.share;
      ph.activity.link_bytes_per_s = 2 * ph.coll_link_bps * ph.share;  // sends and receives as much
      ph.power_w = hardware::power_w(gpu_, f, ph.activity);
      return ph;
    };
    const Phase ph = phase_at(freq_mhz);
    const double op_time_s = ph.op_time_s, share = ph.share, coll_link_bps = ph.coll_link_bps;
    const double dt_op = ph.dt_op, dt_coll = ph.dt_coll;
    const double dt = std::min(dt_op, dt_coll);
    const hardware::Activity& activity = ph.activity;
    const double power = ph.power_w;
    // The phase as the GPU's cluster runs it: time_scale times as long, at the same power.
    const double measured_dt = dt * gpu_.time_scale;
    if constexpr (kRecord) {
      out->phases.push_back({t, t + measured_dt, op_running ? static_cast<int>(k) : -1, coll_active, share,
                             activity.hbm_bytes_per_s, activity.link_bytes_per_s, power, freq_mhz});
    }
    t += measured_dt;
    e += power * measured_dt;

    if (op_running) {
      if (dt_op <= dt) {
        ++k;
        op_left = 1;
        if constexpr (kRecord) {
          if (k == n) out->compute_end_s = t;
        }
      } else {
        op_left -= dt * share / op_time_s;
      }
    }
    if (coll_active) {
      if (dt_coll <= dt) {
        if (moving) {
          coll_active = false;
          coll_done = true;
          if constexpr (kRecord) out->collective_end_s = t;
        } else {
          coll_latency_s = 0;
        }
      } else if (moving) {
        coll_bytes -= dt * coll_link_bps * share;
      } else {
        coll_latency_s -= dt;
      }
    }
  }
  time_s = t;
  energy_j = e;
}

template <typename RunAt>
double SimulatedEvaluator::run_clock_mhz(double locked_mhz, RunAt&& run_at) const {
  return hardware::power_capped_clock_mhz(gpu_, locked_mhz, [&](double f) {
    const auto [t, e] = run_at(f);
    return t > 0 ? e / t : gpu_.static_power_w;
  });
}

std::pair<double, double> SimulatedEvaluator::sequential_at(const workload::Partition& whole,
                                                            double freq_mhz, int sms) const {
  double tc = 0, ec = 0, tk = 0, ek = 0;
  run<false>(whole, freq_mhz, 0, 0, true, false, nullptr, tc, ec);
  if (whole.collective) run<false>(whole, freq_mhz, sms, 0, false, true, nullptr, tk, ek);
  return {tc + tk, ec + ek};
}

EvalResult SimulatedEvaluator::compute_alone(const workload::Partition& partition,
                                             double freq_mhz) const {
  auto at = [&](double f) {
    double t = 0, e = 0;
    run<false>(partition, f, 0, 0, true, false, nullptr, t, e);
    return std::pair{t, e};
  };
  const auto [t, e] = at(run_clock_mhz(freq_mhz, at));
  return EvalResult::success(t, e);
}

EvalResult SimulatedEvaluator::collective_alone(const workload::Partition& partition,
                                                double freq_mhz, int sms) const {
  if (!partition.collective) return EvalResult::success(0, 0);
  auto at = [&](double f) {
    double t = 0, e = 0;
    run<false>(partition, f, sms, 0, false, true, nullptr, t, e);
    return std::pair{t, e};
  };
  const auto [t, e] = at(run_clock_mhz(freq_mhz, at));
  return EvalResult::success(t, e);
}

EvalResult SimulatedEvaluator::evaluate(const workload::Partition& partition,
                                        const workload::Knob& knob) const {
  if (knob.sequential() || !partition.collective) {
    // Not overlapped, the segment runs un-split: each of its two partitions costs half the
    // whole microbatch's run, compute then collective, under one power limit.
    const workload::Partition whole = workload::unsplit(partition);
    const double share = partition.per_layer ? 0.5 : 1.0;
    auto at = [&](double f) { return sequential_at(whole, f, knob.sms); };
    const auto [t, e] = at(run_clock_mhz(knob.freq_mhz, at));
    return EvalResult::success(share * t, share * e);
  }
  const workload::LaunchSlot* slot = partition.find_slot(knob.slot);
  KAREUS_CHECK(slot != nullptr, "the wrapper checks the slot");
  auto at = [&](double f) {
    double t = 0, e = 0;
    run<false>(partition, f, knob.sms, static_cast<long>(slot->first_op), true, true, nullptr, t, e);
    return std::pair{t, e};
  };
  const auto [t, e] = at(run_clock_mhz(knob.freq_mhz, at));
  return EvalResult::success(t, e);
}

Timeline SimulatedEvaluator::timeline(const workload::Partition& partition,
                                      const workload::Knob& knob) const {
  Timeline out;
  if (knob.sequential() || !partition.collective) {
    // As evaluate(): the un-split segment at the clock its average power allows, its times and
    // energy halved for a layer partition.
    const workload::Partition whole = workload::unsplit(partition);
    const double f = run_clock_mhz(knob.freq_mhz, [&](double c) { return sequential_at(whole, c, knob.sms); });
    double tc = 0, ec = 0, tk = 0, ek = 0;
    run<true>(whole, f, 0, 0, true, false, &out, tc, ec);
    if (whole.collective) {
      Timeline coll;
      run<true>(whole, f, knob.sms, 0, false, true, &coll, tk, ek);
      for (auto phase : coll.phases) {
        phase.start_s += tc;
        phase.end_s += tc;
        out.phases.push_back(phase);
      }
      out.collective_start_s = tc + coll.collective_start_s;
      out.collective_end_s = tc + coll.collective_end_s;
    }
    out.time_s = tc + tk;
    out.energy_j = ec + ek;
    if (partition.per_layer) {
      for (auto& phase : out.phases) phase.start_s /= 2, phase.end_s /= 2;
      out.time_s /= 2, out.energy_j /= 2, out.compute_end_s /= 2;
      out.collective_start_s /= 2, out.collective_end_s /= 2;
    }
    return out;
  }
  const workload::LaunchSlot* slot = partition.find_slot(knob.slot);
  if (!slot)
    throw InputError({"", 0, 0, "slot"},
                     "partition " + partition.key + " has no slot " + knob.slot);
  const long launch = static_cast<long>(slot->first_op);
  const double f = run_clock_mhz(knob.freq_mhz, [&](double c) {
    double t = 0, e = 0;
    run<false>(partition, c, knob.sms, launch, true, true, nullptr, t, e);
    return std::pair{t, e};
  });
  run<true>(partition, f, knob.sms, launch, true, true, &out, out.time_s, out.energy_j);
  return out;
}

Evaluator make_simulated_evaluator(hardware::GpuSpec gpu, SimulationOptions options) {
  return Evaluator(std::make_unique<SimulatedEvaluator>(std::move(gpu), options));
}

}  // namespace kareus::evaluate
