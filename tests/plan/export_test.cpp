// The exports' exact text on small hand-made plans: the artifact's tuple grammar (names first,
// fields by partition key in the artifact's order, pairs per microbatch without checkpointing),
// its slot names, config strings passed through, and the errors that write nothing. The round
// trip from real `kareus plan` runs is tests/python/artifact_schedule_roundtrip.py.
#include "kareus/plan/export.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <functional>

#include "kareus/core/error.hpp"
#include "kareus/plan/validate.hpp"

namespace kareus::plan {
namespace {

using schedule::InstructionType;

// An instruction's knob is shared and immutable: changed through a copy, given back whole.
void edit_knob(PlannedInstruction& ins, const std::function<void(nlohmann::json&)>& change) {
  nlohmann::json knob = *ins.knob;
  change(knob);
  ins.knob = SharedJson(std::move(knob));
}

nlohmann::json entry(const char* key, int sms, const char* slot) {
  return {{"key", key}, {"sms", sms}, {"slot", slot}};
}

// Two stages, one microbatch; knobs listed in run order (the backward's MLP first), as compose
// writes them.
Plan two_stage_plan(bool with_partitions, bool checkpointing = true) {
  Plan plan;
  plan.num_stages = 2;
  plan.num_microbatches = 1;
  plan.time_s = 0.6;
  plan.energy_j = 160;
  nlohmann::json forward, backward;
  if (with_partitions) {
    forward = {{"partitions", {entry("fwd_attn", 12, "linear_1"), entry("fwd_mlp", 6, "act_0")}}};
    backward = {{"partitions", {entry("bwd_mlp", 9, "linear_1"), entry("bwd_attn", 3, "none")}}};
    if (checkpointing) backward["recompute"] = {entry("fwd_attn", 3, "attn_0"), entry("fwd_mlp", 15, "norm_0")};
  }
  plan.stages = {{{InstructionType::kForward, 0, 1410, SharedJson(forward), 0.1, 30},
                  {InstructionType::kBackward, 0, 1230, SharedJson(backward), 0.2, 50}},
                 {{InstructionType::kForward, 0, 1395.4, SharedJson(forward), 0.1, 30},
                  {InstructionType::kBackward, 0, 900, SharedJson(backward), 0.2, 50}}};
  return plan;
}

TEST(Export, FrequencyListsArePythonLiteralsPerStage) {
  std::string text = zeus_pfo_schedule(two_stage_plan(false));
  EXPECT_EQ(text, "[\n    [('forward', 1410), ('backward', 1230)],\n    [('forward', 1395), ('backward', 900)],\n]\n");
  EXPECT_EQ(kareus_artifact_freqs(two_stage_plan(true)), text);
}

TEST(Export, CheckpointedTuplesNameTheInstructionAndPlaceFieldsByKey) {
  const std::string line =
      "    [('forward', 'linear_1-none-12-1024', 'activation_0-none-6-1024'), "
      "('backward', 'attn_0-none-3-1024', 'norm_0-none-15-1024', 'none-none-3-1024', 'linear_1-none-9-1024')],\n";
  EXPECT_EQ(kareus_artifact_scheds(two_stage_plan(true)), "[\n" + line + line + "]\n");
  EXPECT_TRUE(artifact_layout(two_stage_plan(true)).checkpointing);
  EXPECT_FALSE(artifact_layout(two_stage_plan(true)).context_parallel);
}

TEST(Export, WithoutCheckpointingOnePairPerMicrobatch) {
  Plan plan = two_stage_plan(true, false);
  // A second microbatch, run in 1F1B order F0 F1 B0 B1 with its own knobs.
  for (auto& stage : plan.stages) {
    PlannedInstruction f1 = stage[0], b1 = stage[1];
    f1.microbatch = b1.microbatch = 1;
    edit_knob(f1, [](nlohmann::json& k) { k["partitions"][0]["sms"] = 24; });
    stage = {stage[0], f1, stage[1], b1};
  }
  const std::string line =
      "    [(('forward', 'linear_1-none-12-1024', 'activation_0-none-6-1024'), "
      "('backward', 'none-none-3-1024', 'linear_1-none-9-1024')), "
      "(('forward', 'linear_1-none-24-1024', 'activation_0-none-6-1024'), "
      "('backward', 'none-none-3-1024', 'linear_1-none-9-1024'))],\n";
  EXPECT_EQ(kareus_artifact_scheds(plan), "[\n" + line + line + "]\n");
}

TEST(Export, ContextParallelFieldsInTheArtifactsOrder) {
  Plan plan;
  plan.num_stages = 1;
  plan.num_microbatches = 1;
  // Listed in our run order; the artifact's backward order differs (qkv_ar first, mlp last).
  nlohmann::json forward = {{"partitions",
                             {entry("fwd_qkv_ar", 1, "norm_0"), entry("fwd_qkv_ag", 2, "linear_0"),
                              entry("fwd_ao_ag", 3, "attn_0"), entry("fwd_ao_ar", 4, "linear_0"),
                              entry("fwd_mlp", 5, "act_0")}}};
  nlohmann::json backward = {{"partitions",
                              {entry("bwd_mlp", 6, "linear_0"), entry("bwd_o_ar", 7, "linear_0"),
                               entry("bwd_o_ag", 8, "linear_0"), entry("bwd_a_ag", 9, "attn_0"),
                               entry("bwd_a_rs", 10, "rope_0"), entry("bwd_qkv_rs", 11, "linear_0"),
                               entry("bwd_qkv_ar", 12, "norm_0")}},
                             {"recompute", forward["partitions"]}};
  plan.stages = {{{InstructionType::kForward, 0, 1410, SharedJson(forward), 0.1, 30},
                  {InstructionType::kBackward, 0, 1410, SharedJson(backward), 0.2, 50}}};
  EXPECT_EQ(kareus_artifact_scheds(plan),
            "[\n    [('forward', 'norm_0-none-1-1024', 'linear_0-none-2-1024', 'attn_0-none-3-1024', "
            "'linear_0-none-4-1024', 'activation_0-none-5-1024'), "
            "('backward', 'norm_0-none-1-1024', 'linear_0-none-2-1024', 'attn_0-none-3-1024', "
            "'linear_0-none-4-1024', 'activation_0-none-5-1024', 'norm_0-none-12-1024', "
            "'linear_0-none-11-1024', 'rope_0-none-10-1024', 'attn_0-none-9-1024', 'linear_0-none-8-1024', "
            "'linear_0-none-7-1024', 'linear_0-none-6-1024')],\n]\n");
  EXPECT_TRUE(artifact_layout(plan).context_parallel);
}

TEST(Export, ConfigStringsFromAnArtifactProfilePassThrough) {
  Plan plan = two_stage_plan(false);
  for (auto& stage : plan.stages) {
    stage[0].knob = SharedJson(nlohmann::json{{"fwd_attn", "linear_0-none-12-1024"}, {"fwd_mlp", "norm_0-none-20-1024"},
                     {"bwd_attn", ""}, {"bwd_mlp", ""}, {"note", "profiled twice"}});
    stage[1].knob = SharedJson(nlohmann::json{{"fwd_attn", "0-8-16-1024"}, {"fwd_mlp", "-1--1-16-1024"},
                     {"bwd_attn", "linear_1-none-3-512"}, {"bwd_mlp", "activation_0-none-9-1024"}});
  }
  const std::string line =
      "    [('forward', 'linear_0-none-12-1024', 'norm_0-none-20-1024'), "
      "('backward', '0-8-16-1024', '-1--1-16-1024', 'linear_1-none-3-512', 'activation_0-none-9-1024')],\n";
  EXPECT_EQ(kareus_artifact_scheds(plan), "[\n" + line + line + "]\n");

  edit_knob(plan.stages[1][0], [](nlohmann::json& k) { k["fwd_mlp"] = "norm_0-12"; });
  try {
    kareus_artifact_scheds(plan);
    FAIL() << "a malformed config string was written";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("stages[1].instructions[0]"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("knob.fwd_mlp"), std::string::npos) << e.what();
  }
}

// The artifact's TP profile CSV names its config columns attention_configs, mlp_configs and
// recompute_*; a backward's own columns are its bwd_ partitions, the recompute ones its fwd_.
TEST(Export, TheArtifactsProfileColumnsMapToTheirPartitions) {
  Plan plan = two_stage_plan(false);
  for (auto& stage : plan.stages) {
    stage[0].knob = SharedJson(nlohmann::json{{"attention_configs", "linear_0-none-12-1024"}, {"mlp_configs", "norm_0-none-20-1024"},
                     {"recompute_attention_configs", ""}, {"recompute_mlp_configs", ""}});
    stage[1].knob = SharedJson(nlohmann::json{{"attention_configs", "linear_1-none-3-1024"}, {"mlp_configs", "activation_0-none-9-1024"},
                     {"recompute_attention_configs", "attn_0-none-6-1024"},
                     {"recompute_mlp_configs", "linear_0-none-24-1024"}});
  }
  const std::string line =
      "    [('forward', 'linear_0-none-12-1024', 'norm_0-none-20-1024'), "
      "('backward', 'attn_0-none-6-1024', 'linear_0-none-24-1024', 'linear_1-none-3-1024', "
      "'activation_0-none-9-1024')],\n";
  EXPECT_EQ(kareus_artifact_scheds(plan), "[\n" + line + line + "]\n");
}

TEST(Export, KnobsTheArtifactCannotHoldAreErrorsNamingTheInstruction) {
  auto message_of = [](const Plan& plan) {
    try {
      kareus_artifact_scheds(plan);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  Plan mixed = two_stage_plan(true);
  edit_knob(mixed.stages[1][1], [](nlohmann::json& k) { k.erase("recompute"); });  // one backward recomputes, the other does not
  EXPECT_NE(message_of(mixed).find("stages[1].instructions[1]"), std::string::npos) << message_of(mixed);

  Plan missing = two_stage_plan(true);
  edit_knob(missing.stages[0][0], [](nlohmann::json& k) { k["partitions"].erase(1); });  // no fwd_mlp
  EXPECT_NE(message_of(missing).find("fwd_mlp"), std::string::npos) << message_of(missing);

  Plan layer = two_stage_plan(true);
  layer.stages[0][0].knob = SharedJson(nlohmann::json{{"partitions", {entry("fwd_layer", 0, "none")}}});  // TP = CP = 1
  EXPECT_NE(message_of(layer).find("fwd_layer"), std::string::npos) << message_of(layer);
}

TEST(Export, ClockOnlyPlansCannotFillTheArtifactSchedsFile) {
  EXPECT_NO_THROW(validate(two_stage_plan(false), "plan"));  // refused by the export, not the validator
  EXPECT_THROW(kareus_artifact_scheds(two_stage_plan(false)), InputError);
  auto dir = std::filesystem::temp_directory_path() / ("kareus-export-" + std::to_string(::getpid()));
  EXPECT_THROW(export_plan(two_stage_plan(false), "kareus-artifact", dir), InputError);
  EXPECT_FALSE(std::filesystem::exists(dir / "freqs_pipeline_00000.py"));  // nothing written
  EXPECT_THROW(export_plan(two_stage_plan(true), "csv", dir), InputError);
  auto written = export_plan(two_stage_plan(true), "kareus-artifact", dir);
  EXPECT_EQ(written.size(), 2u);
  EXPECT_TRUE(std::filesystem::exists(dir / "scheds_pipeline_00000.py"));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kareus::plan
