// Fitting the simulated GPU's overlap interference to partitions measured on a cluster
// (`kareus hw fit --partitions DIR`, DIR the output of `kareus profile` run there).
//
// Fitted: hardware::GpuSpec::overlap_compute_slowdown and overlap_collective_slowdown, what a
// moving collective and the compute beside it cost each other beyond the model's SM stealing and
// HBM sharing (evaluate/simulated.hpp). Compared: each overlapped knob's measured time over its
// partition's sequential knob measured at the same clock, against the model's same ratio. A ratio
// cancels what the model gets wrong in the partition's kernels alone (the cluster's time scale, a
// GEMM's efficiency), so what is left for the factors is what overlapping costs. The fit
// minimises the squared log errors of those ratios (NLopt's BOBYQA over both factors in [1, 4],
// starting from 1: deterministic).
//
// Thread-safety: pure functions.
// Example:
//   auto measured = read_measured_partitions("prof");   // a kareus profile output directory
//   OverlapFit fit = fit_overlap(load_gpu_preset("a100-sxm4-40gb"), measured);
//   gpu.overlap_compute_slowdown = fit.compute_slowdown;
#pragma once

#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "kareus/hardware/gpu.hpp"
#include "kareus/search/measurement.hpp"
#include "kareus/workload/partition.hpp"

namespace kareus::calibrate {

struct MeasuredPartition {
  std::string source;  // the journal it came from
  std::string measured_on;  // the journal's GPU and evaluator, e.g. "a100-sxm4-40gb, gpu:nvml"
  workload::Partition partition;
  std::vector<search::Measurement> measurements;  // the journal's successful ones
};

// Reads every `kareus profile` journal (*.journal.jsonl) in `dir`, each partition rebuilt from the
// workload its header names (model, TP, CP, mbs, seq, checkpointing, hidden dropout). InputError
// for a directory without such journals, a journal without a workload header (an artifact's
// eval_results.jsonl) or one naming a partition its workload does not have.
std::vector<MeasuredPartition> read_measured_partitions(const std::filesystem::path& dir);

// One overlapped knob and the sequential knob measured at its clock.
struct OverlapPair {
  std::string partition;
  workload::Knob knob;
  double measured_ratio = 0;  // measured time of the knob over the sequential knob's
  double model_ratio_before = 0, model_ratio_after = 0;  // the model's, at the base's and the fitted factors

  double err_before() const { return model_ratio_before / measured_ratio - 1; }
  double err_after() const { return model_ratio_after / measured_ratio - 1; }
};

struct OverlapFit {
  double compute_slowdown = 1, collective_slowdown = 1;
  std::vector<OverlapPair> pairs;
  double err_median_before = 0, err_median_after = 0;  // median |err| of the pairs, as fractions
  int evaluations = 0;
};

// The pairs `measured` holds: every overlapped measurement with a sequential one of its partition
// at the same clock (their mean time where there are several), the model at `gpu`'s factors in
// both model ratios; and their median |err|. Fits nothing. InputError when there is no pair.
struct OverlapCheck {
  std::vector<OverlapPair> pairs;
  double err_median = 0;
};
OverlapCheck check_overlap(const hardware::GpuSpec& gpu, std::span<const MeasuredPartition> measured);

// Fits both factors of `base` (its other fields kept) to the pairs check_overlap finds; "before"
// is the model at the base's factors. InputError when there is no pair.
OverlapFit fit_overlap(const hardware::GpuSpec& base, std::span<const MeasuredPartition> measured);

}  // namespace kareus::calibrate
