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
          cursor.on_instruction_begin(schedule::to_string(expected.type), expected.microbatch);
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

TEST(PlanCursor, KnobsFollowThePlanSchemaOrAreRejectedByPath) {
  using plan::instruction_knobs;
  EXPECT_TRUE(instruction_knobs(nullptr, "k", "p.json").empty());
  // A Perseus profile's extra columns are no partition knobs.
  EXPECT_TRUE(instruction_knobs({{"sm_count", "8"}, {"note", "perseus column"}}, "k", "p").empty());
  auto knobs =
      instruction_knobs({{"partitions", {{{"key", "bwd_mlp"}, {"slot", "linear_1"}, {"sms", 9}}}},
                         {"recompute", {{{"key", "fwd_attn"}, {"slot", "none"}, {"sms", 0}}}}},
                        "k", "p");
  ASSERT_NE(knobs.find("bwd_mlp"), nullptr);
  EXPECT_EQ(knobs.find("bwd_mlp")->sms, 9);
  EXPECT_EQ(knobs.find("fwd_attn"), nullptr) << "find() looks at the instruction's own partitions";
  EXPECT_EQ(knobs.recompute.at(0).slot, "none");
  EXPECT_EQ(plan::to_json(knobs)["recompute"][0]["key"], "fwd_attn");

  auto error_of = [](const nlohmann::json& knob) {
    return testing::input_error_of(
        [&] { instruction_knobs(knob, "stages[0].instructions[2].knob", "p.json"); });
  };
  EXPECT_TRUE(Contains(error_of({{"partitions", {{{"key", "fwd_attn"}, {"slot", "linear_0"}}}}}),
                       "stages[0].instructions[2].knob.partitions[0].sms"));
  EXPECT_TRUE(Contains(error_of({{"partitions", {{"fwd_attn", {{"comm_sms", 8}}}}}}),
                       "knob.partitions': expected an array"));
  EXPECT_TRUE(Contains(error_of({{"partitions",
                                  {{{"key", "a"}, {"slot", "x"}, {"sms", 1}},
                                   {{"key", "a"}, {"slot", "y"}, {"sms", 2}}}}}),
                       "partition 'a' appears twice"));
  EXPECT_TRUE(Contains(error_of({{"partitions", nlohmann::json::array()}, {"recompute", 3}}),
                       "knob.recompute': expected an array"));

  plan::Plan plan = make_test_plan();
  plan.stages[0][1].knob = SharedJson(nlohmann::json{{"partitions", {{{"key", "fwd_attn"}, {"slot", 7}, {"sms", 1}}}}});
  EXPECT_TRUE(Contains(testing::input_error_of([&] { PlanCursor(plan, 0, nullptr, "p.json"); }),
                       "stages[0].instructions[1].knob.partitions[0].slot"));
}

TEST(PlanCursor, AFrontierIsOneJobsPlansAndSwitchesOnlyAtTheNamedIteration) {
  plan::Plan fast = make_test_plan(), slow = make_test_plan();
  slow.time_s = 2, slow.energy_j = 80;
  for (auto& ins : slow.stages[1]) ins.freq_mhz = 600;
  PlanCursor cursor({fast, slow}, 0, 1, nullptr, "plans.json");
  EXPECT_EQ(cursor.set_target_time(1.5, 2), 0u) << "1.5 s: only the fast plan is in time";
  EXPECT_EQ(cursor.set_target_time(2.0, 2), 1u) << "a later call for the same iteration wins";
  for (long it = 0; it < 3; ++it) {
    EXPECT_EQ(cursor.plan_index(), it < 2 ? 0u : 1u) << it;
    for (int k = 0; k < 4; ++k)
      cursor.on_instruction_begin(cursor.instruction(static_cast<std::size_t>(k)).type);
    EXPECT_EQ(cursor.plan().stages[1][0].freq_mhz, it < 2 ? fast.stages[1][0].freq_mhz : 600);
    cursor.on_step_end();
  }
  EXPECT_EQ(cursor.set_target_time(0.5, 3), 0u) << "below every plan: the fastest";
  EXPECT_EQ(cursor.plan_index(), 0u) << "at a boundary, a switch for this iteration is immediate";
  EXPECT_FALSE(testing::input_error_of([&] { cursor.set_target_time(1.0, 2); }).empty());
  EXPECT_FALSE(testing::input_error_of([&] { cursor.set_target_time(-1.0, 5); }).empty());

  plan::Plan other = make_test_plan(2, 3);
  EXPECT_TRUE(Contains(testing::input_error_of([&] {
                         PlanCursor({fast, other}, 0, 0, nullptr, "s.json");
                       }),
                       "a set's plans must be of one job"));
  EXPECT_FALSE(
      testing::input_error_of([&] { PlanCursor({fast}, 1, 0, nullptr, "s.json"); }).empty());
}

// A knob tree shared by instructions, across the frontier's plans, is decoded once; an equal knob of
// a tree of its own decodes to the same knobs.
TEST(PlanCursor, InstructionsOfOneKnobTreeShareItsDecodedKnobs) {
  const SharedJson shared(nlohmann::json{{"partitions", {{{"key", "bwd_mlp"}, {"slot", "linear_1"}, {"sms", 9}}}}});
  const SharedJson equal(*shared);
  ASSERT_NE(&*shared, &*equal);
  plan::Plan fast = make_test_plan(), slow = make_test_plan();
  slow.time_s = 2, slow.energy_j = 80;
  for (plan::Plan* p : {&fast, &slow}) {
    p->stages[1][0].knob = shared;
    p->stages[1][1].knob = shared;
    p->stages[1][2].knob = equal;
  }
  PlanCursor cursor({fast, slow}, 0, 1, nullptr, "plans.json");
  const CommKnobs& first = cursor.knobs(0);
  ASSERT_EQ(first.partitions.size(), 1u);
  EXPECT_EQ(first.partitions[0].sms, 9);
  EXPECT_EQ(&cursor.knobs(1), &first);
  EXPECT_EQ(cursor.knobs(2), first);
  EXPECT_TRUE(cursor.knobs(3).empty());
  for (int k = 0; k < 4; ++k) cursor.on_instruction_begin(cursor.instruction(static_cast<std::size_t>(k)).type);
  cursor.set_target_time(2.0, 1);
  cursor.on_step_end();
  ASSERT_EQ(cursor.plan_index(), 1u);
  EXPECT_EQ(&cursor.knobs(0), &first) << "the slow plan's instruction takes the same tree";
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

// open_frontier checks each plan whole as it reads it, then keeps this rank's stage alone: the same
// errors as the cursor built from whole plans, and the same instructions.
TEST(PlanCursor, AFrontierOpenedFromAFileChecksEachPlanWholeAndKeepsItsOwnStage) {
  auto dir = testing::temp_dir("cursor-frontier");
  plan::Plan fast = make_test_plan(), slow = make_test_plan();
  slow.time_s = 2, slow.energy_j = 80;
  for (auto& ins : slow.stages[1]) ins.freq_mhz = 600;
  plan::write_plan_set({fast, slow}, {0, 1}, dir / "plans.json");
  for (int stage : {0, 1}) {
    PlanCursor read = PlanCursor::open_frontier(dir / "plans.json", stage, nullptr);
    PlanCursor built({fast, slow}, 0, stage, nullptr, "plans.json");
    ASSERT_EQ(read.frontier_size(), 2u);
    for (std::size_t k = 0; k < built.instructions_per_iteration(); ++k) {
      EXPECT_EQ(read.instruction(k), built.instruction(k)) << stage << " " << k;
    }
    EXPECT_EQ(read.set_target_time(2.0, 0), 1u);
    EXPECT_EQ(read.instruction(0).freq_mhz, stage == 1 ? 600 : fast.stages[0][0].freq_mhz);
    for (std::size_t s = 0; s < read.plan().stages.size(); ++s) {
      EXPECT_EQ(read.plan().stages[s].empty(), static_cast<int>(s) != stage) << stage << " " << s;
    }
  }
  // A plan at fault in a stage this rank does not run is still refused, by its place in the set.
  plan::Plan bad = slow;
  bad.stages[1][2].freq_mhz = -5;
  plan::write_plan_set({fast, bad}, {0, 1}, dir / "bad.json");
  EXPECT_TRUE(Contains(testing::input_error_of([&] { PlanCursor::open_frontier(dir / "bad.json", 0, nullptr); }),
                       "plans[1]: field 'stages[1].instructions[2].freq_mhz'"));
  plan::write_plan_set({fast, make_test_plan(2, 3)}, {0, 1}, dir / "mixed.json");
  EXPECT_TRUE(Contains(testing::input_error_of([&] { PlanCursor::open_frontier(dir / "mixed.json", 0, nullptr); }),
                       "a set's plans must be of one job"));
  EXPECT_FALSE(testing::input_error_of([&] { PlanCursor::open_frontier(dir / "plans.json", 2, nullptr); }).empty())
      << "no stage 2";
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kareus::runtime
