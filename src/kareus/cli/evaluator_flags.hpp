// The --evaluator flag shared by commands that cost knobs: "sim" (the simulated GPU model),
// "table:FILE" (measured samples: our CSV or the Kareus artifact's eval_results.jsonl) or
// "artifact:DIR" (the Kareus artifact's profiling tree: <partition>/eval_results.jsonl and
// nonpartition/<MHz>/*_energy.csv; see evaluate/artifact_tree.hpp); `kareus plan` also takes
// "gpu" (measured now, on this machine's GPUs).
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kareus/evaluate/evaluator.hpp"
#include "kareus/evaluate/noisy.hpp"
#include "kareus/schedule/schedule.hpp"
#include "kareus/workload/parallel.hpp"

namespace kareus::cli {

// Throws InputError naming --evaluator for anything else, and the file at fault for bad input.
// `noise` (--noise) applies to the simulated GPU only: a table already holds measurements.
// `partition_key` names the partition of a table file that has no partition column. An artifact
// tree's account (records used, unusable ones and why) goes to stderr.
evaluate::Evaluator make_evaluator(const std::string& spec, const hardware::GpuSpec& gpu,
                                   const evaluate::NoiseOptions& noise = {},
                                   const std::optional<std::string>& partition_key = std::nullopt);

// For measured samples: one stderr line per thing this job cannot use (samples of a partition the
// job does not run, samples outside a partition's knob space with the reason, partitions without
// any sample), so that no sample is dropped in silence. Nothing for a model.
void report_sample_use(const evaluate::Evaluator& evaluator, const std::vector<workload::Partition>& partitions);
// As above, plus "gpu": measured on this machine's GPUs by the profiler (profile/profiler.hpp), for
// `model` under `parallel`, the partitions `schedule` runs (zb-h1's W among them). Without a GPU
// that is a DeviceError (one line). Under mpirun, ranks other than 0 serve rank 0's measurements
// inside this call and then get nullopt: their command is done (exit 0), rank 0 reports.
std::optional<evaluate::Evaluator> make_evaluator(const std::string& spec, const hardware::GpuSpec& gpu,
                                   const workload::ModelSpec& model, const workload::ParallelConfig& parallel,
                                   schedule::ScheduleKind schedule, const evaluate::NoiseOptions& noise = {});

// --noise SIGMA and --noise-seed N: seeded measurement noise on the simulated GPU (default off).
void add_noise_flags(CLI::App& cmd, evaluate::NoiseOptions& noise);

// "simulated GPU model, not a measurement" or "measured samples from FILE", for every output.
std::string provenance_note(const evaluate::Evaluator& evaluator);

}  // namespace kareus::cli
