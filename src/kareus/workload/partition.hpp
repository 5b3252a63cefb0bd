// Partitions: the units Kareus plans. A layer's op list is cut after every collective into
// segments; each segment gives two partitions, one per nanobatch: NB0 computes the segment while
// NB1's previous collective runs, NB1 computes it while NB0's collective of this segment runs.
// Partitions with the same compute and the same collective share a key (and a knob); keys follow
// docs/architecture.md: TP only fwd_attn, fwd_mlp, bwd_mlp, bwd_attn; with CP fwd_qkv_ar, fwd_qkv_ag,
// fwd_ao_ag, fwd_ao_ar, fwd_mlp, bwd_mlp, bwd_o_ar, bwd_o_ag, bwd_a_ag, bwd_a_rs, bwd_qkv_rs,
// bwd_qkv_ar.
//
// A launch slot is the compute op before which the collective launches: each GEMM and attention op
// is a slot, a run of memory-bound ops is one slot, named <family>_<index>: linear_1 is the
// partition's second GEMM, norm_0 its first norm/residual run. The slot "none" runs the collective
// after the compute, not overlapped: the sequential schedule is a knob like any other.
//
// Thread-safety: plain values and pure functions.
// Example:
//   std::vector<Partition> parts = build_partitions(model, parallel);
//   const Partition& p = find_partition(parts, "fwd_mlp");
//   Knob knob{1410, 12, "linear_0"};   // 1410 MHz, 12 SMs to the all-reduce, launch before FC1
#pragma once

#include <compare>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kareus/workload/ops.hpp"

namespace kareus::workload {

// The slot of the sequential (non-overlapped) schedule: the collective runs after the compute.
inline constexpr std::string_view kSequentialSlot = "none";

struct LaunchSlot {
  std::string name;          // e.g. "norm_0", "linear_1", "attn_0"
  std::size_t first_op = 0;  // index into Partition::ops
  std::size_t op_count = 1;  // ops of the slot (more than one only for a memory-bound run of one family)
  bool memory_bound = false;

  bool operator==(const LaunchSlot&) const = default;
};

struct Partition {
  std::string key;
  Pass pass = Pass::kForward;
  std::vector<ComputeOp> ops;     // this nanobatch's compute, in order
  std::vector<LaunchSlot> slots;  // where the collective may launch; empty = never overlapped
  std::optional<Collective> collective;  // the other nanobatch's collective, if any
  // How often the partition runs: per layer for layer partitions (2 when both nanobatches of a
  // segment share the key), per instruction for non-partition work.
  int count = 1;
  bool per_layer = true;  // false for non-partition work (embedding, LM head and loss)

  const LaunchSlot* find_slot(std::string_view name) const;
  // The slots a knob may name: every launch slot, then "none".
  std::vector<std::string> slot_names() const;
  double flops() const;
  double hbm_bytes() const;  // every op's traffic, its helper kernels' included

  bool operator==(const Partition&) const = default;
};

// A partition's knob: SM clock, SMs given to the collective, launch slot ("none" = sequential).
// A partition without a collective takes sms = 0 and slot "none".
struct Knob {
  double freq_mhz = 0;
  int sms = 0;
  std::string slot{kSequentialSlot};

  bool sequential() const { return slot == kSequentialSlot; }
  auto operator<=>(const Knob&) const = default;
};

// The segment a sequential knob runs: without overlap there is no reason to split the microbatch,
// so the compute runs un-split, over both nanobatches' tokens at once (GEMMs twice as tall, half
// the kernels, weights read once), and the collective over both nanobatches' bytes in one call.
// A layer partition evaluated this way costs half of what this returns. Work outside the layers
// (per_layer false) is already a whole microbatch and comes back unchanged.
Partition unsplit(const Partition& partition);

// What a partition's measured cost depends on, as a journal records it: the model, the GPU, TP, CP,
// the microbatch size, the sequence length and, when set, hidden dropout; not the pipeline (depth,
// layers per stage, microbatch count, schedule) nor checkpointing, which compose partitions but do
// not change them. Journals resume across those (search/journal.hpp).
nlohmann::json cost_identity(const ModelSpec& model, const ParallelConfig& parallel, const std::string& gpu_name);

// The layer partitions of `model` under `parallel` (validated), forward keys then backward keys, in
// execution order. Without any collective (TP = CP = 1) the layer is one segment per direction,
// keys fwd_layer and bwd_layer, never overlapped.
std::vector<Partition> build_partitions(const ModelSpec& model, const ParallelConfig& parallel);

// Work of pipeline stage `stage` outside the layers, for one whole microbatch, run without
// overlap: embedding (first stage; embedding_fwd, embedding_bwd) and final norm, LM head and
// cross-entropy loss (last stage; head_fwd, head_bwd). Empty for middle stages.
std::vector<Partition> non_partition_work(const ModelSpec& model, const ParallelConfig& parallel,
                                          int stage);

// The partition with `key`; throws InputError naming the known keys.
const Partition& find_partition(const std::vector<Partition>& partitions, std::string_view key);

// Launch slots for `ops`: each GEMM and attention op alone, each run of memory-bound ops of one
// family (norm, rope, act, elem) together; names count per family (norm_0, linear_1, ...).
std::vector<LaunchSlot> launch_slots(const std::vector<ComputeOp>& ops);

}  // namespace kareus::workload
