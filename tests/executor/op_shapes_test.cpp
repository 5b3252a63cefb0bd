// The GPU executor's op shapes agree with the workload's op counts for every partition of every
// bundled model under several parallel configs (op_shapes checks each op and throws otherwise),
// and the shapes are what a rank holds.
#include <gtest/gtest.h>

#include "kareus/core/error.hpp"
#include "kareus/executor/op_shapes.hpp"
#include "kareus/workload/model.hpp"

namespace kareus::executor {
namespace {

TEST(OpShapes, EveryOpOfEveryPartitionHasAShapeMatchingItsCounts) {
  int checked = 0;
  for (const std::string& name : workload::model_names()) {
    const workload::ModelSpec model = workload::load_model(name);
    for (auto [tp, cp] :
         {std::pair{1, 1}, std::pair{2, 1}, std::pair{8, 1}, std::pair{4, 2}, std::pair{2, 4}}) {
      for (double dropout : {0.0, 0.1}) {  // with hidden dropout the residual adds are dropout-adds
        workload::ParallelConfig parallel;
        parallel.tp = tp;
        parallel.cp = cp;
        parallel.seq_len = 8192;
        parallel.hidden_dropout = dropout;
        try {
          parallel = workload::validated(model, parallel);
        } catch (const InputError&) {
          continue;  // e.g. heads not divisible by this TP
        }
        std::vector<workload::Partition> parts = workload::build_partitions(model, parallel);
        for (int s = 0; s < parallel.pp; ++s) {
          for (auto& w : workload::non_partition_work(model, parallel, s)) parts.push_back(w);
        }
        for (const auto& p : parts) {
          const std::vector<OpShape> shapes = op_shapes(model, parallel, p);
          ASSERT_EQ(shapes.size(), p.ops.size()) << name << " " << p.key;
          checked += static_cast<int>(shapes.size());
          for (std::size_t k = 0; k < shapes.size(); ++k) {
            if (p.ops[k].name != "residual_add" && p.ops[k].name != "residual_grad_add") continue;
            EXPECT_EQ(std::get<MemoryShape>(shapes[k]).kernel,
                      dropout > 0 ? MemoryKernel::kDropoutAdd : MemoryKernel::kAdd)
                << p.key;
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 100);
}

TEST(OpShapes, Llama3BOnTp8HasTheShardsOfOneRank) {
  const workload::ModelSpec model = workload::load_model("llama-3.2-3b");
  const workload::ParallelConfig parallel = workload::validated(model, {});
  const auto parts = workload::build_partitions(model, parallel);
  const auto& fwd_attn = workload::find_partition(parts, "fwd_attn");
  const auto shapes = op_shapes(model, parallel, fwd_attn);
  const long t = 4 * 4096;  // a nanobatch of 4 sequences
  bool saw_attention = false, saw_qkv = false;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    if (fwd_attn.ops[i].name == "qkv_proj") {
      saw_qkv = true;
      EXPECT_EQ(
          std::get<GemmShape>(shapes[i]),
          (GemmShape{t, model.hidden_size,
                     (model.num_attention_heads + 2 * model.num_query_groups) / 8 * model.head_dim,
                     false}));
    }
    if (const auto* a = std::get_if<AttentionShape>(&shapes[i])) {
      saw_attention = true;
      EXPECT_EQ(*a, (AttentionShape{4, model.num_attention_heads / 8, model.num_query_groups / 8,
                                    4096, 4096, model.head_dim, false}));
    }
  }
  EXPECT_TRUE(saw_attention && saw_qkv);
}

TEST(OpShapes, AnUnknownOpIsAnInputError) {
  workload::Partition p;
  p.key = "odd";
  p.ops.push_back({"conv2d", workload::OpKind::kGemm, workload::Pass::kForward, 1, 1});
  const workload::ModelSpec model = workload::load_model("llama-3.2-3b");
  EXPECT_THROW(op_shapes(model, workload::validated(model, {}), p), InputError);
}

}  // namespace
}  // namespace kareus::executor
