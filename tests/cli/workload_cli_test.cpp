// `kareus partitions` and `kareus evaluate` end to end: the workload flags and config files, the
// printed partitions and costs, and bad input as one line on stderr with exit code 2.
#include <nlohmann/json.hpp>
#include <vector>

#include "cli_fixture.hpp"

namespace kareus::testing {
namespace {

using WorkloadCli = CliTest;

TEST_F(WorkloadCli, PartitionsOfTheDefaultWorkload) {
  CliResult r = run("partitions");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(
      contains(r.out, "Llama 3.2 3B on NVIDIA A100 SXM4 40GB: TP 8, CP 1, PP 2 (15/13 layers)"));
  for (const char* key : {"\nfwd_attn (forward", "\nfwd_mlp (forward", "\nbwd_mlp (backward",
                          "\nbwd_attn (backward"}) {
    EXPECT_TRUE(contains(r.out, key)) << key;
  }
  EXPECT_TRUE(contains(r.out, "launch slots: norm_0, linear_0, rope_0, attn_0, linear_1, none"));
  EXPECT_TRUE(contains(
      r.out, "attn_all_reduce (all-reduce over TP 8 GPUs): 100.66 MB buffer, 176.16 MB sent"));
  EXPECT_TRUE(contains(r.out, "qkv_proj"));
  EXPECT_TRUE(contains(r.out, "64.42"));  // QKV GFLOP per nanobatch per GPU
  EXPECT_TRUE(contains(r.out, "Stage 0: 15 layers"));
  EXPECT_TRUE(contains(r.out, "embedding_fwd"));
  EXPECT_TRUE(contains(r.out, "head_bwd"));
}

TEST_F(WorkloadCli, PartitionsWithContextParallelismAsJson) {
  CliResult r = run("partitions --model qwen3-1.7b --tp 4 --cp 2 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto doc = nlohmann::json::parse(r.out);
  std::vector<std::string> keys;
  for (const auto& p : doc["partitions"]) keys.push_back(p["key"]);
  EXPECT_EQ(keys, (std::vector<std::string>{"fwd_qkv_ar", "fwd_qkv_ag", "fwd_ao_ag", "fwd_ao_ar",
                                            "fwd_mlp", "bwd_mlp", "bwd_o_ar", "bwd_o_ag",
                                            "bwd_a_ag", "bwd_a_rs", "bwd_qkv_rs", "bwd_qkv_ar"}));
  EXPECT_EQ(doc["partitions"][1]["collective"]["kind"], "all-gather");
  EXPECT_EQ(doc["stages"].size(), 2u);
}

TEST_F(WorkloadCli, ConfigFilesAndFlagPrecedence) {
  std::string yaml =
      write("job.yaml", "model: qwen3-1.7b\ntp: 4\ncp: 2\nmbs: 16\nlayers_per_stage: [14, 14]\n");
  CliResult r = run("partitions --config " + yaml);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(
      r.out, "Qwen3 1.7B on NVIDIA A100 SXM4 40GB: TP 4, CP 2, PP 2 (14/14 layers), DP 1, mbs 16"));
  std::string json = write(
      "job.json", R"({"model": "qwen3-1.7b", "tp": 4, "cp": 2, "layers-per-stage": "16,12"})");
  CliResult flags_win = run("partitions --config " + json + " --tp 8 --cp 1");
  ASSERT_EQ(flags_win.exit_code, 0) << flags_win.err;
  EXPECT_TRUE(contains(flags_win.out,
                       "Qwen3 1.7B on NVIDIA A100 SXM4 40GB: TP 8, CP 1, PP 2 (16/12 layers)"));
  CliResult unknown =
      run("partitions --config " + write("bad.yaml", "model: qwen3-1.7b\nsequence: 4096\n"));
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_TRUE(contains(unknown.err, "field 'sequence': unknown key; known keys: model, gpu, tp"));
  EXPECT_EQ(std::count(unknown.err.begin(), unknown.err.end(), '\n'), 1) << unknown.err;
  // Hidden dropout from a config file or the flag: named in the description, and it costs the
  // bias-dropout-adds their mask bytes.
  CliResult dropout = run("evaluate --partition fwd_attn --slot none --config " +
                          write("dropout.yaml", "hidden_dropout: 0.1\n"));
  ASSERT_EQ(dropout.exit_code, 0) << dropout.err;
  EXPECT_TRUE(contains(dropout.out, "full checkpointing, hidden dropout 0.1")) << dropout.out;
  CliResult plain = run("evaluate --partition fwd_attn --slot none");
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_FALSE(contains(plain.out, "hidden dropout")) << plain.out;
  EXPECT_NE(dropout.out, plain.out);
  CliResult bad = run("partitions --config " + write("bad_dropout.yaml", "hidden_dropout: high\n"));
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_TRUE(contains(bad.err, "field 'hidden_dropout': must be a number")) << bad.err;
}

TEST_F(WorkloadCli, EvaluatePrintsTimeEnergyAndTimeline) {
  CliResult r = run("evaluate --partition fwd_attn --freq 1410 --sms 15 --slot linear_0");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "fwd_attn at 1410 MHz, 15 SMs for the collective, slot linear_0"));
  EXPECT_TRUE(contains(r.out, "a model, not a measurement"));
  EXPECT_TRUE(contains(r.out, "time "));
  EXPECT_TRUE(contains(r.out, "J per GPU (one of 16 GPUs)"));
  EXPECT_TRUE(contains(r.out, "dynamic"));
  EXPECT_TRUE(contains(r.out, "static"));
  EXPECT_TRUE(contains(r.out, "Timeline"));
  EXPECT_TRUE(contains(r.out, "qkv_proj"));
  EXPECT_TRUE(contains(r.out, "moving"));
  CliResult seq = run("evaluate --partition bwd_mlp --freq 900 --sms 12 --slot none");
  ASSERT_EQ(seq.exit_code, 0) << seq.err;
  EXPECT_TRUE(contains(seq.out, "sequential"));
  CliResult head = run("evaluate --partition embedding_bwd");
  ASSERT_EQ(head.exit_code, 0) << head.err;
  EXPECT_TRUE(contains(head.out, "0 SMs"));
}

TEST_F(WorkloadCli, EvaluateFromAMeasuredTable) {
  std::string table = write(
      "fwd_mlp.jsonl",
      R"({"freq": 1410, "overlap_start": "linear_0", "overlap_end": "none", "sm": 12, "block": 1024, "time_s": 0.0021, "energy_j": 0.81})"
      "\n");
  CliResult r =
      run("evaluate --partition fwd_mlp --freq 1410 --sms 12 --slot linear_0 --evaluator table:" +
          table);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "measured samples"));
  EXPECT_TRUE(contains(r.out, "2.1000 ms"));
  CliResult missing =
      run("evaluate --partition fwd_mlp --freq 1380 --sms 12 --slot linear_0 --evaluator table:" +
          table);
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_TRUE(
      contains(missing.err,
               "not measured: fwd_mlp: knob (1380 MHz, 12 SMs, slot linear_0) was not measured"));
}

TEST_F(WorkloadCli, BadInputIsOneClearLineAndExitTwo) {
  std::string odd_hidden =
      write("odd.json", R"({"hidden_size": 1004, "num_attention_heads": 8, "num_query_groups": 8,
    "head_dim": 128, "ffn_hidden_size": 4096, "num_layers": 4, "vocab_size": 1000, "qk_norm": false,
    "tied_embeddings": false})");
  struct Bad {
    std::string args, expect;
  };
  const std::vector<Bad> cases = {
      {"partitions --model gpt-5",
       "unknown model 'gpt-5'; known models: llama-3.1-8b, llama-3.2-3b, llama-3.3-70b, "
       "qwen3-1.7b"},
      {"partitions --gpu v100", "unknown GPU 'v100'; known GPUs: a100-sxm4-40gb"},
      {"partitions --tp 5", "field '--tp': 5 does not divide the attention heads (24)"},
      {"partitions --model " + odd_hidden + " --tp 8 --pp 1",
       "field '--tp': 8 does not divide the hidden size (1004)"},
      {"partitions --cp 3", "field '--cp': CP 3 does not divide the sequence (4096)"},
      {"partitions --mbs 1", "field '--mbs': must be at least 2"},
      {"partitions --checkpointing selective", "field '--checkpointing': expected full or none"},
      {"partitions --hidden-dropout 1", "field '--hidden-dropout': must be in [0, 1), got 1"},
      {"partitions --layers-per-stage 10,10", "sums to 20"},
      {"partitions --config " + path("none.yaml"), "none.yaml"},
      {"evaluate --partition fwd_attn --freq 1412 --sms 15 --slot linear_0",
       "1412 MHz is not an SM clock of a100-sxm4-40gb"},
      {"evaluate --partition fwd_attn --freq 1410 --sms 0 --slot linear_0",
       "0 SMs for the collective is outside 1..107"},
      {"evaluate --partition fwd_attn --freq 1410 --sms 108 --slot linear_0", "outside 1..107"},
      {"evaluate --partition fwd_attn --freq 1410 --sms 15 --slot act_0",
       "partition fwd_attn has no launch slot 'act_0'; its slots: norm_0, linear_0, rope_0, "
       "attn_0, linear_1, none"},
      {"evaluate --partition fwd_qkv_ag",
       "unknown partition 'fwd_qkv_ag'; this workload has: fwd_attn"},
      {"evaluate --partition fwd_attn --evaluator gpu", "expected sim, table:FILE or artifact:DIR"},
  };
  for (const Bad& c : cases) {
    CliResult r = run(c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args << "\n" << r.err;
    EXPECT_TRUE(contains(r.err, c.expect)) << c.args << "\n" << r.err;
    EXPECT_EQ(r.err.rfind("kareus: error: ", 0), 0u) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_TRUE(r.out.empty()) << c.args << "\n" << r.out;
  }
}

}  // namespace
}  // namespace kareus::testing
