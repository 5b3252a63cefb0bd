// Causal attention through cuDNN's fused flash attention (SDPA), built with the cuDNN graph
// backend API (cudnn_graph.h; the toolkit ships no cudnn-frontend header). The operation graph is
// the fused-attention pattern cuDNN documents for its runtime fusion engine:
//   forward:  S = Q·Kᵀ, S·scale, causal mask (row index >= column index, else the lowest float), softmax
//             (max, subtract, exp, sum, divide; stats = max + log sum kept for the backward),
//             O = P·V;
//   backward: softmax_sum = Σ_d dO⊙O, P = exp(scale·Q·Kᵀ masked − stats) recomputed,
//             dV = Pᵀ·dO, dS = P⊙(dO·Vᵀ − softmax_sum)·scale, dQ = dS·K, dK = dSᵀ·Q;
// all tensors bf16 but the fp32 stats and softmax_sum, the matmuls accumulating in fp32. GQA as
// the model has it: K and V carry `kv_heads` heads for `q_heads` query heads.
//
// The graph is finalized with the heuristics' (mode A) engine configs, the first that yields an
// execution plan. Where none does (a GPU, shape or cuDNN version the engine does not take),
// make() returns null with cuDNN's reason, and the caller runs its fallback: it must say so.
//
// Thread-safety: one thread; run() on the stream it is given.
// Example:
//   std::string why;
//   auto sdpa = FusedAttention::make(handle, {2, 8, 2, 4096, 128, false}, why);
//   if (!sdpa) spdlog::warn("no fused attention: {}", why);
//   int b = sdpa->bind({q, k, v, o, stats}, workspace);   // workspace: sdpa->workspace_bytes()
//   sdpa->run(b, stream);
#pragma once

#include <cudnn.h>

#include <cstddef>
#include <limits>
#include <memory>
#include <string>
#include <vector>

namespace kareus::executor::cuda {

struct FusedAttentionShape {
  long batch = 0, q_heads = 0, kv_heads = 0, len = 0, head_dim = 0;  // queries and keys both `len` long
  bool backward = false;
};

// Device pointers: Q, O, dO, dQ [batch, q_heads, len, head_dim]; K, V, dK, dV [batch, kv_heads,
// len, head_dim] (row-major, contiguous); stats and softmax_sum fp32 [batch, q_heads, len].
// The forward uses q, k, v, o, stats; the backward all of them.
struct FusedAttentionBuffers {
  void *q = nullptr, *k = nullptr, *v = nullptr, *o = nullptr, *stats = nullptr;
  void *d_o = nullptr, *dq = nullptr, *dk = nullptr, *dv = nullptr, *softmax_sum = nullptr;
};

class FusedAttention {
 public:
  // Null, with the reason in `why`, when cuDNN does not take the graph: an operation it rejects,
  // or no execution plan. A null `handle` builds and finalizes the tensors and operations only
  // (no device needed) and returns null with why "no cuDNN handle ...".
  static std::unique_ptr<FusedAttention> make(cudnnHandle_t handle, const FusedAttentionShape& shape,
                                              std::string& why);
  ~FusedAttention();
  FusedAttention(const FusedAttention&) = delete;
  FusedAttention& operator=(const FusedAttention&) = delete;

  std::size_t workspace_bytes() const { return workspace_bytes_; }
  // Makes the variant pack for `buffers` once; returns its index for run().
  int bind(const FusedAttentionBuffers& buffers, void* workspace);
  void run(int binding, cudaStream_t stream) const;

 private:
  FusedAttention(cudnnHandle_t handle, FusedAttentionShape shape) : handle_(handle), shape_(shape) {}
  static std::unique_ptr<FusedAttention> build(cudnnHandle_t handle, const FusedAttentionShape& shape,
                                               std::string& why);

  cudnnHandle_t handle_;
  FusedAttentionShape shape_;
  std::vector<cudnnBackendDescriptor_t> owned_;  // every descriptor made, destroyed with this
  cudnnBackendDescriptor_t plan_ = nullptr;
  std::size_t workspace_bytes_ = 0;
  float scale_ = 1;                                             // 1/sqrt(head_dim)
  float mask_value_ = std::numeric_limits<float>::lowest();   // what a masked score becomes
  std::vector<cudnnBackendDescriptor_t> packs_;
  friend class GraphBuilder;
};

}  // namespace kareus::executor::cuda
