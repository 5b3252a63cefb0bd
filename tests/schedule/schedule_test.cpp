#include "kareus/schedule/schedule.hpp"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <set>

#include "kareus/core/error.hpp"
#include "kareus/schedule/dag.hpp"

namespace kareus::schedule {
namespace {

TEST(Schedule, OneFOneBMatchesPerseusOrderOnFourStages) {
  auto s = PipelineSchedule::make(ScheduleKind::k1F1B, 4, 4);
  auto render = [&](int stage) {
    std::string out;
    for (const Instruction& i : s.stage_order(stage)) {
      out.append(i.type == InstructionType::kForward ? "F" : "B").append(std::to_string(i.microbatch)).append(" ");
    }
    return out;
  };
  EXPECT_EQ(render(0), "F0 F1 F2 F3 B0 B1 B2 B3 ");
  EXPECT_EQ(render(1), "F0 F1 F2 B0 F3 B1 B2 B3 ");
  EXPECT_EQ(render(2), "F0 F1 B0 F2 B1 F3 B2 B3 ");
  EXPECT_EQ(render(3), "F0 B0 F1 B1 F2 B2 F3 B3 ");
}

RC_GTEST_PROP(Schedule, EveryStageRunsEveryInstructionOnce, ()) {
  const int stages = *rc::gen::inRange(1, 9);
  const int microbatches = *rc::gen::inRange(1, 17);
  for (ScheduleKind kind : {ScheduleKind::k1F1B, ScheduleKind::kGPipe}) {
    auto s = PipelineSchedule::make(kind, stages, microbatches);
    for (int stage = 0; stage < stages; ++stage) {
      std::set<std::pair<int, int>> seen;
      int next_forward = 0, next_backward = 0;
      for (const Instruction& i : s.stage_order(stage)) {
        RC_ASSERT(i.stage == stage);
        RC_ASSERT(seen.insert({static_cast<int>(i.type), i.microbatch}).second);
        // Microbatches run in order, and a backward never precedes its forward on a stage.
        if (i.type == InstructionType::kForward) RC_ASSERT(i.microbatch == next_forward++);
        if (i.type == InstructionType::kBackward) {
          RC_ASSERT(i.microbatch == next_backward++);
          RC_ASSERT(next_backward <= next_forward);
        }
      }
      RC_ASSERT(static_cast<int>(seen.size()) == 2 * microbatches);
    }
    // The DAG builds (its constructor checks acyclicity) and has one node per instruction.
    InstructionDag dag(s);
    RC_ASSERT(dag.num_nodes() == s.num_instructions());
  }
}

TEST(Dag, MakespanOfUniformOneFOneBIsTheTextbookFormula) {
  // With forward f and backward b everywhere, 1F1B takes (M + S − 1)·(f + b).
  const int stages = 4, microbatches = 6;
  auto s = PipelineSchedule::make(ScheduleKind::k1F1B, stages, microbatches);
  InstructionDag dag(s);
  std::vector<long> durations;
  for (const Instruction& i : dag.instructions()) durations.push_back(i.type == InstructionType::kForward ? 2 : 3);
  EXPECT_EQ(dag.makespan<long>(durations), (microbatches + stages - 1) * 5);
}

TEST(Dag, EdgesFollowTheDependencyRules) {
  auto s = PipelineSchedule::make(ScheduleKind::k1F1B, 3, 3);
  InstructionDag dag(s);
  auto has_edge = [&](const Instruction& a, const Instruction& b) {
    for (std::size_t e = 0; e < dag.num_edges(); ++e) {
      if (dag.instruction(dag.edge_from(e)) == a && dag.instruction(dag.edge_to(e)) == b) return true;
    }
    return false;
  };
  EXPECT_TRUE(has_edge({0, InstructionType::kForward, 1}, {1, InstructionType::kForward, 1}));
  EXPECT_TRUE(has_edge({2, InstructionType::kBackward, 2}, {1, InstructionType::kBackward, 2}));
  EXPECT_TRUE(has_edge({2, InstructionType::kForward, 0}, {2, InstructionType::kBackward, 0}));
  EXPECT_FALSE(has_edge({0, InstructionType::kForward, 0}, {2, InstructionType::kForward, 0}));
}

TEST(Schedule, RejectsEmptyPipelines) {
  EXPECT_THROW(PipelineSchedule::make(ScheduleKind::k1F1B, 0, 4), InputError);
  EXPECT_THROW(PipelineSchedule::make(ScheduleKind::kGPipe, 2, 0), InputError);
}

}  // namespace
}  // namespace kareus::schedule
