// The shapes a partition's compute ops have on one rank, for the GPU executor to allocate and
// launch: GEMMs as (m, k, n), attention as (batch, query heads, KV heads, query and key lengths,
// head dim), memory-bound ops as (rows, width) and the kernel that runs them. The workload's op
// list carries only FLOPs and bytes; the shapes are derived here from the model and parallel
// config by op name, and checked against those counts (a GEMM's or attention's FLOPs, a
// memory-bound op's bytes), so that a change to the op list that the executor does not follow is
// an InternalError rather than a silently different kernel.
//
// Thread-safety: pure functions.
// Example:
//   std::vector<OpShape> shapes = op_shapes(model, parallel, find_partition(parts, "fwd_mlp"));
//   if (auto* g = std::get_if<GemmShape>(&shapes[2])) launch(g->m, g->k, g->n);
#pragma once

#include <cstdint>
#include <variant>
#include <vector>

#include "kareus/workload/model.hpp"
#include "kareus/workload/parallel.hpp"
#include "kareus/workload/partition.hpp"

namespace kareus::executor {

// Y[m, n] = X[m, k] · W[k, n]; backward runs dX = dY · Wᵀ and dW = Xᵀ · dY.
struct GemmShape {
  long m = 0, k = 0, n = 0;
  bool backward = false;
  bool operator==(const GemmShape&) const = default;
};

// Causal attention of `batch` sequences; GQA when kv_heads < q_heads.
struct AttentionShape {
  long batch = 0, q_heads = 0, kv_heads = 0, q_len = 0, kv_len = 0, head_dim = 0;
  bool backward = false;
  bool operator==(const AttentionShape&) const = default;
};

enum class MemoryKernel : std::uint8_t {
  kRmsNorm,  // y = x / rms(x) · w per row (backward: dx from x, dy, w)
  kRope,     // rotate pairs of each row in place
  kSwiglu,   // y = silu(gate) · up from a [rows, 2·width] input (backward: d[gate, up] from dy)
  kAdd,      // c = a + b
  kDropoutAdd,  // c = a + mask · b / keep, writing (forward) or reading (backward) a one-byte mask
  kStream,   // read `width` elements of each row, write them back (embedding, cross-entropy)
};

struct MemoryShape {
  MemoryKernel kernel = MemoryKernel::kAdd;
  long rows = 0, width = 0;
  bool backward = false;
  bool operator==(const MemoryShape&) const = default;
};

using OpShape = std::variant<GemmShape, AttentionShape, MemoryShape>;

// The shape of each of `partition.ops`, in order. Throws InputError for an op name it does not
// know, InternalError when a derived shape disagrees with the op's FLOPs or bytes.
std::vector<OpShape> op_shapes(const workload::ModelSpec& model, const workload::ParallelConfig& parallel,
                               const workload::Partition& partition);

// FLOPs of a GEMM or attention shape as the workload counts them (causal attention: half the
// scores), and the bf16 HBM bytes a memory-bound kernel moves.
double shape_flops(const OpShape& shape);
double memory_kernel_bytes(const MemoryShape& shape);

}  // namespace kareus::executor
