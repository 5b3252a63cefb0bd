// The solver on the interleaved schedule: its frontier against enumeration, and a stage profile's
// chunks (chunk_option_table).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kareus/core/error.hpp"
#include "kareus/pipeline/frontier_solver.hpp"
#include "kareus/schedule/dag.hpp"
#include "kareus/schedule/schedule.hpp"
#include "pipeline/test_tables.hpp"

namespace kareus::pipeline {
namespace {

using schedule::InstructionDag;
using schedule::OptionSlot;
using schedule::PipelineSchedule;
using schedule::ScheduleKind;

TEST(InterleavedSchedule, FrontierSolverMatchesEnumeration) {
  // The solver takes the interleaved DAG as it is, each chunk with options of its own (here drawn
  // apart). On 2 stages × 2 chunks × 2 microbatches with 2 options each, every one of the 2^16 plans
  // is enumerated.
  const OptionTable first = testing::seeded_table(7, 2, 2), second = testing::seeded_table(8, 2, 2);
  OptionTable table;
  table.chunks = 2;
  for (int s = 0; s < 2; ++s) {
    table.options.push_back(first.options[static_cast<std::size_t>(s)]);
    table.options.push_back(second.options[static_cast<std::size_t>(s)]);
  }
  ASSERT_NE(table.at(0, 0, OptionSlot::kForward), table.at(0, 1, OptionSlot::kForward));
  auto schedule = PipelineSchedule::make(ScheduleKind::kInterleaved1F1B, 2, 2, 2);
  InstructionDag dag(schedule);
  const double p_blocking_w = 80;
  Frontier front = solve_frontier(table, schedule, {.p_blocking_w = p_blocking_w, .unit_time_s = 1e-4});
  ASSERT_FALSE(front.points.empty());
  std::vector<TimeEnergy> all;
  std::vector<std::uint16_t> assignment(dag.num_nodes());
  for (std::size_t bits = 0; bits < (std::size_t{1} << dag.num_nodes()); ++bits) {
    for (std::size_t v = 0; v < dag.num_nodes(); ++v) assignment[v] = static_cast<std::uint16_t>((bits >> v) & 1);
    all.push_back(evaluate_assignment(table, dag, assignment, p_blocking_w));
  }
  for (const FrontierPoint& p : front.points) {
    TimeEnergy te = evaluate_assignment(table, dag, p.assignment, p_blocking_w);
    EXPECT_NEAR(te.time_s, p.time_s, 1e-12);
    EXPECT_NEAR(te.energy_j, p.energy_j, 1e-9);
  }
  // Every enumerated plan is matched by a frontier plan no slower and at most 1% costlier.
  for (const TimeEnergy& e : pareto_front(all)) {
    double best = 1e300;
    for (const FrontierPoint& p : front.points) {
      if (p.time_s <= e.time_s + 1e-12) best = std::min(best, p.energy_j);
    }
    EXPECT_LE(best, e.energy_j * 1.01) << "at " << e.time_s << " s";
  }
}

TEST(InterleavedSchedule, AProfilesChunkRunsAVthOfItsStage) {
  const OptionTable stage = testing::seeded_table(3, 2, 4);
  const OptionTable chunk = chunk_option_table(stage, 4);
  ASSERT_EQ(chunk.chunks, 4);
  ASSERT_EQ(chunk.num_stages(), 2);
  for (int s = 0; s < 2; ++s) {
    for (int c = 0; c < 4; ++c) {
      for (OptionSlot t : {OptionSlot::kForward, OptionSlot::kBackward}) {
        ASSERT_EQ(chunk.at(s, c, t).size(), stage.at(s, t).size());
        for (std::size_t k = 0; k < stage.at(s, t).size(); ++k) {
          EXPECT_DOUBLE_EQ(chunk.at(s, c, t)[k].time_s * 4, stage.at(s, t)[k].time_s);
          EXPECT_DOUBLE_EQ(chunk.at(s, c, t)[k].energy_j * 4, stage.at(s, t)[k].energy_j);
          EXPECT_EQ(chunk.at(s, c, t)[k].freq_mhz, stage.at(s, t)[k].freq_mhz);
        }
      }
    }
  }
  // The solver takes a table only with the schedule's chunks.
  EXPECT_THROW(solve_frontier(stage, PipelineSchedule::make(ScheduleKind::kInterleaved1F1B, 2, 4, 4), {}), InputError);
}

}  // namespace
}  // namespace kareus::pipeline
