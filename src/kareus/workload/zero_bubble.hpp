// A layer's backward as a zero-bubble schedule (ZB-H1) runs it: B, the input gradient the
// previous stage waits for, and W, the weight gradient nothing waits for and that fills bubbles.
// Each backward GEMM dY → (dX, dW) splits into its input-gradient GEMM dX = dY·Wᵀ, which stays in
// B with every other op and collective, and its weight-gradient GEMM dW = Xᵀ·dY, which goes to W.
// The input-gradient GEMM has the forward GEMM's shape, so it takes that GEMM's FLOPs and bytes;
// the weight-gradient GEMM the rest (so B + W is the backward exactly).
//
// Thread-safety: pure functions on values.
// Example:
//   SplitBackward s = split_backward(layer_ops(model, parallel));
//   for (const ComputeOp& w : s.weight_gradient) ...   // GEMMs only, no collective
#pragma once

#include <vector>

#include "kareus/workload/ops.hpp"

namespace kareus::workload {

struct SplitBackward {
  std::vector<Step> input_gradient;        // B, in the backward's order; GEMMs renamed <name>_dgrad
  std::vector<ComputeOp> weight_gradient;  // W, in the backward's order; GEMMs named <name>_wgrad
};

// Pairs each backward GEMM `<stem>_bwd` with the forward GEMM named `<stem>` or `<stem>_...`;
// a backward GEMM without exactly one such partner is an internal error.
SplitBackward split_backward(const LayerOps& layer);

}  // namespace kareus::workload
