#include "kareus/executor/op_shapes.hpp"

#include <fmt/format.h>

#include <cmath>

#include "kareus/core/error.hpp"

namespace kareus::executor {
namespace {

constexpr double e = workload::kBytesPerElement;

bool ends_with_bwd(const std::string& name) { return name.ends_with("_bwd"); }

}  // namespace

double shape_flops(const OpShape& shape) {
  if (const auto* g = std::get_if<GemmShape>(&shape)) {
    return (g->backward ? 4.0 : 2.0) * static_cast<double>(g->m) * static_cast<double>(g->k) * static_cast<double>(g->n);
  }
  if (const auto* a = std::get_if<AttentionShape>(&shape)) {
    const double fwd = 4.0 * static_cast<double>(a->batch * a->q_heads * a->q_len) *
                       (static_cast<double>(a->kv_len) / 2.0) * static_cast<double>(a->head_dim);
    return a->backward ? 2.5 * fwd : fwd;
  }
  return 0;
}

double memory_kernel_bytes(const MemoryShape& s) {
  const double rw = static_cast<double>(s.rows) * static_cast<double>(s.width);
  switch (s.kernel) {
    case MemoryKernel::kRmsNorm:
      return e * ((s.backward ? 3 : 2) * rw + static_cast<double>(s.width));
    case MemoryKernel::kRope:
      return e * 2 * rw;
    case MemoryKernel::kSwiglu:
      return e * (s.backward ? 5 : 3) * rw;
    case MemoryKernel::kAdd:
      return e * 3 * rw;
    case MemoryKernel::kDropoutAdd:
      return e * 3 * rw + rw;
    case MemoryKernel::kStream:
      return e * 2 * rw;
  }
  return 0;
}

std::vector<OpShape> op_shapes(const workload::ModelSpec& model, const workload::ParallelConfig& p,
                               const workload::Partition& partition) {
  // Tokens of the rank: a nanobatch for layer partitions, the whole microbatch for the rest.
  const long batch = partition.per_layer ? p.nanobatch_size() : p.microbatch_size;
  const long q_len = p.seq_len / p.cp;
  const long t = batch * q_len;
  const long h = model.hidden_size, d = model.head_dim;
  const long hq = model.num_attention_heads / p.tp, hk = model.num_query_groups / p.tp;
  const long q = hq * d, kv = hk * d, f = model.ffn_hidden_size / p.tp, v = model.vocab_size / p.tp;

  std::vector<OpShape> shapes;
  for (const workload::ComputeOp& op : partition.ops) {
    const bool bwd = op.pass == workload::Pass::kBackward;
    const std::string base = ends_with_bwd(op.name) ? op.name.substr(0, op.name.size() - 4) : op.name;
    OpShape shape;
    if (base == "qkv_proj" || base == "qkv") {
      shape = GemmShape{t, h, q + 2 * kv, bwd};
    } else if (base == "out_proj") {
      shape = GemmShape{t, q, h, bwd};
    } else if (base == "fc1") {
      shape = GemmShape{t, h, 2 * f, bwd};
    } else if (base == "fc2") {
      shape = GemmShape{t, f, h, bwd};
    } else if (base == "lm_head") {
      shape = GemmShape{t, h, v, bwd};
    } else if (base == "flash_attention") {
      shape = AttentionShape{batch, hq, hk, q_len, static_cast<long>(p.seq_len), d, bwd};
    } else if (base == "residual_add" || base == "residual_grad_add") {
      shape = MemoryShape{p.hidden_dropout > 0 ? MemoryKernel::kDropoutAdd : MemoryKernel::kAdd, t, h, bwd};
    } else if (base == "input_norm" || base == "post_attn_norm" || base == "final_norm") {
      shape = MemoryShape{MemoryKernel::kRmsNorm, t, h, bwd};
    } else if (base == "qk_norm") {
      shape = MemoryShape{MemoryKernel::kRmsNorm, t * (hq + hk), d, bwd};
    } else if (base == "rope") {
      shape = MemoryShape{MemoryKernel::kRope, t, q + kv, bwd};
    } else if (base == "swiglu") {
      shape = MemoryShape{MemoryKernel::kSwiglu, t, f, bwd};
    } else if (base == "embedding_lookup") {
      shape = MemoryShape{MemoryKernel::kStream, t, h, bwd};
    } else if (base == "embedding_grad") {
      // Read-modify-write of fp32 main-grad rows (4 + 4 bytes) after reading the bf16 gradient.
      shape = MemoryShape{MemoryKernel::kStream, t, h * 5 / 2, bwd};
    } else if (base == "cross_entropy") {
      shape = MemoryShape{MemoryKernel::kStream, t, v, bwd};
    } else {
      throw InputError({"", 0, 0, "op"}, fmt::format("the GPU executor does not know op '{}' of partition {}",
                                                     op.name, partition.key));
    }
    if (std::holds_alternative<MemoryShape>(shape)) {
      const double bytes = memory_kernel_bytes(std::get<MemoryShape>(shape));
      KAREUS_CHECK(std::abs(bytes - op.hbm_bytes) <= 1e-9 * op.hbm_bytes + e * static_cast<double>(h),
                   fmt::format("op {}: the kernel moves {} bytes, the op list says {}", op.name, bytes, op.hbm_bytes));
    } else {
      const double flops = shape_flops(shape);
      KAREUS_CHECK(std::abs(flops - op.flops) <= 1e-9 * op.flops,
                   fmt::format("op {}: the shape has {} FLOPs, the op list says {}", op.name, flops, op.flops));
    }
    shapes.push_back(shape);
  }
  return shapes;
}

}  // namespace kareus::executor
