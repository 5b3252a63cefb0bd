// ParallelConfig: the defaults are the first Kareus evaluation config, the default layer split is
// the evaluation's, and every bad combination names its flag.
#include "kareus/workload/parallel.hpp"
#include "kareus/workload/stage_transfer.hpp"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <numeric>

#include "test_util.hpp"

namespace kareus::workload {
namespace {

using kareus::testing::Contains;
using kareus::testing::input_error_of;

TEST(Parallel, DefaultsAreTheFirstKareusConfig) {
  ParallelConfig p;
  EXPECT_EQ(p.tp, 8);
  EXPECT_EQ(p.cp, 1);
  EXPECT_EQ(p.pp, 2);
  EXPECT_EQ(p.dp, 1);
  EXPECT_EQ(p.microbatch_size, 8);
  EXPECT_EQ(p.seq_len, 4096);
  EXPECT_EQ(p.microbatches, 8);
  EXPECT_EQ(p.checkpointing, Checkpointing::kFull);
  EXPECT_EQ(p.nanobatch_size(), 4);
  ParallelConfig v = validated(load_model("llama-3.2-3b"), p);
  EXPECT_EQ(v.layers_per_stage, (std::vector<int>{15, 13}));
}

TEST(Parallel, DefaultLayerSplit) {
  EXPECT_EQ(default_layers_per_stage(28, 2), (std::vector<int>{15, 13}));
  EXPECT_EQ(default_layers_per_stage(28, 1), (std::vector<int>{28}));
  EXPECT_EQ(default_layers_per_stage(32, 4), (std::vector<int>{9, 8, 8, 7}));
  EXPECT_EQ(default_layers_per_stage(2, 2), (std::vector<int>{1, 1}));
}

RC_GTEST_PROP(Parallel, DefaultSplitCoversEveryLayer, ()) {
  const long layers = *rc::gen::inRange(1L, 200L);
  const int pp = *rc::gen::inRange(1, static_cast<int>(std::min(layers, 64L)) + 1);
  auto split = default_layers_per_stage(layers, pp);
  RC_ASSERT(static_cast<int>(split.size()) == pp);
  RC_ASSERT(std::accumulate(split.begin(), split.end(), 0L) == layers);
  for (int n : split) RC_ASSERT(n >= 1);
}

TEST(Parallel, ConfiguredSplitIsChecked) {
  ModelSpec m = load_model("llama-3.2-3b");
  ParallelConfig p;
  p.layers_per_stage = {14, 14};
  EXPECT_EQ(validated(m, p).layers_per_stage, (std::vector<int>{14, 14}));
  p.layers_per_stage = {14, 13};
  EXPECT_TRUE(Contains(input_error_of([&] { validated(m, p); }), "sums to 27"));
  p.layers_per_stage = {28};
  EXPECT_TRUE(
      Contains(input_error_of([&] { validated(m, p); }), "1 entries for 2 pipeline stages"));
  EXPECT_EQ(parse_layers_per_stage("15,13", "f"), (std::vector<int>{15, 13}));
  EXPECT_TRUE(
      Contains(input_error_of([] { parse_layers_per_stage("15,,13", "--layers-per-stage"); }),
               "--layers-per-stage"));
}

TEST(Parallel, BadCombinationsNameTheirFlag) {
  ModelSpec m = load_model("llama-3.2-3b");
  auto error_with = [&](auto change) {
    ParallelConfig p;
    change(p);
    return input_error_of([&] { validated(m, p); });
  };
  EXPECT_TRUE(Contains(error_with([](auto& p) { p.tp = 5; }),
                       "field '--tp': 5 does not divide the attention heads (24)"));
  EXPECT_TRUE(
      Contains(error_with([](auto& p) { p.tp = 16; }), "does not divide the attention heads"));
  EXPECT_TRUE(Contains(error_with([](auto& p) { p.tp = 3; }), "key/value groups"));
  EXPECT_TRUE(Contains(error_with([](auto& p) { p.hidden_dropout = 1; }), "field '--hidden-dropout'"));
  EXPECT_TRUE(Contains(error_with([](auto& p) { p.hidden_dropout = -0.1; }), "must be in [0, 1)"));
  EXPECT_TRUE(Contains(error_with([](auto& p) {
                         p.cp = 2;
                         p.seq_len = 4098;
                       }),
                       "--cp"));
  EXPECT_TRUE(
      Contains(error_with([](auto& p) { p.microbatch_size = 1; }), "--mbs': must be at least 2"));
  EXPECT_TRUE(Contains(error_with([](auto& p) { p.microbatch_size = 3; }), "must be even"));
  EXPECT_TRUE(Contains(error_with([](auto& p) { p.pp = 0; }), "--pp"));
  EXPECT_TRUE(Contains(error_with([](auto& p) { p.pp = 29; }), "every stage needs a layer"));
  EXPECT_TRUE(Contains(error_with([](auto& p) { p.microbatches = 0; }), "--microbatches"));
  ModelSpec odd = m;
  odd.hidden_size = 3076;  // heads still divide, hidden does not
  ParallelConfig p;
  p.tp = 8;
  odd.num_attention_heads = 24;
  EXPECT_TRUE(Contains(input_error_of([&] { validated(odd, p); }), "hidden size"));
}

TEST(Parallel, CheckpointingNames) {
  EXPECT_EQ(parse_checkpointing("full"), Checkpointing::kFull);
  EXPECT_EQ(parse_checkpointing("none"), Checkpointing::kNone);
  EXPECT_FALSE(parse_checkpointing("selective"));
  EXPECT_EQ(to_string(Checkpointing::kFull), "full");
}

// Megatron-Core sends the whole (seq/CP, mbs, hidden) activation from every TP rank without
// sequence parallelism: the bytes do not shrink with TP, and halve with CP.
TEST(StageTransfer, EveryTpRankSendsTheWholeActivationOfItsCpShard) {
  const ModelSpec model = load_model("llama-3.2-3b");
  ParallelConfig tp8;
  const double bytes = stage_transfer_bytes(model, validated(model, tp8));
  EXPECT_DOUBLE_EQ(bytes, 8.0 * 4096 * 3072 * 2);
  ParallelConfig cp2 = tp8;
  cp2.tp = 4;
  cp2.cp = 2;
  EXPECT_DOUBLE_EQ(stage_transfer_bytes(model, validated(model, cp2)), bytes / 2);
}

}  // namespace
}  // namespace kareus::workload
