// A layer's backward as a zero-bubble schedule (ZB-H1) runs it: B, the input gradient the
// previous stage waits for, and W, the weight gradient nothing waits for and that fills bubbles.
// Each backward GEMM dY → (dX, dW) splits into its input-gradient GEMM dX = dY·Wᵀ, which stays in
// B with every other op and collective, and its weight-gradient GEMM dW = Xᵀ·dY, which goes to W.
// The input-gradient GEMM has the forward GEMM's shape, so it takes that GEMM's FLOPs and bytes;
// the weight-gradient GEMM the rest (so B + W is the backward exactly).
//
// W is planned as its own partition (`bwd_wgrad`): one nanobatch's weight-gradient GEMMs of a layer,
// run by both nanobatches, with no collective (so only a clock to choose). With full activation
// checkpointing the recomputed forward precedes B, which needs its activations; W reuses them.
//
// Thread-safety: pure functions on values.
// Example:
//   SplitBackward s = split_backward(layer_ops(model, parallel));
//   for (const ComputeOp& w : s.weight_gradient) ...   // GEMMs only, no collective
#pragma once

#include <string_view>
#include <vector>

#include "kareus/workload/ops.hpp"
#include "kareus/workload/partition.hpp"

namespace kareus::workload {

struct SplitBackward {
  std::vector<Step> input_gradient;        // B, in the backward's order; GEMMs renamed <name>_dgrad
  std::vector<ComputeOp> weight_gradient;  // W, in the backward's order; GEMMs named <name>_wgrad
};

// Pairs each backward GEMM `<stem>_bwd` with the forward GEMM named `<stem>` or `<stem>_...`;
// a backward GEMM without exactly one such partner is an internal error.
SplitBackward split_backward(const LayerOps& layer);

// The key of the weight-gradient partition.
inline constexpr std::string_view kWeightGradientKey = "bwd_wgrad";

// A layer's W as a partition: split_backward's weight-gradient GEMMs, count 2 (both nanobatches),
// per layer, no collective.
Partition weight_gradient_partition(const ModelSpec& model, const ParallelConfig& parallel);

}  // namespace kareus::workload
