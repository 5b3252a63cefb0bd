// The --evaluator flag shared by commands that cost knobs: "sim" (the simulated GPU model) or
// "table:FILE" (measured samples: our CSV or the Kareus artifact's eval_results.jsonl); `kareus plan`
// also takes "gpu" (measured now, on this machine's GPUs).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "kareus/evaluate/evaluator.hpp"
#include "kareus/evaluate/noisy.hpp"
#include "kareus/workload/parallel.hpp"

namespace kareus::cli {

// Throws InputError naming --evaluator for anything else. `noise` (--noise) applies to the
// simulated GPU only: a table already holds measurements.
evaluate::Evaluator make_evaluator(const std::string& spec, const hardware::GpuSpec& gpu,
                                   const evaluate::NoiseOptions& noise = {});
// As above, plus "gpu": measured on this machine's GPUs by the profiler (profile/profiler.hpp), for
// `model` under `parallel`. Without a GPU that is a DeviceError (one line). Under mpirun, ranks
// other than 0 serve rank 0's measurements inside this call and then exit the process (status 0).
evaluate::Evaluator make_evaluator(const std::string& spec, const hardware::GpuSpec& gpu,
                                   const workload::ModelSpec& model, const workload::ParallelConfig& parallel,
                                   const evaluate::NoiseOptions& noise = {});

// --noise SIGMA and --noise-seed N: seeded measurement noise on the simulated GPU (default off).
void add_noise_flags(CLI::App& cmd, evaluate::NoiseOptions& noise);

// "simulated GPU model, not a measurement" or "measured samples from FILE", for every output.
std::string provenance_note(const evaluate::Evaluator& evaluator);

}  // namespace kareus::cli
