// The interleaved and zero-bubble schedules against their published orders, for 2–16 stages:
// a reference built a different way from each source's description, hand-written orders from
// the published figures, and the published bubble formulas on the schedules' DAGs.
#include <gtest/gtest.h>

#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "kareus/core/error.hpp"
#include "kareus/schedule/dag.hpp"
#include "kareus/schedule/schedule.hpp"

namespace kareus::schedule {
namespace {

std::string render(const PipelineSchedule& s, int stage) {
  std::string out;
  for (const Instruction& i : s.stage_order(stage)) {
    if (i.type == InstructionType::kForward) out += "F";
    else if (i.part == BackwardPart::kWeightGradient) out += "W";
    else out += "B";
    out += std::to_string(i.microbatch);
    if (s.num_chunks() > 1) out.append(".").append(std::to_string(i.chunk));
    out += " ";
  }
  return out;
}

// Narayanan et al. (SC'21) and Megatron-LM: microbatches go through a GPU's chunks in groups of
// S: group g runs microbatches g·S..g·S+S-1 through chunk 0, then through chunk 1, ...; backwards
// go through the chunks in reverse. Warm-up forwards (S-s-1)·2 + (V-1)·S, capped at M·V (all of
// them when M = S), then one forward and one backward alternate, then the remaining backwards.
std::vector<Instruction> megatron_reference(int stages, int microbatches, int chunks, int stage) {
  std::deque<Instruction> forwards, backwards;
  for (int g = 0; g < microbatches / stages; ++g) {
    for (int c = 0; c < chunks; ++c) {
      for (int j = 0; j < stages; ++j) {
        forwards.push_back({stage, InstructionType::kForward, g * stages + j, c});
        backwards.push_back({stage, InstructionType::kBackward, g * stages + j, chunks - 1 - c});
      }
    }
  }
  const int total = microbatches * chunks;
  int warmup = (stages - stage - 1) * 2 + (chunks - 1) * stages;
  if (microbatches == stages || warmup > total) warmup = total;
  std::vector<Instruction> order;
  auto take = [&](std::deque<Instruction>& from) {
    order.push_back(from.front());
    from.pop_front();
  };
  for (int k = 0; k < warmup; ++k) take(forwards);
  while (!forwards.empty()) {
    take(forwards);
    take(backwards);
  }
  while (!backwards.empty()) take(backwards);
  return order;
}

TEST(InterleavedSchedule, MatchesMegatronOnTwoStagesTwoChunks) {
  auto s = PipelineSchedule::make(ScheduleKind::kInterleaved1F1B, 2, 4, 2);
  EXPECT_EQ(render(s, 0), "F0.0 F1.0 F0.1 F1.1 F2.0 B0.1 F3.0 B1.1 F2.1 B0.0 F3.1 B1.0 B2.1 B3.1 B2.0 B3.0 ");
  EXPECT_EQ(render(s, 1), "F0.0 F1.0 F0.1 B0.1 F1.1 B1.1 F2.0 B0.0 F3.0 B1.0 F2.1 B2.1 F3.1 B3.1 B2.0 B3.0 ");
}

TEST(InterleavedSchedule, RunsEveryForwardFirstWhenMicrobatchesEqualStages) {
  auto s = PipelineSchedule::make(ScheduleKind::kInterleaved1F1B, 2, 2, 2);
  EXPECT_EQ(render(s, 1), "F0.0 F1.0 F0.1 F1.1 B0.1 B1.1 B0.0 B1.0 ");
}

TEST(InterleavedSchedule, MatchesTheReferenceForTwoToSixteenStages) {
  for (int stages = 2; stages <= 16; ++stages) {
    for (int chunks : {2, 3, 4}) {
      for (int groups : {1, 2, 3}) {
        const int microbatches = groups * stages;
        auto s = PipelineSchedule::make(ScheduleKind::kInterleaved1F1B, stages, microbatches, chunks);
        for (int stage = 0; stage < stages; ++stage) {
          auto expected = megatron_reference(stages, microbatches, chunks, stage);
          auto got = s.stage_order(stage);
          ASSERT_EQ(std::vector<Instruction>(got.begin(), got.end()), expected)
              << "S=" << stages << " V=" << chunks << " M=" << microbatches << " stage " << stage;
        }
        InstructionDag dag(s);  // checks every dependency exists and there is no cycle
        ASSERT_EQ(dag.num_nodes(), static_cast<std::size_t>(2 * stages * chunks * microbatches));
      }
    }
  }
}

TEST(InterleavedSchedule, BubbleShrinksByTheNumberOfChunks) {
  // Narayanan et al.: with a chunk's forward f/V and backward b/V, the interleaved schedule's
  // bubble is (S-1)·(f+b)/V: the iteration takes (M·V + S - 1)·(f+b)/V.
  for (int stages = 2; stages <= 16; ++stages) {
    for (int chunks : {2, 4}) {
      const int microbatches = 2 * stages;
      auto s = PipelineSchedule::make(ScheduleKind::kInterleaved1F1B, stages, microbatches, chunks);
      InstructionDag dag(s);
      std::vector<long> durations;
      for (const Instruction& i : dag.instructions()) durations.push_back(i.type == InstructionType::kForward ? 1 : 2);
      EXPECT_EQ(dag.makespan<long>(durations), (microbatches * chunks + stages - 1) * 3)
          << "S=" << stages << " V=" << chunks;
    }
  }
}

TEST(InterleavedSchedule, ChunksFollowEachOtherAcrossTheLastStage) {
  auto s = PipelineSchedule::make(ScheduleKind::kInterleaved1F1B, 3, 3, 2);
  InstructionDag dag(s);
  auto has_edge = [&](const Instruction& a, const Instruction& b) {
    for (std::size_t e = 0; e < dag.num_edges(); ++e) {
      if (dag.instruction(dag.edge_from(e)) == a && dag.instruction(dag.edge_to(e)) == b) return true;
    }
    return false;
  };
  const auto F = InstructionType::kForward, B = InstructionType::kBackward;
  EXPECT_TRUE(has_edge({2, F, 1, 0}, {0, F, 1, 1}));  // virtual stage 2 -> 3
  EXPECT_TRUE(has_edge({0, B, 1, 1}, {2, B, 1, 0}));  // backward of virtual stage 3 -> 2
  EXPECT_TRUE(has_edge({2, F, 0, 1}, {2, B, 0, 1}));  // the last virtual stage turns around
  EXPECT_FALSE(has_edge({2, F, 0, 0}, {2, B, 0, 0}));
}

TEST(InterleavedSchedule, RejectsWhatMegatronRejects) {
  EXPECT_THROW(PipelineSchedule::make(ScheduleKind::kInterleaved1F1B, 4, 6, 2), InputError);
  EXPECT_THROW(PipelineSchedule::make(ScheduleKind::kInterleaved1F1B, 4, 8, 1), InputError);
  EXPECT_THROW(PipelineSchedule::make(ScheduleKind::k1F1B, 4, 8, 2), InputError);
}

TEST(ZeroBubbleH1, MatchesThePapersFigureOnFourStages) {
  // Qi et al., ICLR 2024, the ZB-H1 figure: 4 stages; stage s defers s weight gradients to the end.
  auto s = PipelineSchedule::make(ScheduleKind::kZeroBubbleH1, 4, 8);
  EXPECT_EQ(render(s, 0), "F0 F1 F2 F3 B0 W0 F4 B1 W1 F5 B2 W2 F6 B3 W3 F7 B4 W4 B5 W5 B6 W6 B7 W7 ");
  EXPECT_EQ(render(s, 3), "F0 B0 F1 B1 F2 B2 F3 B3 W0 F4 B4 W1 F5 B5 W2 F6 B6 W3 F7 B7 W4 W5 W6 W7 ");
  EXPECT_EQ(render(s, 1), "F0 F1 F2 B0 F3 B1 W0 F4 B2 W1 F5 B3 W2 F6 B4 W3 F7 B5 W4 B6 W5 B7 W6 W7 ");
}

TEST(ZeroBubbleH1, IsOneFOneBWithWeightGradientsDeferredForTwoToSixteenStages) {
  for (int stages = 2; stages <= 16; ++stages) {
    for (int microbatches : {1, stages - 1, stages, 2 * stages + 1}) {
      if (microbatches < 1) continue;
      auto zb = PipelineSchedule::make(ScheduleKind::kZeroBubbleH1, stages, microbatches);
      auto plain = PipelineSchedule::make(ScheduleKind::k1F1B, stages, microbatches);
      for (int stage = 0; stage < stages; ++stage) {
        std::vector<std::pair<InstructionType, int>> without_w, one_f_one_b;
        int next_w = 0, in_flight = 0, peak = 0, b_done = 0;
        for (const Instruction& i : zb.stage_order(stage)) {
          if (i.type == InstructionType::kForward) {
            peak = std::max(peak, ++in_flight);
          } else if (i.part == BackwardPart::kWeightGradient) {
            ASSERT_EQ(i.microbatch, next_w++);  // W's in microbatch order, each after its B
            ASSERT_LT(i.microbatch, b_done);
            --in_flight;  // a microbatch's activations are freed after its W
          } else {
            ASSERT_EQ(i.part, BackwardPart::kInputGradient);
            ++b_done;
          }
          if (i.part != BackwardPart::kWeightGradient) without_w.emplace_back(i.type, i.microbatch);
        }
        for (const Instruction& i : plain.stage_order(stage)) one_f_one_b.emplace_back(i.type, i.microbatch);
        ASSERT_EQ(without_w, one_f_one_b) << "S=" << stages << " M=" << microbatches << " stage " << stage;
        ASSERT_EQ(next_w, microbatches);
        // The peak memory of 1F1B (its first stage's): at most S microbatches wait for their W.
        ASSERT_LE(peak, std::min(stages, microbatches));
      }
      InstructionDag dag(zb);
      ASSERT_EQ(dag.num_nodes(), static_cast<std::size_t>(3 * stages * microbatches));
    }
  }
}

TEST(ZeroBubbleH1, BubbleIsAThirdOfOneFOneBsWithEqualPasses) {
  // Qi et al.: with T_F = T_B = T_W, ZB-H1's bubble is (S-1)·(T_F + T_B - T_W) against 1F1B's
  // (S-1)·(T_F + T_B + T_W).
  for (int stages = 2; stages <= 16; ++stages) {
    const int microbatches = 2 * stages;
    auto s = PipelineSchedule::make(ScheduleKind::kZeroBubbleH1, stages, microbatches);
    InstructionDag dag(s);
    std::vector<long> unit(dag.num_nodes(), 1);
    EXPECT_EQ(dag.makespan<long>(unit), 3 * microbatches + (stages - 1)) << "S=" << stages;
  }
}

TEST(ZeroBubbleH1, WeightGradientsWaitOnlyForTheirInputGradient) {
  auto s = PipelineSchedule::make(ScheduleKind::kZeroBubbleH1, 3, 3);
  InstructionDag dag(s);
  for (std::size_t e = 0; e < dag.num_edges(); ++e) {
    const Instruction& from = dag.instruction(dag.edge_from(e));
    const Instruction& to = dag.instruction(dag.edge_to(e));
    if (from.part == BackwardPart::kWeightGradient || to.part == BackwardPart::kWeightGradient) {
      EXPECT_EQ(from.stage, to.stage);
    }
  }
}

TEST(Schedule, NamesRoundTrip) {
  for (ScheduleKind kind : {ScheduleKind::k1F1B, ScheduleKind::kGPipe, ScheduleKind::kInterleaved1F1B,
                            ScheduleKind::kZeroBubbleH1}) {
    EXPECT_EQ(parse_schedule_kind(to_string(kind)), kind);
  }
  EXPECT_FALSE(parse_schedule_kind("zb-h2").has_value());
}

}  // namespace
}  // namespace kareus::schedule
