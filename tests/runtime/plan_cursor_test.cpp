// Tests of the plan cursor: it follows the plan's order, asks the controller for each clock,
// returns the partition knobs, and names the position at fault when the loop and the plan differ.
#include "kareus/runtime/plan_cursor.hpp"

#include <gtest/gtest.h>

#include "kareus/runtime/fake_gpu.hpp"
#include "runtime/runtime_test_util.hpp"

namespace kareus::runtime {
namespace {

using testing::Contains;
using testing::make_test_plan;

TEST(PlanCursor, WalksTheStageAndSetsEachClock) {
  auto gpu = std::make_shared<FakeGpu>(make_fake_gpu_config());
  FrequencyController controller({gpu});
  plan::Plan plan = make_test_plan();
  PlanCursor cursor(plan, 1, &controller);
  ASSERT_EQ(cursor.instructions_per_iteration(), 4u);
  for (int iteration = 0; iteration < 3; ++iteration) {
    for (std::size_t k = 0; k < 4; ++k) {
      const auto& expected = plan.stages[1][k];
      const CommKnobs& knobs =
          cursor.on_instruction_begin(pipeline::to_string(expected.type), expected.microbatch);
      EXPECT_TRUE(knobs.empty());  // stage 1 carries no partition knobs
      controller.wait_idle();
      EXPECT_EQ(gpu->locked_sm_clocks_mhz(), (std::pair{static_cast<int>(expected.freq_mhz),
                                                        static_cast<int>(expected.freq_mhz)}));
    }
    cursor.on_step_end();
  }
  EXPECT_EQ(cursor.iteration(), 3);
  EXPECT_EQ(cursor.position(), 0u);
}

TEST(PlanCursor, ReturnsThePartitionKnobs) {
  PlanCursor cursor(make_test_plan(), 0, nullptr);
  const CommKnobs& forward = cursor.on_instruction_begin("forward");
  ASSERT_EQ(forward.size(), 2u);
  EXPECT_EQ(forward.at("fwd_attn").at("comm_sms"), 8);
  EXPECT_EQ(forward.at("fwd_mlp").at("launch_slot"), "none");
  cursor.on_instruction_begin("forward");
  const CommKnobs& backward = cursor.on_instruction_begin(pipeline::InstructionType::kBackward, 0);
  ASSERT_EQ(backward.size(), 1u);
  EXPECT_EQ(backward.at("bwd_mlp").at("launch_slot"), "attn_0");
}

TEST(PlanCursor, KnobFormsAndPlansWithoutKnobs) {
  EXPECT_TRUE(partition_knobs(nullptr).empty());
  EXPECT_TRUE(partition_knobs({{"sm_count", 8}, {"note", "perseus column"}}).empty());
  auto direct = partition_knobs({{"fwd_attn", {{"comm_sms", 4}}}, {"extra", 1}});
  EXPECT_EQ(direct.size(), 1u);
  auto nested =
      partition_knobs({{"partitions", {{"bwd_mlp", {{"comm_sms", 2}}}}}, {"x", {{"y", 1}}}});
  ASSERT_EQ(nested.size(), 1u);
  EXPECT_EQ(nested.at("bwd_mlp").at("comm_sms"), 2);
}

TEST(PlanCursor, TypeMismatchNamesThePosition) {
  PlanCursor cursor(make_test_plan(), 1, nullptr, "plan.json");
  cursor.on_instruction_begin("forward");  // stage 1 of 2 in 1F1B: F0 B0 F1 B1
  try {
    cursor.on_instruction_begin("forward");
    FAIL() << "a forward where the plan has a backward must fail";
  } catch (const InputError& e) {
    EXPECT_TRUE(Contains(e.what(), "plan.json: field 'stages[1].instructions[1]'")) << e.what();
    EXPECT_TRUE(Contains(e.what(), "began a forward, but the plan runs backward of microbatch 0"));
    EXPECT_TRUE(Contains(e.what(), "(1f1b, 2 microbatches)"));
  }
  EXPECT_EQ(cursor.position(), 1u);  // a failed check consumes nothing
  EXPECT_THROW(cursor.on_instruction_begin("backward", 1), InputError);  // wrong microbatch
  EXPECT_THROW(cursor.on_instruction_begin("sideways"), InputError);
  cursor.on_instruction_begin("backward", 0);
}

TEST(PlanCursor, UnconsumedIterationIsAnErrorAndRewinds) {
  PlanCursor cursor(make_test_plan(), 0, nullptr, "plan.json");
  cursor.on_instruction_begin("forward");
  cursor.on_instruction_begin("forward");
  try {
    cursor.on_step_end();
    FAIL() << "an iteration that skipped instructions must fail";
  } catch (const InputError& e) {
    EXPECT_TRUE(Contains(e.what(), "field 'stages[0].instructions[2]'")) << e.what();
    EXPECT_TRUE(Contains(e.what(), "iteration 0 ended after 2 of stage 0's 4 instructions"));
    EXPECT_TRUE(Contains(e.what(), "the next one was backward of microbatch 0"));
  }
  EXPECT_EQ(cursor.position(), 0u);
  for (const char* type : {"forward", "forward", "backward", "backward"})
    cursor.on_instruction_begin(type);
  try {
    cursor.on_instruction_begin("forward");
    FAIL() << "running past the iteration must fail";
  } catch (const InputError& e) {
    EXPECT_TRUE(Contains(e.what(), "call on_step_end()"));
  }
  cursor.on_step_end();
}

TEST(PlanCursor, ReadsPlanFilesAndPlanSets) {
  auto dir = testing::temp_dir("cursor-files");
  plan::Plan plan = make_test_plan();
  plan::write_plan(plan, dir / "plan.json");
  nlohmann::json set = {{"format", "kareus-plan-set"},
                        {"version", 1},
                        {"plans", {plan::to_json(make_test_plan(2, 3)), plan::to_json(plan)}}};
  std::ofstream(dir / "plans.json") << set.dump();

  EXPECT_EQ(plan::read_plan(dir / "plan.json"), plan);
  EXPECT_EQ(plan::read_plan(dir / "plans.json", 1), plan);
  EXPECT_EQ(PlanCursor::open(dir / "plans.json", 0, nullptr, 0).instructions_per_iteration(), 6u);
  try {
    plan::read_plan(dir / "plans.json");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_TRUE(Contains(e.what(), "holds 2 plans; choose one with --index 0..1"));
  }
  EXPECT_THROW(plan::read_plan(dir / "plans.json", 2), InputError);
  EXPECT_THROW(plan::read_plan(dir / "plan.json", 0), InputError);
  EXPECT_THROW(PlanCursor::open(dir / "plan.json", 2, nullptr), InputError);  // no stage 2
  EXPECT_THROW(PlanCursor::open(dir / "missing.json", 0, nullptr), InputError);
  plan.stages[0][1].freq_mhz = -5;
  try {
    PlanCursor(plan, 0, nullptr, "p.json");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_TRUE(Contains(e.what(), "stages[0].instructions[1].freq_mhz"));
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kareus::runtime
