// The workload flags every command that takes a workload shares: --model --gpu --tp --cp --pp --dp
// --mbs --seq --microbatches --checkpointing --hidden-dropout --layers-per-stage --power-limit and --config FILE (JSON or YAML
// with the same keys, layers-per-stage spelt layers_per_stage or as a list). A flag given on the
// command line beats the config file, which beats the defaults: the first Kareus evaluation config
// (Llama 3.2 3B, A100 SXM4 40GB, TP 8, CP 1, PP 2, DP 1, mbs 8, seq 4096, 8 microbatches, full
// checkpointing, layers 15/13).
//
// Example:
//   auto flags = std::make_shared<WorkloadFlags>();
//   add_workload_flags(*cmd, *flags);
//   ...after parsing: ResolvedWorkload w = resolve_workload(*flags);
#pragma once

#include <CLI/CLI.hpp>
#include <map>
#include <optional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kareus/engine/engine.hpp"
#include "kareus/hardware/gpu.hpp"
#include "kareus/workload/model.hpp"
#include "kareus/workload/parallel.hpp"

namespace kareus::cli {

struct WorkloadFlags {
  std::string config;
  std::string model = "llama-3.2-3b";
  std::string gpu = "a100-sxm4-40gb";
  int tp = 8, cp = 1, pp = 2, dp = 1, mbs = 8, seq = 4096, microbatches = 8;
  std::string checkpointing = "full";
  double hidden_dropout = 0;
  std::string layers_per_stage;  // "15,13"; empty = the default split
  std::optional<double> power_limit_w;  // the GPU's power limit for the job; default: its TDP
  std::string engine{engine::kDefaultEngine};  // how the host issues the work (data/engines/)
  // Config key -> its option, to tell a flag given on the command line from its default.
  std::map<std::string, CLI::Option*> options;
};

void add_workload_flags(CLI::App& cmd, WorkloadFlags& flags);
// --engine NAME|FILE, for the commands whose figures an instruction's host side changes (plan,
// compare, evaluate, search, hw check); resolve_workload loads it (default engine::kDefaultEngine).
void add_engine_flag(CLI::App& cmd, std::string& engine);
// The engine --engine names (a preset or a file); a refusal names the flag.
engine::EngineSpec load_engine_flag(std::string_view value);

// For commands where `fixing_flag` (e.g. "--preset") names the whole workload: InputError naming
// the first workload flag or --config that was given too. --gpu stays free: it picks the device.
void reject_workload_flags(const WorkloadFlags& flags, std::string_view fixing_flag);

struct ResolvedWorkload {
  workload::ModelSpec model;
  workload::ParallelConfig parallel;  // validated, layers_per_stage filled in
  hardware::GpuSpec gpu;
  engine::EngineSpec engine{};
  // The config file's keys named in `extra_keys` of resolve_workload (another command's settings).
  nlohmann::json extra = nlohmann::json::object();
};

// Applies the config file and the flags, loads model and GPU, and validates. Throws InputError for
// a config key that is neither a workload key nor in `extra_keys` (naming it and the known keys),
// a value of the wrong type, an unknown model or GPU, or a bad parallel config.
ResolvedWorkload resolve_workload(const WorkloadFlags& flags,
                                  const std::vector<std::string>& extra_keys = {});

// What identifies the workload in a search or profile journal: everything that changes a
// partition's costs (model, GPU, TP, CP, mbs, seq_len, checkpointing). A resumed journal must match.
nlohmann::json journal_identity(const ResolvedWorkload& w);

// "Llama 3.2 3B on NVIDIA A100 SXM4 40GB: TP 8, CP 1, PP 2 (15/13 layers), DP 1, mbs 8, seq 4096,
// ..."
std::string describe(const ResolvedWorkload& w);

}  // namespace kareus::cli
