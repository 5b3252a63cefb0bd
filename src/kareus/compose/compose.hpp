// From partition costs to the pipeline's option table: per stage, instruction and SM clock, the
// Pareto set of (time, energy) over every way of choosing one knob per partition key at that
// clock. One clock per instruction, one knob per key shared by all layers of the stage.
//
// An instruction is the sum of its partitions, each weighted by how often it runs on the stage
// (layers × nanobatch partitions sharing the key), plus the stage's non-partition work (embedding
// on the first stage, final norm + LM head + loss on the last). With full activation
// checkpointing a backward is the recomputed forward (its own knobs, listed under "recompute")
// followed by the backward. Sums are pruned to their Pareto set in (time, effective energy
// E − P_static·t) after each key, so the product of per-key choices never materialises.
//
// With `virtual_stages` V > 1 (interleaved) each stage's V chunks get options of their own: a chunk
// runs a V-th of the stage's layers (they must split into whole layers, as the workload splits
// them), the embedding belongs to the first chunk of the first stage, and the LM head and loss to
// the last chunk of the last stage.
//
// For a zero-bubble schedule (`split_backward`) every stage also gets B and W options. W is the
// stage's layers' weight-gradient GEMMs (workload/zero_bubble.hpp's `bwd_wgrad` partition, measured
// per clock; it has no collective, so one option per clock). B is, per clock and knob, the
// backward's option less W at that clock: the recomputed forward, every collective and every other
// op stay in B, so B + W is the backward exactly. That takes the weight GEMMs' cost inside an
// overlapped backward partition to be what they cost alone; where they hid part of a collective, B
// is that much optimistic. The embedding's and LM head's backwards stay whole in B.
//
// An engine (engine/engine.hpp) adds the host's side: every point's host time under its knob is
// summed beside its GPU time, and an instruction takes engine::instruction_time_s of the two, its
// idle time between kernels at P_static. Where the engine waits for the GPU at each op of the
// nanobatched loop, an instruction that overlaps any partition runs all of them in it, each
// point's exposed host time (engine::exposed_host_time_s) joining its GPU time first, at P_static;
// one that overlaps none runs the un-split modules (engine::issue_path), whose host time joins the
// GPU time too where the engine waits at their ops (sync_per_module_op). So an instruction run
// un-split can beat the overlapped ones. Sums are then pruned in (GPU time, host time, effective
// energy), each of which only ever worsens the instruction, so nothing on the front is lost. The
// default engine is idle (no host cost, no synchronisation), and the table is what the GPU alone
// gives.
//
// The overhead factor scales each instruction's time and energy for the work the partitions do
// not cover (kernel launch gaps, the optimizer's share, ...): 1.0 by default; the Kareus artifact
// used 1.15.
//
// Thread-safety: pure functions on values.
// Example:
//   PartitionPoints points;  points["fwd_attn"] = {{{1410, 12, "linear_1"}, 0.004, 1.6}, ...};
//   pipeline::OptionTable table = compose_option_table(model, parallel, points, {.p_static_w = 85});
#pragma once

#include <map>
#include <string>
#include <vector>

#include "kareus/engine/engine.hpp"
#include "kareus/pipeline/option_table.hpp"
#include "kareus/workload/model.hpp"
#include "kareus/workload/parallel.hpp"
#include "kareus/workload/partition.hpp"

namespace kareus::compose {

// One partition execution under a knob, on one GPU.
struct PartitionPoint {
  workload::Knob knob;
  double time_s = 0;
  double energy_j = 0;
};

// Measured or modelled points per partition key; any clocks, any number of knobs per clock.
using PartitionPoints = std::map<std::string, std::vector<PartitionPoint>>;

struct ComposeOptions {
  double p_static_w = 0;
  double overhead_factor = 1.0;
  bool split_backward = false;  // also B and W options (points must hold workload::kWeightGradientKey)
  int virtual_stages = 1;       // model chunks per stage, each with options of its own
  engine::EngineSpec engine{};  // how the host issues the work; default: idle, the GPU alone
};

// The option table of every stage of `parallel` (validated). A clock is offered for an
// instruction when every key the instruction needs has a point at that clock; an instruction
// with no such clock is an InputError naming the key and the clocks it lacks; so is, with
// split_backward, a stage whose backward and W share no clock, and a stage whose layers do not
// split into the virtual stages.
pipeline::OptionTable compose_option_table(const workload::ModelSpec& model,
                                           const workload::ParallelConfig& parallel,
                                           const PartitionPoints& points, const ComposeOptions& options);

// The partition keys a stage's instruction runs, in order: (recompute keys, keys). For tests and
// for callers that need to know what to measure.
struct InstructionKeys {
  std::vector<std::string> recompute;  // layer forward keys, with full checkpointing on backward
  std::vector<std::string> keys;       // layer keys of this pass
  std::vector<std::string> fixed;      // non-partition work, always sequential
};
InstructionKeys instruction_keys(const workload::ModelSpec& model, const workload::ParallelConfig& parallel,
                                 int stage, schedule::InstructionType type, int chunk = 0, int chunks = 1);

}  // namespace kareus::compose
