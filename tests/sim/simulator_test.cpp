// The event simulator against closed forms it must meet: the plan itself when nothing is added,
// the textbook pipeline with transfer time, a clock change that arrives late, seeded jitter; and
// the trace it writes.
#include "kareus/sim/simulator.hpp"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "kareus/core/error.hpp"
#include "kareus/pipeline/frontier_solver.hpp"
#include "kareus/sim/trace.hpp"

namespace kareus::sim {
namespace {

using pipeline::InstructionType;
using pipeline::ScheduleKind;

// A plan through the real producer (plan::make_plan on frontier point `which` of the solver) on a
// table of three clocks per instruction, time in inverse proportion to the clock.
plan::Plan solved_plan(ScheduleKind kind, int stages, int microbatches, int chunks, std::size_t which) {
  pipeline::OptionTable table;
  table.options.resize(static_cast<std::size_t>(stages));
  for (int s = 0; s < stages; ++s) {
    for (InstructionType t : {InstructionType::kForward, InstructionType::kBackward}) {
      const double base = (t == InstructionType::kForward ? 0.010 : 0.020) * (1 + 0.1 * s);
      for (double f : {1410.0, 1200.0, 1005.0}) {
        const double time = base * 1410.0 / f, power = 90 + 300 * (f / 1410.0) * (f / 1410.0);
        table.at(s, t).push_back({f, time, power * time, nullptr});
        if (t == InstructionType::kBackward) {  // zb-h1's B and W: 60% and 40% of it
          table.at(s, pipeline::OptionSlot::kBackwardInput).push_back({f, 0.6 * time, 0.6 * power * time, nullptr});
          table.at(s, pipeline::OptionSlot::kBackwardWeight).push_back({f, 0.4 * time, 0.4 * power * time, nullptr});
        }
      }
    }
  }
  if (chunks > 1) table = pipeline::chunk_option_table(table, chunks);
  auto schedule = pipeline::PipelineSchedule::make(kind, stages, microbatches, chunks);
  auto front = pipeline::solve_frontier(table, schedule, {.p_blocking_w = 80, .unit_time_s = 1e-4});
  pipeline::InstructionDag dag(schedule);
  const auto& point = front.points.at(std::min(which, front.points.size() - 1));
  return plan::make_plan(table, dag, point, {kind, microbatches, 80, 1e-4, nullptr});
}

TEST(Simulator, NothingAddedIsThePlan) {
  for (auto [kind, chunks] : {std::pair{ScheduleKind::k1F1B, 1}, std::pair{ScheduleKind::kGPipe, 1},
                              std::pair{ScheduleKind::kInterleaved1F1B, 2}, std::pair{ScheduleKind::kZeroBubbleH1, 1}}) {
    for (std::size_t which : {0u, 3u, 100u}) {
      const plan::Plan plan = solved_plan(kind, 3, 6, chunks, which);
      const SimulationResult r = simulate(plan, {});
      EXPECT_DOUBLE_EQ(r.time_s, plan.time_s) << pipeline::to_string(kind) << " " << which;
      EXPECT_NEAR(r.energy_j, plan.energy_j, 1e-9 * plan.energy_j);
      EXPECT_TRUE(r.transfers.empty());
    }
  }
}

TEST(Simulator, TransfersAddTheirTimeOnEveryStageBoundary) {
  // One microbatch through S stages at one clock: S forwards, S backwards, and 2(S−1) transfers
  // of latency + bytes/bandwidth on the critical path.
  const plan::Plan plan = solved_plan(ScheduleKind::k1F1B, 4, 1, 1, 0);
  const Link link{1e9, 5e-6};
  const double bytes = 2e6;
  SimulationOptions options{.transfer_bytes = bytes, .link = [&](int, int) { return link; }};
  const SimulationResult r = simulate(plan, options);
  EXPECT_NEAR(r.time_s, plan.time_s + 2 * 3 * (5e-6 + bytes / 1e9), 1e-12);
  EXPECT_EQ(r.transfers.size(), 6u);
  // Idle GPUs draw P_blocking for the longer iteration, nothing else changes.
  EXPECT_NEAR(r.energy_j - plan.energy_j, 80.0 * 4 * (r.time_s - plan.time_s), 1e-9);
}

TEST(Simulator, ALateClockRunsTheStartOfItsInstructionAtTheOldClock) {
  // Two instructions back to back on one stage: forward at 1410 MHz for 10 ms, backward at 705
  // for 20 ms. The backward's clock is asked for when the forward ends and arrives 4 ms later:
  // for those 4 ms it runs at 1410, twice its rate, doing 8 ms of its work; 12 ms remain.
  plan::Plan plan;
  plan.schedule = ScheduleKind::k1F1B;
  plan.num_stages = 1;
  plan.num_microbatches = 1;
  plan.p_blocking_w = 50;
  plan.stages = {{{InstructionType::kForward, 0, 1410, nullptr, 0.010, 3.0},
                  {InstructionType::kBackward, 0, 705, nullptr, 0.020, 4.0}}};
  plan.time_s = 0.030;
  plan.energy_j = 7.0;
  const SimulationResult r = simulate(plan, {.clock_switch_latency_s = 0.004});
  EXPECT_NEAR(r.time_s, 0.010 + 0.004 + 0.012, 1e-15);
  EXPECT_EQ(r.clock_changes, 1);
  EXPECT_EQ(r.late_clock_changes, 1);
  EXPECT_NEAR(r.instructions[1].old_clock_s, 0.004, 1e-15);
  // Dynamic energy is the plan's; P_blocking over the 26 ms instead of 30.
  EXPECT_NEAR(r.energy_j, 7.0 - 50 * 0.030 + 50 * 0.026, 1e-12);
  // A latency longer than the instruction: all of it at the old clock, 10 ms.
  EXPECT_NEAR(simulate(plan, {.clock_switch_latency_s = 0.5}).time_s, 0.020, 1e-15);
}

RC_GTEST_PROP(Simulator, TransfersNeverSpeedUpAndLateClocksStayBetweenBothClocks, ()) {
  const int stages = *rc::gen::inRange(1, 5);
  const plan::Plan plan = solved_plan(ScheduleKind::k1F1B, stages, *rc::gen::inRange(1, 7), 1,
                                      *rc::gen::inRange<std::size_t>(0, 40));
  const double bytes = *rc::gen::inRange(0, 100) * 1e6;
  SimulationOptions options{.transfer_bytes = bytes, .link = [](int, int) { return Link{25e9, 1e-5}; }};
  const SimulationResult waits = simulate(plan, options);
  RC_ASSERT(waits.time_s >= plan.time_s - 1e-12);
  RC_ASSERT(waits.energy_j >= plan.energy_j - 1e-9 * plan.energy_j);
  // A clock that arrives late can make an instruction faster (the old clock was higher) or
  // slower, never beyond what either clock alone would take.
  options.clock_switch_latency_s = *rc::gen::inRange(1, 20) * 1e-3;
  const SimulationResult late = simulate(plan, options);
  for (const SimulatedInstruction& i : late.instructions) {
    const double planned = plan.stages[static_cast<std::size_t>(i.stage)][i.position].time_s;
    const double at_old = planned * i.freq_mhz / i.old_freq_mhz;
    const double took = i.end_s - i.start_s;
    RC_ASSERT(took >= std::min(planned, at_old) * (1 - 1e-12));
    RC_ASSERT(took <= std::max(planned, at_old) * (1 + 1e-12));
    if (i.old_clock_s == 0) RC_ASSERT(std::abs(took - planned) <= 1e-12 * planned);
  }
  // Every instruction starts after the one before it on its stage.
  for (std::size_t k = 1; k < late.instructions.size(); ++k) {
    if (late.instructions[k].stage == late.instructions[k - 1].stage) {
      RC_ASSERT(late.instructions[k].start_s >= late.instructions[k - 1].end_s - 1e-15);
    }
  }
}

TEST(Simulator, JitterIsSeededAndCentred) {
  const plan::Plan plan = solved_plan(ScheduleKind::k1F1B, 2, 8, 1, 0);
  const auto a = simulate(plan, {.jitter = 0.05, .seed = 7});
  const auto b = simulate(plan, {.jitter = 0.05, .seed = 7});
  const auto c = simulate(plan, {.jitter = 0.05, .seed = 8});
  EXPECT_EQ(a.time_s, b.time_s);
  EXPECT_NE(a.time_s, c.time_s);
  double sum = 0, planned = 0;
  for (const auto& i : a.instructions) {
    sum += i.end_s - i.start_s;
    planned += plan.stages[static_cast<std::size_t>(i.stage)][i.position].time_s;
  }
  EXPECT_NEAR(sum / planned, 1.0, 0.05);
  EXPECT_THROW(simulate(plan, {.jitter = -0.1}), InputError);
}

TEST(Simulator, RejectsAPlanThatDoesNotFollowItsSchedule) {
  plan::Plan plan = solved_plan(ScheduleKind::k1F1B, 2, 2, 1, 0);
  std::swap(plan.stages[1][0], plan.stages[1][1]);
  try {
    simulate(plan, {});
    FAIL() << "accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("stages[1].instructions[0]"), std::string::npos) << e.what();
  }
}

TEST(Trace, OneTrackPerGpuAndPowerBetweenBlockingAndPeak) {
  const plan::Plan plan = solved_plan(ScheduleKind::kInterleaved1F1B, 2, 4, 2, 2);
  const SimulationResult r = simulate(plan, {.transfer_bytes = 1e6, .link = [](int, int) { return Link{25e9, 1e-5}; }});
  const nlohmann::json trace = chrome_trace(plan, r);
  std::size_t slices = 0, sends = 0;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == "X" && e["tid"] == 0) {
      ++slices;
      EXPECT_NEAR(e["ts"].get<double>() + e["dur"].get<double>(), 1e6 * r.instructions[slices - 1].end_s, 1e-6);
    }
    if (e["ph"] == "X" && e["tid"] == 1) ++sends;
    if (e["ph"] == "C") {
      const double w = e["args"]["power_w"].get<double>();
      EXPECT_GE(w, 80 - 1e-9);
      EXPECT_LE(w, 390 + 1e-9);
    }
  }
  EXPECT_EQ(slices, r.instructions.size());
  EXPECT_EQ(sends, r.transfers.size());
  EXPECT_GT(sends, 0u);
}

}  // namespace
}  // namespace kareus::sim
