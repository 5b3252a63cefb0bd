// Perseus-style whole-stage sweeps: per pipeline stage, instruction (forward, backward) and SM
// clock, the time and energy of the stage's whole instruction measured in one window: its layers'
// partitions in order, each as often as the stage runs it (layers x the partition's count; with
// full checkpointing the backward first recomputes the forward), then the stage's non-partition
// work (embedding, final norm + LM head + loss), all with the sequential knob. These are the
// options Perseus plans a pipeline from without Kareus's per-partition knobs: written in its
// profile format, `stage,instruction,frequency,time,energy` (s, J per GPU), which
// `kareus frontier --profile` reads.
//
// Every instruction measured is journalled (<out>/stages.journal.jsonl) as it completes; a rerun
// with the same flags resumes without measuring one twice.
//
// Thread-safety: one thread, on rank 0, while the other ranks serve().
// Example:
//   StageSweepRequest request{.clocks_mhz = {1210, 1410}, .out_dir = "prof", .identity = identity};
//   StageSweepOutcome outcome = run_stage_sweep(profiler.session(), model, parallel, request);
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kareus/pipeline/option_table.hpp"
#include "kareus/profile/session.hpp"
#include "kareus/workload/model.hpp"
#include "kareus/workload/parallel.hpp"

namespace kareus::profile {

// The steps of stage `stage`'s instruction `type`, as the option table composes it
// (compose::instruction_keys), from the job's `partitions` (layer partitions and every stage's
// non-partition work), with the sequential knob (`sequential_sms` for a collective).
std::vector<Measurer::Step> stage_steps(const workload::ModelSpec& model, const workload::ParallelConfig& parallel,
                                        const std::vector<workload::Partition>& partitions, int stage,
                                        schedule::InstructionType type, int sequential_sms);

struct StageSweepRequest {
  std::vector<double> clocks_mhz;
  int sequential_sms = 0;
  std::filesystem::path out_dir;
  nlohmann::json identity;  // the journal's workload identity
};

struct StageMeasurement {
  int stage = 0;
  schedule::InstructionType type = schedule::InstructionType::kForward;
  double freq_mhz = 0;
  double time_s = 0;    // one run of the whole instruction (the slowest rank's)
  double energy_j = 0;  // per GPU
};

struct StageSweepOutcome {
  std::vector<StageMeasurement> measurements;  // by stage, instruction, clock
  std::size_t measured_now = 0;
};

std::filesystem::path stage_journal_path(const std::filesystem::path& out_dir);
std::filesystem::path stage_profile_path(const std::filesystem::path& out_dir);

// Rank 0. Throws InputError before measuring anything for no clocks, or a journal of another
// workload or evaluator.
StageSweepOutcome run_stage_sweep(ProfileSession& session, const workload::ModelSpec& model,
                                  const workload::ParallelConfig& parallel,
                                  const std::vector<workload::Partition>& partitions, const StageSweepRequest& request);

// The Perseus profile CSV of `measurements`.
std::string stage_profile_csv(const std::vector<StageMeasurement>& measurements);

}  // namespace kareus::profile
