// The layer's op list: FLOPs and bytes against hand formulas, collectives where Megatron puts them,
// and ring byte counts as NCCL moves them.
#include "kareus/workload/ops.hpp"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <map>

namespace kareus::workload {
namespace {

std::map<std::string, ComputeOp> ops_by_name(const std::vector<Step>& steps) {
  std::map<std::string, ComputeOp> out;
  for (const auto& s : steps) {
    if (const auto* op = std::get_if<ComputeOp>(&s)) out.emplace(op->name, *op);
  }
  return out;
}

std::vector<std::string> names(const std::vector<Step>& steps) {
  std::vector<std::string> out;
  for (const auto& s : steps) {
    std::visit([&](const auto& x) { out.push_back(x.name); }, s);
  }
  return out;
}

ParallelConfig config(int tp, int cp, int mbs = 8, int seq = 4096) {
  ParallelConfig p;
  p.tp = tp;
  p.cp = cp;
  p.microbatch_size = mbs;
  p.seq_len = seq;
  return p;
}

TEST(LayerOps, Llama3bTp8FlopsMatchHandFormulas) {
  ModelSpec m = load_model("llama-3.2-3b");
  ParallelConfig p = validated(m, config(8, 1));
  auto ops = ops_by_name(layer_ops(m, p).forward);
  // One nanobatch (4 sequences of 4096 tokens) on one of 8 TP ranks: 3 query heads, 1 KV head,
  // FFN shard 1024.
  const double tokens = 4.0 * 4096;
  EXPECT_EQ(nanobatch_tokens(p), tokens);
  EXPECT_DOUBLE_EQ(ops.at("qkv_proj").flops, 2 * tokens * 3072 * (3 + 2 * 1) * 128);
  EXPECT_DOUBLE_EQ(ops.at("qkv_proj").flops, 64424509440.0);
  EXPECT_DOUBLE_EQ(ops.at("out_proj").flops, 2 * tokens * 384 * 3072);
  EXPECT_DOUBLE_EQ(ops.at("fc1").flops, 2 * tokens * 3072 * 2 * 1024);
  EXPECT_DOUBLE_EQ(ops.at("fc2").flops, 2 * tokens * 1024 * 3072);
  // Causal attention: 4 b s^2 h_local / 2 for QK^T and PV.
  EXPECT_DOUBLE_EQ(ops.at("flash_attention").flops, 4.0 * 4 * 4096.0 * 4096 * 384 / 2);
  EXPECT_DOUBLE_EQ(ops.at("flash_attention").flops, 51539607552.0);
  EXPECT_EQ(ops.count("qk_norm"), 0u);

  // Across the 8 ranks, the GEMMs do 2 FLOPs per parameter per token of the layer.
  const double layer_params = 3072.0 * (24 + 2 * 8) * 128 + 3072.0 * 3072 + 3 * 3072.0 * 8192;
  double gemm_flops = 0;
  for (const auto& [name, op] : ops) {
    if (op.kind == OpKind::kGemm) gemm_flops += op.flops;
  }
  EXPECT_DOUBLE_EQ(8 * gemm_flops, 2 * layer_params * tokens);

  // Backward: twice the GEMMs (input and weight gradients), 2.5 times attention.
  auto bwd = ops_by_name(layer_ops(m, p).backward);
  EXPECT_DOUBLE_EQ(bwd.at("qkv_bwd").flops, 2 * ops.at("qkv_proj").flops);
  EXPECT_DOUBLE_EQ(bwd.at("out_proj_bwd").flops, 2 * ops.at("out_proj").flops);
  EXPECT_DOUBLE_EQ(bwd.at("fc1_bwd").flops, 2 * ops.at("fc1").flops);
  EXPECT_DOUBLE_EQ(bwd.at("fc2_bwd").flops, 2 * ops.at("fc2").flops);
  EXPECT_DOUBLE_EQ(bwd.at("flash_attention_bwd").flops, 2.5 * ops.at("flash_attention").flops);
}

TEST(LayerOps, BytesOfGemmsAndMemoryOps) {
  ModelSpec m = load_model("llama-3.2-3b");
  ParallelConfig p = validated(m, config(8, 1));
  auto ops = ops_by_name(layer_ops(m, p).forward);
  const double t = 16384;
  // bf16: read the activation and the weight shard, write the output.
  EXPECT_DOUBLE_EQ(ops.at("fc2").hbm_bytes, 2 * (t * 1024 + 1024 * 3072 + t * 3072));
  EXPECT_DOUBLE_EQ(ops.at("residual_add").hbm_bytes, 2 * 3 * t * 3072);
  EXPECT_DOUBLE_EQ(ops.at("swiglu").hbm_bytes, 2 * 3 * t * 1024);
  EXPECT_TRUE(is_memory_bound(ops.at("rope").kind));
  EXPECT_FALSE(is_memory_bound(ops.at("flash_attention").kind));
}

// Megatron's hidden dropout: each bias-dropout-add writes a one-byte mask in the forward and its
// gradient reads it back; nothing else changes.
TEST(LayerOps, HiddenDropoutAddsAMaskByteToEveryBiasDropoutAdd) {
  ModelSpec m = load_model("llama-3.2-3b");
  ParallelConfig plain = validated(m, config(8, 1));
  ParallelConfig dropout = plain;
  dropout.hidden_dropout = 0.1;
  const LayerOps a = layer_ops(m, plain), b = layer_ops(m, validated(m, dropout));
  const double t = 16384, h = 3072;
  ASSERT_EQ(names(a.forward), names(b.forward));
  ASSERT_EQ(names(a.backward), names(b.backward));
  for (std::vector<Step> LayerOps::*pass : {&LayerOps::forward, &LayerOps::backward}) {
    for (std::size_t i = 0; i < (a.*pass).size(); ++i) {
      const auto* x = std::get_if<ComputeOp>(&(a.*pass)[i]);
      const auto* y = std::get_if<ComputeOp>(&(b.*pass)[i]);
      if (!x) continue;
      const bool bda = x->name == "residual_add" || x->name == "residual_grad_add";
      EXPECT_DOUBLE_EQ(y->hbm_bytes - x->hbm_bytes, bda ? t * h : 0.0) << x->name;
      EXPECT_EQ(y->flops, x->flops) << x->name;
    }
  }
}

// TransformerEngine's all-gather CP moves the gathered K/V and the chunks' outputs and gradients in
// helper kernels around attention; without CP there are none.
TEST(LayerOps, CpAttentionCarriesTransformerEnginesReordersAndCopies) {
  ModelSpec m = load_model("llama-3.2-3b");
  const ParallelConfig cp2 = validated(m, config(4, 2));
  auto fwd = ops_by_name(layer_ops(m, cp2).forward), bwd = ops_by_name(layer_ops(m, cp2).backward);
  const double t = 4 * 2048, t_kv = 4 * 4096, q = 6 * 128, kv = 2 * 128, gathered = t_kv * 2 * kv;
  EXPECT_DOUBLE_EQ(fwd.at("flash_attention").helper_bytes, 2 * (2 * gathered + 2 * t * q));
  // Reorder, zeroed dK/dV, dQ copies, per-chunk adds over 5/4 of the gathered length, reorder back.
  EXPECT_DOUBLE_EQ(bwd.at("flash_attention_bwd").helper_bytes,
                   2 * (2 * gathered + gathered + 2 * t * q + 3 * 1.25 * gathered + 2 * gathered));
  for (const auto& [name, op] : ops_by_name(layer_ops(m, validated(m, config(8, 1))).forward))
    EXPECT_EQ(op.helper_bytes, 0) << name;
  // A microbatch's un-split op moves twice a nanobatch's.
  EXPECT_DOUBLE_EQ(scaled_tokens(fwd.at("flash_attention"), 2).helper_bytes, 2 * fwd.at("flash_attention").helper_bytes);
}

TEST(LayerOps, TpCollectivesFollowTheRowAndColumnParallelGemms) {
  ModelSpec m = load_model("llama-3.2-3b");
  LayerOps layer = layer_ops(m, validated(m, config(8, 1)));
  EXPECT_EQ(
      names(layer.forward),
      (std::vector<std::string>{"residual_add", "input_norm", "qkv_proj", "rope", "flash_attention",
                                "out_proj", "attn_all_reduce", "residual_add", "post_attn_norm",
                                "fc1", "swiglu", "fc2", "mlp_all_reduce"}));
  EXPECT_EQ(names(layer.backward),
            (std::vector<std::string>{
                "input_norm_bwd", "residual_grad_add", "fc2_bwd", "swiglu_bwd", "fc1_bwd",
                "fc1_grad_all_reduce", "post_attn_norm_bwd", "residual_grad_add", "out_proj_bwd",
                "flash_attention_bwd", "rope_bwd", "qkv_bwd", "qkv_grad_all_reduce"}));
  const auto& ar = std::get<Collective>(layer.forward[6]);
  EXPECT_EQ(ar.kind, CollectiveKind::kAllReduce);
  EXPECT_EQ(ar.ranks, 8);
  EXPECT_DOUBLE_EQ(ar.bytes, 2.0 * 16384 * 3072);
  EXPECT_DOUBLE_EQ(ar.wire_bytes(), 2.0 * 7 / 8 * ar.bytes);
  EXPECT_EQ(ar.ring_steps(), 14);
}

TEST(LayerOps, CpGathersKvBeforeAttentionAndScattersGradientsAfter) {
  ModelSpec m = load_model("qwen3-1.7b");
  LayerOps layer = layer_ops(m, validated(m, config(4, 2)));
  EXPECT_EQ(names(layer.forward),
            (std::vector<std::string>{"residual_add", "input_norm", "qkv_proj", "qk_norm", "rope",
                                      "kv_all_gather", "flash_attention", "out_proj",
                                      "attn_all_reduce", "residual_add", "post_attn_norm", "fc1",
                                      "swiglu", "fc2", "mlp_all_reduce"}));
  EXPECT_EQ(names(layer.backward),
            (std::vector<std::string>{
                "input_norm_bwd", "residual_grad_add", "fc2_bwd", "swiglu_bwd", "fc1_bwd",
                "fc1_grad_all_reduce", "post_attn_norm_bwd", "residual_grad_add", "out_proj_bwd",
                "kv_all_gather_bwd", "flash_attention_bwd", "dkv_reduce_scatter", "rope_bwd",
                "qk_norm_bwd", "qkv_bwd", "qkv_grad_all_reduce"}));
  // Per CP rank: 4 sequences x 2048 tokens; 2 KV heads per TP rank; K and V of both CP ranks.
  const auto& ag = std::get<Collective>(layer.forward[5]);
  EXPECT_EQ(ag.kind, CollectiveKind::kAllGather);
  EXPECT_EQ(ag.group, ParallelGroup::kContext);
  EXPECT_DOUBLE_EQ(ag.bytes, 2.0 * (2 * 4 * 2048) * 2 * 256);
  EXPECT_DOUBLE_EQ(ag.wire_bytes(), ag.bytes / 2);
  // Each CP rank's queries see, on average, half of the whole sequence: causal FLOPs split evenly.
  auto fwd = ops_by_name(layer.forward);
  const double q_width = 4 * 128;
  EXPECT_DOUBLE_EQ(fwd.at("flash_attention").flops, 4.0 * (4 * 2048) * 2048 * q_width);
  LayerOps no_cp = layer_ops(m, validated(m, config(4, 1)));
  EXPECT_DOUBLE_EQ(2 * fwd.at("flash_attention").flops,
                   ops_by_name(no_cp.forward).at("flash_attention").flops);
}

TEST(LayerOps, WithoutTpOrCpThereAreNoCollectives) {
  ModelSpec m = load_model("llama-3.2-3b");
  LayerOps layer = layer_ops(m, validated(m, config(1, 1)));
  for (const auto& s : layer.forward) EXPECT_TRUE(std::holds_alternative<ComputeOp>(s));
  for (const auto& s : layer.backward) EXPECT_TRUE(std::holds_alternative<ComputeOp>(s));
}

// Total FLOPs over all shards do not depend on how the layer is split.
RC_GTEST_PROP(LayerOps, TotalFlopsAreIndependentOfTheSplit, ()) {
  ModelSpec m = load_model("llama-3.2-3b");
  const int tp = *rc::gen::element(1, 2, 4, 8);
  const int cp = *rc::gen::element(1, 2, 4);
  ParallelConfig p =
      validated(m, config(tp, cp, 2 * *rc::gen::inRange(1, 5), 1024 * *rc::gen::inRange(1, 5)));
  ParallelConfig base = validated(m, config(1, 1, p.microbatch_size, p.seq_len));
  auto total = [](const std::vector<Step>& steps) {
    double sum = 0;
    for (const auto& s : steps) {
      if (const auto* op = std::get_if<ComputeOp>(&s); op && !is_memory_bound(op->kind))
        sum += op->flops;
    }
    return sum;
  };
  const double split = total(layer_ops(m, p).forward) * tp * cp;
  const double whole = total(layer_ops(m, base).forward);
  RC_ASSERT(std::abs(split - whole) <= 1e-9 * whole);
}

}  // namespace
}  // namespace kareus::workload
