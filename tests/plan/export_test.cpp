#include "kareus/plan/export.hpp"

#include <gtest/gtest.h>

#include "kareus/core/error.hpp"

namespace kareus::plan {
namespace {

using pipeline::InstructionType;

Plan two_stage_plan(bool with_partitions) {
  Plan plan;
  plan.num_stages = 2;
  plan.num_microbatches = 1;
  nlohmann::json knob;
  if (with_partitions) {
    knob = {{"partitions", {{{"key", "fwd_attn"}, {"sms", 12}, {"slot", "linear_1"}},
                            {{"key", "fwd_mlp"}, {"sms", 6}, {"slot", "none"}}}}};
  }
  nlohmann::json backward_knob = knob;
  if (with_partitions) backward_knob["recompute"] = {{{"key", "fwd_attn"}, {"sms", 3}, {"slot", "attn_0"}}};
  plan.stages = {{{InstructionType::kForward, 0, 1410, knob, 0.1, 30},
                  {InstructionType::kBackward, 0, 1230, backward_knob, 0.2, 50}},
                 {{InstructionType::kForward, 0, 1395.4, knob, 0.1, 30},
                  {InstructionType::kBackward, 0, 900, backward_knob, 0.2, 50}}};
  return plan;
}

TEST(Export, FrequencyListsArePythonLiteralsPerStage) {
  std::string text = zeus_pfo_schedule(two_stage_plan(false));
  EXPECT_EQ(text, "[\n    [('forward', 1410), ('backward', 1230)],\n    [('forward', 1395), ('backward', 900)],\n]\n");
  EXPECT_EQ(kareus_artifact_freqs(two_stage_plan(true)), text);
}

TEST(Export, SchedsListRecomputeConfigsFirst) {
  std::string text = kareus_artifact_scheds(two_stage_plan(true));
  EXPECT_NE(text.find("('linear_1-none-12-1024', 'none-none-6-1024', )"), std::string::npos) << text;
  EXPECT_NE(text.find("('attn_0-none-3-1024', 'linear_1-none-12-1024', 'none-none-6-1024', )"),
            std::string::npos)
      << text;
}

TEST(Export, ClockOnlyPlansCannotFillTheArtifactSchedsFile) {
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
