// The backward split into B and W for zero-bubble schedules: W is the weight-gradient GEMMs and
// nothing else, B the rest, and together they are the backward, on every model and parallelism.
#include "kareus/workload/zero_bubble.hpp"

#include <gtest/gtest.h>

#include "kareus/workload/model.hpp"
#include "kareus/workload/parallel.hpp"

namespace kareus::workload {
namespace {

struct Totals {
  double flops = 0, bytes = 0;
  int collectives = 0;
};

Totals totals(const std::vector<Step>& steps) {
  Totals t;
  for (const Step& s : steps) {
    if (const auto* op = std::get_if<ComputeOp>(&s)) {
      t.flops += op->flops;
      t.bytes += op->hbm_bytes;
    } else {
      ++t.collectives;
    }
  }
  return t;
}

TEST(ZeroBubbleSplit, BAndWAreTheBackwardAndWHoldsOnlyWeightGradientGemms) {
  for (const std::string& name : model_names()) {
    const ModelSpec model = load_model(name);
    for (auto [tp, cp] : {std::pair{1, 1}, std::pair{8, 1}, std::pair{4, 2}, std::pair{2, 2}}) {
      if (model.num_query_groups % tp != 0) continue;
      ParallelConfig p;
      p.tp = tp;
      p.cp = cp;
      p.pp = 1;
      const LayerOps layer = layer_ops(model, validated(model, p));
      const SplitBackward split = split_backward(layer);
      const Totals backward = totals(layer.backward), b = totals(split.input_gradient);
      Totals w;
      for (const ComputeOp& op : split.weight_gradient) {
        EXPECT_EQ(op.kind, OpKind::kGemm) << op.name;
        EXPECT_TRUE(op.name.ends_with("_wgrad")) << op.name;
        w.flops += op.flops;
        w.bytes += op.hbm_bytes;
      }
      EXPECT_NEAR(b.flops + w.flops, backward.flops, 1e-9 * backward.flops) << name;
      EXPECT_NEAR(b.bytes + w.bytes, backward.bytes, 1e-9 * backward.bytes) << name;
      EXPECT_EQ(b.collectives, backward.collectives);  // every collective stays in B
      EXPECT_EQ(split.weight_gradient.size(), 4u);     // QKV, attention output, FC1, FC2
    }
  }
}

TEST(ZeroBubbleSplit, AWeightGradientIsXTransposedTimesDY) {
  // Llama 3.2 3B, TP 8: FC2 maps f = 8192/8 to h = 3072 over t tokens. dW = Xᵀ·dY is 2·t·f·h
  // FLOPs; it reads X (t×f) and dY (t×h) in bf16 and accumulates dW (f×h) in fp32.
  const ModelSpec model = load_model("llama-3.2-3b");
  ParallelConfig p;
  p = validated(model, p);
  const double t = nanobatch_tokens(p), f = static_cast<double>(model.ffn_hidden_size) / 8, h = 3072;
  const SplitBackward split = split_backward(layer_ops(model, p));
  const ComputeOp* fc2 = nullptr;
  for (const ComputeOp& op : split.weight_gradient) {
    if (op.name == "fc2_wgrad") fc2 = &op;
  }
  ASSERT_NE(fc2, nullptr);
  EXPECT_DOUBLE_EQ(fc2->flops, 2 * t * f * h);
  EXPECT_DOUBLE_EQ(fc2->hbm_bytes, 2 * (t * f + t * h) + 8 * f * h);
}

}  // namespace
}  // namespace kareus::workload
