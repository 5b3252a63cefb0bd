// cuDNN's fused attention graph, built without a device: every tensor and operation of the
// forward and backward SDPA graph is finalized by cuDNN itself (a wrong attribute, type or shape
// is its BAD_PARAM), for the attention shapes the job's partitions really have. The graph and its
// engine need a GPU and are checked by scripts/gpu-profile-check.sh where one is at hand.
#include <gtest/gtest.h>

#include <string>

#include "kareus/evaluate/gpu/cuda/fused_attention.hpp"
#include "kareus/evaluate/gpu/op_shapes.hpp"
#include "kareus/workload/model.hpp"

namespace kareus::evaluate::cuda {
namespace {

constexpr const char* kBuilt = "no cuDNN handle";

std::vector<AttentionShape> attention_shapes(int tp, int cp) {
  const workload::ModelSpec model = workload::load_model("llama-3.2-3b");
  workload::ParallelConfig parallel;
  parallel.tp = tp;
  parallel.cp = cp;
  parallel.seq_len = 8192;
  parallel = workload::validated(model, parallel);
  std::vector<AttentionShape> out;
  for (const auto& p : workload::build_partitions(model, parallel)) {
    for (const OpShape& s : op_shapes(model, parallel, p)) {
      if (const auto* a = std::get_if<AttentionShape>(&s)) out.push_back(*a);
    }
  }
  return out;
}

TEST(FusedAttentionGraph, CudnnTakesEveryOperationWithKvPerQueryHead) {
  for (const auto& [tp, cp] : {std::pair{8, 1}, std::pair{4, 2}, std::pair{2, 1}}) {
    const auto shapes = attention_shapes(tp, cp);
    int backward = 0;
    for (const AttentionShape& a : shapes) backward += a.backward;
    ASSERT_GT(backward, 0);
    ASSERT_LT(backward, static_cast<int>(shapes.size())) << "forward and backward attention";
    for (const AttentionShape& a : shapes) {
      std::string why;
      const FusedAttentionShape shape{a.batch, a.q_heads, a.q_heads, a.q_len, a.head_dim, a.backward};
      EXPECT_EQ(FusedAttention::make(nullptr, shape, why), nullptr);
      EXPECT_EQ(why.rfind(kBuilt, 0), 0u) << "TP " << tp << " CP " << cp << (a.backward ? " backward: " : " forward: ")
                                          << why;
    }
  }
}

TEST(FusedAttentionGraph, GqaIsBuiltOrRefusedWithAReasonNeverThrown) {
  for (const AttentionShape& a : attention_shapes(8, 1)) {
    ASSERT_LT(a.kv_heads, a.q_heads);
    std::string why;
    const FusedAttentionShape shape{a.batch, a.q_heads, a.kv_heads, a.q_len, a.head_dim, a.backward};
    EXPECT_NO_THROW(EXPECT_EQ(FusedAttention::make(nullptr, shape, why), nullptr));
    EXPECT_FALSE(why.empty());
    // The forward's GQA matmuls broadcast no batch dimension cuDNN rejects outright.
    if (!a.backward) {
      EXPECT_EQ(why.rfind(kBuilt, 0), 0u) << why;
    }
  }
}

}  // namespace
}  // namespace kareus::evaluate::cuda
