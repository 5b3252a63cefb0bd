#include "kareus/workload/ops.hpp"

#include <algorithm>

#include "kareus/core/error.hpp"

namespace kareus::workload {
namespace {

constexpr double e = kBytesPerElement;

// A GEMM of an [M x K] activation by a [K x N] weight shard. Backward runs the input gradient
// (dX = dY W^T) and the weight gradient (dW = X^T dY), twice the forward FLOPs; the weight gradient
// accumulates into fp32 main grads (read and write 4 bytes per weight), as Megatron does.
ComputeOp gemm(std::string name, Pass pass, double m, double k, double n) {
  if (pass == Pass::kForward) {
    return {std::move(name), OpKind::kGemm, pass, 2 * m * k * n, e * (m * k + k * n + m * n), e * k * n, m, n, k};
  }
  return {std::move(name), OpKind::kGemm,  pass, 4 * m * k * n, e * (2 * m * n + 2 * m * k + k * n) + 8 * k * n,
          e * k * n + 8 * k * n,     m, n, k};
}

// `weight_elements` of `elements_moved` are a norm's weights: read once however many tokens.
ComputeOp memory_op(std::string name, OpKind kind, Pass pass, double flops, double elements_moved,
                    double weight_elements = 0) {
  return {std::move(name), kind, pass, flops, e * elements_moved, e * weight_elements};
}

// Rotates `steps` to begin just after the last collective (no-op when there is none).
std::vector<Step> rotate_after_last_collective(std::vector<Step> steps) {
  auto last = std::find_if(steps.rbegin(), steps.rend(),
                           [](const Step& s) { return std::holds_alternative<Collective>(s); });
  if (last == steps.rend()) return steps;
  std::rotate(steps.begin(), last.base(), steps.end());
  return steps;
}

}  // namespace

std::string_view to_string(OpKind kind) {
  switch (kind) {
    case OpKind::kGemm:
      return "gemm";
    case OpKind::kAttention:
      return "attention";
    case OpKind::kNorm:
      return "norm";
    case OpKind::kRope:
      return "rope";
    case OpKind::kActivation:
      return "activation";
    case OpKind::kElementwise:
      return "elementwise";
  }
  return "?";
}

bool is_memory_bound(OpKind kind) {
  return kind != OpKind::kGemm && kind != OpKind::kAttention;
}

std::string_view slot_family(OpKind kind) {
  switch (kind) {
    case OpKind::kGemm:
      return "linear";
    case OpKind::kAttention:
      return "attn";
    case OpKind::kNorm:
      return "norm";
    case OpKind::kRope:
      return "rope";
    case OpKind::kActivation:
      return "act";
    case OpKind::kElementwise:
      return "elem";
  }
  return "?";
}

std::string_view to_string(Pass pass) {
  return pass == Pass::kForward ? "forward" : "backward";
}

std::string_view to_string(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllReduce:
      return "all-reduce";
    case CollectiveKind::kAllGather:
      return "all-gather";
    case CollectiveKind::kReduceScatter:
      return "reduce-scatter";
  }
  return "?";
}

std::string_view short_name(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllReduce:
      return "ar";
    case CollectiveKind::kAllGather:
      return "ag";
    case CollectiveKind::kReduceScatter:
      return "rs";
  }
  return "?";
}

std::string_view to_string(ParallelGroup group) {
  return group == ParallelGroup::kTensor ? "tp" : "cp";
}

ComputeOp scaled_tokens(ComputeOp op, double factor) {
  op.flops *= factor;
  op.hbm_bytes = (op.hbm_bytes - op.weight_bytes) * factor + op.weight_bytes;
  op.helper_bytes *= factor;
  if (op.kind == OpKind::kGemm) op.rows *= factor;
  if (op.kind == OpKind::kAttention) op.cols *= factor;
  return op;
}

double Collective::wire_bytes() const {
  const double n = ranks;
  if (ranks <= 1) return 0;
  return kind == CollectiveKind::kAllReduce ? 2 * (n - 1) / n * bytes : (n - 1) / n * bytes;
}

int Collective::ring_steps() const {
  if (ranks <= 1) return 0;
  return kind == CollectiveKind::kAllReduce ? 2 * (ranks - 1) : ranks - 1;
}

double nanobatch_tokens(const ParallelConfig& parallel) {
  return static_cast<double>(parallel.nanobatch_size()) * parallel.seq_len / parallel.cp;
}

LayerOps layer_ops(const ModelSpec& model, const ParallelConfig& p) {
  KAREUS_CHECK(p.microbatch_size >= 2 && model.num_attention_heads % p.tp == 0 &&
                   model.num_query_groups % p.tp == 0 && p.seq_len % p.cp == 0,
               "layer_ops needs a validated ParallelConfig");
  const double t = nanobatch_tokens(p);  // tokens of this shard's nanobatch
  const double t_kv = t * p.cp;          // tokens whose K/V attention sees
  const double h = static_cast<double>(model.hidden_size);
  const double heads = static_cast<double>(model.num_attention_heads / p.tp);
  const double q = heads * static_cast<double>(model.head_dim);  // query width
  const double kv =
      static_cast<double>(model.num_query_groups / p.tp * model.head_dim);  // K (or V) width
  const double f = static_cast<double>(model.ffn_hidden_size / p.tp);
  const bool tp = p.tp > 1, cp = p.cp > 1;
  const Pass fw = Pass::kForward, bw = Pass::kBackward;

  auto tp_all_reduce = [&](std::string name) {
    return Collective{std::move(name), CollectiveKind::kAllReduce, ParallelGroup::kTensor, p.tp,
                      e * t * h};
  };
  const double kv_bytes = e * t_kv * 2 * kv;  // all ranks' K and V
  // With hidden dropout the bias-dropout-add writes a one-byte mask per element (half a bf16
  // element of traffic) and its gradient reads it.
  const double mask = p.hidden_dropout > 0 ? t * h / e : 0;
  // Causal attention: on average each query sees half the sequence; with load-balanced CP each rank
  // holds 2 of the 2*CP chunks so its queries still see half the sequence on average.
  const double attention_flops = 4 * t * (p.seq_len / 2.0) * q;

  LayerOps ops;
  auto& fwd = ops.forward;
  fwd.push_back(memory_op("residual_add", OpKind::kNorm, fw, t * h, 3 * t * h + mask));
  fwd.push_back(memory_op("input_norm", OpKind::kNorm, fw, 4 * t * h, 2 * t * h + h, h));
  fwd.push_back(gemm("qkv_proj", fw, t, h, q + 2 * kv));
  if (model.qk_norm)
    fwd.push_back(memory_op("qk_norm", OpKind::kRope, fw, 4 * t * (q + kv), 2 * t * (q + kv)));
  fwd.push_back(memory_op("rope", OpKind::kRope, fw, 3 * t * (q + kv), 2 * t * (q + kv)));
  if (cp)
    fwd.push_back(Collective{"kv_all_gather", CollectiveKind::kAllGather, ParallelGroup::kContext,
                             p.cp, kv_bytes});
  const double sequences = static_cast<double>(p.nanobatch_size());
  const double q_per_sequence = p.seq_len / static_cast<double>(p.cp);  // this rank's query tokens
  // All-gather CP as TransformerEngine runs it (AttnFuncWithCPAndKVAllGather, Megatron's sbhd
  // layout): the gathered K and V are index_select-ed into sequence order, attention runs once per
  // local chunk (this rank's two of the 2·CP) and each chunk's output is copied into place, each a
  // kernel of its own. Backward re-gathers and reorders, zeroes full-length dK/dV, adds each
  // chunk's dK/dV into its KV range (ranges summing to (2CP+1)/2CP of the gathered length), copies
  // each chunk's dQ into place and reorders dK/dV back. Read + write bytes.
  const double gathered = t_kv * 2 * kv;  // K and V elements after the all-gather
  const double chunk_share = (2.0 * p.cp + 1) / (2.0 * p.cp);
  const double cp_fwd_helpers = cp ? e * (2 * gathered + 2 * t * q) : 0;
  const double cp_bwd_helpers = cp ? e * (2 * gathered + gathered + 2 * t * q + 3 * chunk_share * gathered + 2 * gathered) : 0;
  fwd.push_back(ComputeOp{"flash_attention", OpKind::kAttention, fw, attention_flops,
                          e * (2 * t * q + 2 * t_kv * kv), 0, q_per_sequence, sequences * heads,
                          static_cast<double>(model.head_dim), cp_fwd_helpers});
  fwd.push_back(gemm("out_proj", fw, t, q, h));
  if (tp) fwd.push_back(tp_all_reduce("attn_all_reduce"));
  fwd.push_back(memory_op("residual_add", OpKind::kNorm, fw, t * h, 3 * t * h + mask));
  fwd.push_back(memory_op("post_attn_norm", OpKind::kNorm, fw, 4 * t * h, 2 * t * h + h, h));
  fwd.push_back(gemm("fc1", fw, t, h, 2 * f));
  fwd.push_back(memory_op("swiglu", OpKind::kActivation, fw, 5 * t * f, 3 * t * f));
  fwd.push_back(gemm("fc2", fw, t, f, h));
  if (tp) fwd.push_back(tp_all_reduce("mlp_all_reduce"));

  auto& bwd = ops.backward;
  bwd.push_back(memory_op("input_norm_bwd", OpKind::kNorm, bw, 8 * t * h, 3 * t * h + h, h));
  bwd.push_back(memory_op("residual_grad_add", OpKind::kNorm, bw, t * h, 3 * t * h + mask));
  bwd.push_back(gemm("fc2_bwd", bw, t, f, h));
  bwd.push_back(memory_op("swiglu_bwd", OpKind::kActivation, bw, 8 * t * f, 5 * t * f));
  bwd.push_back(gemm("fc1_bwd", bw, t, h, 2 * f));
  if (tp) bwd.push_back(tp_all_reduce("fc1_grad_all_reduce"));
  bwd.push_back(memory_op("post_attn_norm_bwd", OpKind::kNorm, bw, 8 * t * h, 3 * t * h + h, h));
  bwd.push_back(memory_op("residual_grad_add", OpKind::kNorm, bw, t * h, 3 * t * h + mask));
  bwd.push_back(gemm("out_proj_bwd", bw, t, q, h));
  if (cp)
    bwd.push_back(Collective{"kv_all_gather_bwd", CollectiveKind::kAllGather,
                             ParallelGroup::kContext, p.cp, kv_bytes});
  // FlashAttention backward: five matmuls against the forward's two; reads Q, O, dO, K, V and
  // writes dQ and this rank's partial dK, dV for every gathered token.
  bwd.push_back(ComputeOp{"flash_attention_bwd", OpKind::kAttention, bw, 2.5 * attention_flops,
                          e * (4 * t * q + 4 * t_kv * kv), 0, q_per_sequence, sequences * heads,
                          static_cast<double>(model.head_dim), cp_bwd_helpers});
  if (cp)
    bwd.push_back(Collective{"dkv_reduce_scatter", CollectiveKind::kReduceScatter,
                             ParallelGroup::kContext, p.cp, kv_bytes});
  bwd.push_back(memory_op("rope_bwd", OpKind::kRope, bw, 3 * t * (q + kv), 2 * t * (q + kv)));
  if (model.qk_norm)
    bwd.push_back(memory_op("qk_norm_bwd", OpKind::kRope, bw, 8 * t * (q + kv), 3 * t * (q + kv)));
  bwd.push_back(gemm("qkv_bwd", bw, t, h, q + 2 * kv));
  if (tp) bwd.push_back(tp_all_reduce("qkv_grad_all_reduce"));

  ops.forward = rotate_after_last_collective(std::move(ops.forward));
  ops.backward = rotate_after_last_collective(std::move(ops.backward));
  return ops;
}

}  // namespace kareus::workload
