// The partition builder: keys and launch slots of the map for TP and CP configs, nothing lost or
// counted twice, and non-partition work on the first and last stages.
#include "kareus/workload/partition.hpp"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "test_util.hpp"

namespace kareus::workload {
namespace {

using kareus::testing::Contains;
using kareus::testing::input_error_of;

std::vector<std::string> keys(const std::vector<Partition>& parts) {
  std::vector<std::string> out;
  for (const auto& p : parts) out.push_back(p.key);
  return out;
}

std::vector<std::string> slot_names(const Partition& p) {
  std::vector<std::string> out;
  for (const auto& s : p.slots) out.push_back(s.name);
  return out;
}

std::vector<Partition> partitions(const std::string& model, int tp, int cp) {
  ModelSpec m = load_model(model);
  ParallelConfig p;
  p.tp = tp;
  p.cp = cp;
  return build_partitions(m, validated(m, p));
}

TEST(Partitions, TpOnlyKeysAndSlots) {
  auto parts = partitions("llama-3.2-3b", 8, 1);
  EXPECT_EQ(keys(parts), (std::vector<std::string>{"fwd_attn", "fwd_mlp", "bwd_mlp", "bwd_attn"}));
  const Partition& attn = find_partition(parts, "fwd_attn");
  EXPECT_EQ(slot_names(attn),
            (std::vector<std::string>{"norm_0", "linear_0", "rope_0", "attn_0", "linear_1"}));
  EXPECT_EQ(attn.slots[0].op_count, 2u);  // residual add and norm form one slot
  EXPECT_TRUE(attn.slots[0].memory_bound);
  EXPECT_FALSE(attn.slots[1].memory_bound);
  EXPECT_EQ(attn.count,
            2);  // both nanobatches' attention segments overlap an all-reduce of the same size
  ASSERT_TRUE(attn.collective);
  EXPECT_EQ(attn.collective->kind, CollectiveKind::kAllReduce);
  EXPECT_EQ(slot_names(find_partition(parts, "fwd_mlp")),
            (std::vector<std::string>{"norm_0", "linear_0", "act_0", "linear_1"}));
  EXPECT_EQ(slot_names(find_partition(parts, "bwd_mlp")),
            (std::vector<std::string>{"norm_0", "linear_0", "act_0", "linear_1"}));
  EXPECT_EQ(slot_names(find_partition(parts, "bwd_attn")),
            (std::vector<std::string>{"norm_0", "linear_0", "attn_0", "rope_0", "linear_1"}));
  EXPECT_EQ(attn.slot_names().back(), "none");
}

TEST(Partitions, QkNormJoinsTheRopeSlot) {
  auto parts = partitions("qwen3-1.7b", 8, 1);
  const Partition& attn = find_partition(parts, "fwd_attn");
  EXPECT_EQ(slot_names(attn),
            (std::vector<std::string>{"norm_0", "linear_0", "rope_0", "attn_0", "linear_1"}));
  EXPECT_EQ(attn.slots[2].op_count, 2u);
}

TEST(Partitions, CpKeysAreTheMapsTwelve) {
  auto parts = partitions("llama-3.2-3b", 4, 2);
  EXPECT_EQ(keys(parts),
            (std::vector<std::string>{"fwd_qkv_ar", "fwd_qkv_ag", "fwd_ao_ag", "fwd_ao_ar",
                                      "fwd_mlp", "bwd_mlp", "bwd_o_ar", "bwd_o_ag", "bwd_a_ag",
                                      "bwd_a_rs", "bwd_qkv_rs", "bwd_qkv_ar"}));
  auto kind = [&](const char* key) { return find_partition(parts, key).collective->kind; };
  EXPECT_EQ(kind("fwd_qkv_ar"), CollectiveKind::kAllReduce);
  EXPECT_EQ(kind("fwd_qkv_ag"), CollectiveKind::kAllGather);
  EXPECT_EQ(kind("bwd_a_rs"), CollectiveKind::kReduceScatter);
  EXPECT_EQ(find_partition(parts, "fwd_mlp").count, 2);
  EXPECT_EQ(find_partition(parts, "fwd_qkv_ag").count, 1);
  EXPECT_EQ(slot_names(find_partition(parts, "fwd_qkv_ag")),
            (std::vector<std::string>{"norm_0", "linear_0", "rope_0"}));
  EXPECT_EQ(slot_names(find_partition(parts, "fwd_ao_ar")),
            (std::vector<std::string>{"attn_0", "linear_0"}));
  EXPECT_EQ(slot_names(find_partition(parts, "bwd_a_ag")), (std::vector<std::string>{"attn_0"}));
  EXPECT_EQ(slot_names(find_partition(parts, "bwd_o_ag")),
            (std::vector<std::string>{"norm_0", "linear_0"}));
  EXPECT_EQ(slot_names(find_partition(parts, "bwd_qkv_ar")),
            (std::vector<std::string>{"rope_0", "linear_0"}));
}

TEST(Partitions, WithoutCollectivesTheLayerIsOnePartitionPerDirection) {
  auto parts = partitions("llama-3.2-3b", 1, 1);
  EXPECT_EQ(keys(parts), (std::vector<std::string>{"fwd_layer", "bwd_layer"}));
  EXPECT_FALSE(parts[0].collective);
  EXPECT_TRUE(parts[0].slots.empty());
  EXPECT_EQ(parts[0].slot_names(), (std::vector<std::string>{"none"}));
}

TEST(Partitions, UnknownKeyListsTheKnownOnes) {
  auto parts = partitions("llama-3.2-3b", 8, 1);
  std::string message = input_error_of([&] { find_partition(parts, "fwd_qkv_ag"); });
  EXPECT_TRUE(Contains(message, "unknown partition 'fwd_qkv_ag'"));
  EXPECT_TRUE(Contains(message, "fwd_attn, fwd_mlp, bwd_mlp, bwd_attn"));
}

// Weighted by their counts, the partitions hold each nanobatch's ops exactly once and each
// collective once per nanobatch.
RC_GTEST_PROP(Partitions, CoverTheLayerExactlyTwice, ()) {
  const std::string model =
      *rc::gen::element<std::string>("llama-3.2-3b", "qwen3-1.7b", "llama-3.1-8b");
  ModelSpec m = load_model(model);
  ParallelConfig p;
  p.tp = *rc::gen::element(1, 2, 4, 8);
  p.cp = *rc::gen::element(1, 2, 4);
  p.microbatch_size = 2 * *rc::gen::inRange(1, 9);
  p.seq_len = 2048 * *rc::gen::inRange(1, 5);
  p = validated(m, p);
  LayerOps layer = layer_ops(m, p);
  for (Pass pass : {Pass::kForward, Pass::kBackward}) {
    const auto& steps = pass == Pass::kForward ? layer.forward : layer.backward;
    double layer_flops = 0, layer_wire = 0, part_flops = 0, part_wire = 0;
    for (const auto& s : steps) {
      if (const auto* op = std::get_if<ComputeOp>(&s))
        layer_flops += op->flops;
      else
        layer_wire += std::get<Collective>(s).wire_bytes();
    }
    for (const auto& part : build_partitions(m, p)) {
      if (part.pass != pass) continue;
      part_flops += part.count * part.flops();
      if (part.collective) part_wire += part.count * part.collective->wire_bytes();
      RC_ASSERT(!part.ops.empty());
      RC_ASSERT(part.collective.has_value() == !part.slots.empty());
    }
    RC_ASSERT(std::abs(part_flops - 2 * layer_flops) <= 1e-9 * layer_flops);
    RC_ASSERT(std::abs(part_wire - 2 * layer_wire) <= 1e-9 * (1 + layer_wire));
  }
}

TEST(NonPartitionWork, EmbeddingFirstHeadLast) {
  ModelSpec m = load_model("llama-3.2-3b");
  ParallelConfig p = validated(m, ParallelConfig{});
  auto first = non_partition_work(m, p, 0);
  auto last = non_partition_work(m, p, 1);
  EXPECT_EQ(keys(first), (std::vector<std::string>{"embedding_fwd", "embedding_bwd"}));
  EXPECT_EQ(keys(last), (std::vector<std::string>{"head_fwd", "head_bwd"}));
  for (const auto& w : first) EXPECT_FALSE(w.per_layer);
  // LM head: a whole microbatch (8 x 4096 tokens) by the vocabulary shard 128256/8.
  const Partition& head = last[0];
  EXPECT_DOUBLE_EQ(head.ops[1].flops, 2.0 * 8 * 4096 * 3072 * (128256.0 / 8));
  EXPECT_TRUE(head.slots.empty());
  ParallelConfig four = p;
  four.pp = 4;
  four.layers_per_stage.clear();
  four = validated(m, four);
  EXPECT_TRUE(non_partition_work(m, four, 1).empty());
  ParallelConfig one = p;
  one.pp = 1;
  one.layers_per_stage.clear();
  EXPECT_EQ(keys(non_partition_work(m, validated(m, one), 0)),
            (std::vector<std::string>{"embedding_fwd", "embedding_bwd", "head_fwd", "head_bwd"}));
}

TEST(LaunchSlots, MemoryRunsOfOneFamilyMergeGemmsStandAlone) {
  std::vector<ComputeOp> ops = {{"a", OpKind::kNorm, Pass::kForward, 0, 1},
                                {"b", OpKind::kRope, Pass::kForward, 0, 1},
                                {"c", OpKind::kGemm, Pass::kForward, 1, 1},
                                {"d", OpKind::kGemm, Pass::kForward, 1, 1},
                                {"e", OpKind::kActivation, Pass::kForward, 0, 1},
                                {"f", OpKind::kAttention, Pass::kForward, 1, 1}};
  auto slots = launch_slots(ops);
  ASSERT_EQ(slots.size(), 6u);
  EXPECT_EQ(slots[0], (LaunchSlot{"norm_0", 0, 1, true}));  // a norm and a rope: two families, two slots
  EXPECT_EQ(slots[1], (LaunchSlot{"rope_0", 1, 1, true}));
  EXPECT_EQ(slots[2], (LaunchSlot{"linear_0", 2, 1, false}));
  EXPECT_EQ(slots[3], (LaunchSlot{"linear_1", 3, 1, false}));
  EXPECT_EQ(slots[4], (LaunchSlot{"act_0", 4, 1, true}));
  EXPECT_EQ(slots[5], (LaunchSlot{"attn_0", 5, 1, false}));
  // Memory-bound ops of one family, one after the other, are one slot; the family's count goes on.
  std::vector<ComputeOp> runs = {{"a", OpKind::kNorm, Pass::kForward, 0, 1},
                                 {"b", OpKind::kNorm, Pass::kForward, 0, 1},
                                 {"c", OpKind::kGemm, Pass::kForward, 1, 1},
                                 {"d", OpKind::kNorm, Pass::kForward, 0, 1},
                                 {"e", OpKind::kActivation, Pass::kForward, 0, 1},
                                 {"f", OpKind::kNorm, Pass::kForward, 0, 1}};
  EXPECT_EQ(launch_slots(runs), (std::vector<LaunchSlot>{{"norm_0", 0, 2, true},
                                                          {"linear_0", 2, 1, false},
                                                          {"norm_1", 3, 1, true},
                                                          {"act_0", 4, 1, true},
                                                          {"norm_2", 5, 1, true}}));
}

TEST(Knob, SequentialIsTheNoneSlot) {
  Knob k{1410, 12, "none"};
  EXPECT_TRUE(k.sequential());
  EXPECT_FALSE((Knob{1410, 12, "linear_0"}).sequential());
  EXPECT_LT((Knob{900, 12, "a"}), (Knob{1410, 3, "a"}));
}

// The sequential knob's segment: both nanobatches' tokens in one kernel per op and one collective.
// Against an independent count: a GEMM over 2t tokens from the op builder's formula at mbs doubled.
TEST(Unsplit, DoublesTheTokensButNotTheWeights) {
  const ModelSpec model = load_model("llama-3.2-3b");
  ParallelConfig half_config;  // mbs 8: nanobatches of 4
  ParallelConfig double_config;
  double_config.microbatch_size = 16;  // nanobatches of 8: the un-split segment of mbs 8
  const auto parts = build_partitions(model, validated(model, half_config));
  const auto doubled = build_partitions(model, validated(model, double_config));
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const Partition whole = unsplit(parts[i]);
    ASSERT_EQ(whole.ops.size(), doubled[i].ops.size());
    for (std::size_t k = 0; k < whole.ops.size(); ++k) {
      const ComputeOp &got = whole.ops[k], &want = doubled[i].ops[k];
      EXPECT_DOUBLE_EQ(got.flops, want.flops) << got.name;
      EXPECT_DOUBLE_EQ(got.hbm_bytes, want.hbm_bytes) << got.name;
      EXPECT_DOUBLE_EQ(got.rows, want.rows) << got.name;
      EXPECT_DOUBLE_EQ(got.cols, want.cols) << got.name;
      if (got.kind == OpKind::kGemm) {
        EXPECT_GT(got.weight_bytes, 0) << got.name;
      }
    }
    ASSERT_TRUE(whole.collective.has_value());
    EXPECT_DOUBLE_EQ(whole.collective->bytes, doubled[i].collective->bytes);
  }
  for (const Partition& p : non_partition_work(model, validated(model, half_config), 1)) {
    EXPECT_EQ(unsplit(p), p);
  }
}

}  // namespace
}  // namespace kareus::workload
