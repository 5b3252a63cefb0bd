#include "kareus/workload/zero_bubble.hpp"

#include <string>

#include "kareus/core/error.hpp"

namespace kareus::workload {
namespace {

const ComputeOp& forward_partner(const LayerOps& layer, const ComputeOp& backward) {
  const std::string suffix = "_bwd";
  KAREUS_CHECK(backward.name.ends_with(suffix), "a backward GEMM is not named <stem>_bwd: " + backward.name);
  const std::string stem = backward.name.substr(0, backward.name.size() - suffix.size());
  const ComputeOp* partner = nullptr;
  for (const Step& step : layer.forward) {
    const auto* op = std::get_if<ComputeOp>(&step);
    if (op == nullptr || op->kind != OpKind::kGemm) continue;
    if (op->name == stem || op->name.starts_with(stem + "_")) {
      KAREUS_CHECK(partner == nullptr, "two forward GEMMs match " + backward.name);
      partner = op;
    }
  }
  KAREUS_CHECK(partner != nullptr, "no forward GEMM matches " + backward.name);
  return *partner;
}

}  // namespace

SplitBackward split_backward(const LayerOps& layer) {
  SplitBackward split;
  for (const Step& step : layer.backward) {
    const auto* op = std::get_if<ComputeOp>(&step);
    if (op == nullptr || op->kind != OpKind::kGemm) {
      split.input_gradient.push_back(step);
      continue;
    }
    const ComputeOp& forward = forward_partner(layer, *op);
    const std::string stem = op->name.substr(0, op->name.size() - 4);
    ComputeOp dgrad{stem + "_dgrad", OpKind::kGemm, Pass::kBackward, forward.flops, forward.hbm_bytes};
    ComputeOp wgrad{stem + "_wgrad", OpKind::kGemm, Pass::kBackward, op->flops - forward.flops,
                    op->hbm_bytes - forward.hbm_bytes};
    KAREUS_CHECK(wgrad.flops > 0 && wgrad.hbm_bytes > 0, "a weight-gradient GEMM without work: " + op->name);
    split.input_gradient.emplace_back(std::move(dgrad));
    split.weight_gradient.push_back(std::move(wgrad));
  }
  return split;
}

Partition weight_gradient_partition(const ModelSpec& model, const ParallelConfig& parallel) {
  Partition weights;
  weights.key = std::string(kWeightGradientKey);
  weights.pass = Pass::kBackward;
  weights.ops = split_backward(layer_ops(model, parallel)).weight_gradient;
  weights.count = 2;
  weights.per_layer = true;
  return weights;
}

}  // namespace kareus::workload
