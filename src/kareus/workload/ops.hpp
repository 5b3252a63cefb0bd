// A transformer layer as the GPU runs it: compute ops with their FLOPs and HBM bytes, and the
// collectives between them with the bytes they move, for one nanobatch (half a microbatch) on one
// TP/CP shard. These are counts only; what they cost is the evaluator's business.
//
// Thread-safety: plain values and pure functions.
// Example:
//   LayerOps layer = layer_ops(load_model("llama-3.2-3b"), validated(model, ParallelConfig{}));
//   for (const Step& s : layer.forward) if (auto* op = std::get_if<ComputeOp>(&s)) total +=
//   op->flops;
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "kareus/workload/model.hpp"
#include "kareus/workload/parallel.hpp"

namespace kareus::workload {

// bf16 activations and weights.
inline constexpr double kBytesPerElement = 2.0;

// GEMMs and attention are compute-bound and each is a launch slot of its own; the other kinds are
// memory-bound, and a run of them forms one launch slot named after the first op's kind.
enum class OpKind : std::uint8_t { kGemm, kAttention, kNorm, kRope, kActivation, kElementwise };

std::string_view to_string(OpKind kind);
bool is_memory_bound(OpKind kind);
// The prefix of a launch slot that starts with an op of this kind: linear, attn, norm, rope, act,
// elem.
std::string_view slot_family(OpKind kind);

enum class Pass : std::uint8_t { kForward, kBackward };
std::string_view to_string(Pass pass);

struct ComputeOp {
  std::string name;  // e.g. "qkv_proj", "flash_attention_bwd"
  OpKind kind = OpKind::kGemm;
  Pass pass = Pass::kForward;
  double flops = 0;      // floating-point operations (a multiply-add is 2)
  double hbm_bytes = 0;  // compulsory HBM traffic: inputs read once, outputs written once
  // Of hbm_bytes, what does not grow with the tokens (a GEMM's weights and weight gradients): a
  // kernel over twice the tokens reads them once, two nanobatches' kernels twice.
  double weight_bytes = 0;
  // The shape the kernel's thread blocks tile, which sets how its blocks fill the SMs (0 = not
  // given). GEMM: [rows x inner] activations times an [inner x cols] weight shard (rows = tokens).
  // Attention: `rows` query tokens per (sequence, head), `cols` = sequences x heads, `inner` =
  // head dim.
  double rows = 0, cols = 0, inner = 0;
  // Bytes that helper kernels inside the op move around its main kernel, alone (the reorders and
  // copies of context-parallel attention); activation-sized, not part of hbm_bytes.
  double helper_bytes = 0;

  bool operator==(const ComputeOp&) const = default;
};

// The same op over `factor` times the tokens (more sequences of the same length): FLOPs and
// activation traffic scale, weight traffic does not; a GEMM's rows and attention's sequences scale.
ComputeOp scaled_tokens(ComputeOp op, double factor);

enum class CollectiveKind : std::uint8_t { kAllReduce, kAllGather, kReduceScatter };
std::string_view to_string(CollectiveKind kind);
// "ar", "ag", "rs": the suffixes of the partition keys.
std::string_view short_name(CollectiveKind kind);

enum class ParallelGroup : std::uint8_t { kTensor, kContext };
std::string_view to_string(ParallelGroup group);

struct Collective {
  std::string name;  // e.g. "attn_all_reduce", "kv_all_gather"
  CollectiveKind kind = CollectiveKind::kAllReduce;
  ParallelGroup group = ParallelGroup::kTensor;
  int ranks = 1;
  // NCCL's "size": the buffer for all-reduce, the gathered output for all-gather, the unscattered
  // input for reduce-scatter.
  double bytes = 0;

  // Bytes each GPU sends (and receives) over its links in a ring, as NCCL's ring algorithm does:
  // 2(n-1)/n of the size for all-reduce, (n-1)/n for all-gather and reduce-scatter.
  double wire_bytes() const;
  // Sequential ring steps, each paying the link latency: 2(n-1) for all-reduce, n-1 otherwise.
  int ring_steps() const;

  bool operator==(const Collective&) const = default;
};

using Step = std::variant<ComputeOp, Collective>;

// One layer's steps in execution order. Each list is rotated to begin just after its last
// collective, so that cutting after every collective yields whole segments: the forward list
// begins with the residual add of the previous layer's MLP output (the artifact's prev_mlp_bda),
// the backward list with the previous (upper) layer's input-norm backward.
struct LayerOps {
  std::vector<Step> forward;
  std::vector<Step> backward;
};

// Tokens one nanobatch holds on one CP rank: (mbs/2) * seq / cp.
double nanobatch_tokens(const ParallelConfig& parallel);

// The layer's ops for one nanobatch on one TP/CP shard. Collectives: a TP all-reduce after the
// row-parallel GEMMs (attention output and FC2) in forward and after the column-parallel GEMMs'
// input gradients (FC1 and QKV) in backward, when TP > 1; with CP > 1 an all-gather of K/V before
// attention (again in backward, as all-gather-based CP re-gathers rather than keeping the gathered
// K/V) and a reduce-scatter of dK/dV after attention backward. `parallel` must be validated.
LayerOps layer_ops(const ModelSpec& model, const ParallelConfig& parallel);

}  // namespace kareus::workload
