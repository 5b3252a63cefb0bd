// The engine: how a training framework issues a pipeline instruction's work from the host, as data
// (data/engines/*.json, docs/architecture.md). The simulated GPU says what the kernels cost on the
// device; the engine says what issuing them costs the one host thread that issues them, and where
// the host waits for the GPU. A GPU kernel never starts before the host has issued it, so an
// instruction whose host time exceeds its GPU time runs at the host's pace, with the GPU idle
// between kernels (see instruction_time_s).
//
// Host cost is counted, not fitted: each operation of a partition is one framework call of a kind
// whose cost the engine file gives (a compute op in the nanobatched per-op loop, a compute op of the
// un-split layer through the framework's modules, a collective call, an event record or stream
// wait), times how many such calls the framework makes for it; every constant cites the public
// measurement it comes from in the file's "sources".
//
// Thread-safety: plain values and pure functions.
// Example:
//   EngineSpec e = load_engine("megatron-te-eager");
//   double h = host_time_s(e, find_partition(parts, "fwd_mlp"), {1410, 24, "norm_0"});
//   double exposed = exposed_host_time_s(e, find_partition(parts, "fwd_mlp"), IssuePath::kLoop);
//   double t = instruction_time_s(e, /*gpu_time_s=*/0.05 + exposed, /*host_time_s=*/0.03);
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kareus/workload/partition.hpp"

namespace kareus::engine {

// Seconds of host time per framework call of each kind.
struct HostCosts {
  double partition_op_s = 0;     // a compute op of a nanobatched partition, issued by the per-op loop
  double layer_op_s = 0;         // a compute op of the un-split layer, issued through the framework's modules
  double collective_call_s = 0;  // one collective library call (the framework's side and the library's)
  double event_s = 0;            // one event record or stream wait
  double partition_s = 0;        // a nanobatched partition's own setup and end (schedule lookup, comm sync)
  double instruction_s = 0;      // from an instruction's start to its first kernel's issue
  double launch_latency_s = 0;   // from a kernel's issue to its start on an idle GPU

  bool operator==(const HostCosts&) const = default;
};

// The host costs as engine files name them (in microseconds: "partition_op_us", ...), in file order.
struct HostCostField {
  std::string_view key;
  double HostCosts::*member;
};
std::span<const HostCostField> host_cost_fields();

struct EngineSpec {
  std::string name;          // preset id, e.g. "megatron-te-eager"
  std::string display_name;  // e.g. "Megatron-Core + TransformerEngine, eager PyTorch (the Kareus artifact)"
  std::string source;        // what the engine describes and where its counts come from
  HostCosts host;
  // The host waits for the GPU to drain at every instruction's start (Zeus's pipeline frequency
  // optimizer and Megatron's timers call torch.cuda.synchronize there), so each instruction starts
  // with an empty GPU queue and waits for its first kernel's issue.
  bool sync_per_instruction = false;
  // The host waits for the GPU before each op of the nanobatched per-op loop ("op_sync":
  // "partition_loop"): the loop's host time adds to its partitions' GPU time instead of hiding
  // behind it (exposed_host_time_s), and an instruction that overlaps any partition runs all of
  // them in the loop (issue_path).
  bool sync_per_loop_op = false;
  // The host waits for the GPU before each op of the un-split modules ("op_sync": "modules", or
  // "partition_loop+modules" with the above): their host time adds to the GPU time of every
  // partition issued through them (exposed_host_time_s). No preset says so; a trace that shows it
  // does (trace_fit.hpp).
  bool sync_per_module_op = false;
  // Framework calls per op of ours, where one of our ops is more than one call (the artifact's
  // residual fork beside its bias-dropout-add, the QKV split after the QKV GEMM): op name -> calls.
  std::map<std::string, int> partition_calls;
  std::map<std::string, int> layer_calls;
  // Library calls per collective of ours (the artifact's NCCL path gathers K and V in two calls).
  std::map<std::string, int> collective_calls;
  nlohmann::ordered_json sources;  // constant -> its citation

  bool idle() const;  // no host cost and no synchronisation: the GPU is never starved
  bool operator==(const EngineSpec&) const = default;
};

// The engine file's "op_sync" for the two flags above: "none", "partition_loop", "modules" or
// "partition_loop+modules".
std::string op_sync_name(const EngineSpec& engine);
// Where it waits, in words: "the nanobatched loop", "the un-split modules", both joined by "and", or
// "" when it keeps ahead.
std::string op_sync_where(const EngineSpec& engine);

// The engine every command uses unless --engine says otherwise: the one the Kareus artifact's
// measurements were taken through, which the plans Kareus exports run on.
inline constexpr std::string_view kDefaultEngine = "megatron-te-eager";

// Names of the bundled presets, data_dir()/engines/*.json, sorted.
std::vector<std::string> engine_preset_names();
// InputError naming file and field for anything malformed, listing the known presets for an
// unknown name.
EngineSpec load_engine_preset(std::string_view name);
EngineSpec load_engine_spec(const std::filesystem::path& json);
EngineSpec load_engine(std::string_view name_or_path);  // a preset name or a path to a JSON file
EngineSpec engine_from_json(const nlohmann::ordered_json& doc, const std::string& source);
nlohmann::ordered_json to_json(const EngineSpec& engine);

// How the host issues an instruction's partitions: through the framework's un-split modules, or
// through the nanobatched per-op loop, which an instruction runs when it overlaps any of its
// collectives. In the loop, a partition whose knob is sequential runs its nanobatch's ops with the
// collective after them (the Kareus artifact's "none" slot), not the un-split segment.
enum class IssuePath : std::uint8_t { kModules, kLoop };

// The path a knob implies on its own: an overlapped knob runs the loop, a sequential one the modules.
IssuePath path_of(const workload::Knob& knob);
// The path a partition under `knob` takes in an instruction that overlaps some partition or none:
// the loop for every partition of an overlapping instruction where the engine waits at each op of
// its loop (sync_per_loop_op: the artifact runs the whole instruction nanobatched); else path_of.
IssuePath issue_path(const EngineSpec& engine, const workload::Knob& knob, bool instruction_overlaps);

// Host seconds to issue one run of `partition` on `path`, counted as the partition's cost is
// (evaluate::Evaluator): in the loop, every compute op, the other nanobatch's collective call, the
// events that order it and the partition's setup, whatever its knob; through the modules (and, on
// either path, for a partition without a collective, which never runs the loop) the un-split
// segment, of which a layer partition is charged half. With a knob: on path_of(knob).
double host_time_s(const EngineSpec& engine, const workload::Partition& partition, IssuePath path);
double host_time_s(const EngineSpec& engine, const workload::Partition& partition, const workload::Knob& knob);

// Host seconds that add to a run of `partition` on `path`, on top of its GPU time: its host time on
// that path where the engine waits for the GPU at each op there (sync_per_loop_op for the loop,
// which a partition without a collective never runs; sync_per_module_op for the modules); else 0,
// the host's time hidden behind the GPU's as far as instruction_time_s says. The GPU idles
// through it.
double exposed_host_time_s(const EngineSpec& engine, const workload::Partition& partition, IssuePath path);

// An instruction's time from its kernels' GPU time (every partition back to back, the GPU never
// waiting) and its host time (every partition's host_time_s): a kernel starts no earlier than its
// issue, the host runs ahead of the GPU within the instruction, so the slower of the two sets the
// pace; with a synchronisation at the instruction's start, the host's time to its first kernel,
// and that kernel's launch latency, come first. The idle engine gives gpu_time_s exactly.
double instruction_time_s(const EngineSpec& engine, double gpu_time_s, double host_time_s);

}  // namespace kareus::engine
