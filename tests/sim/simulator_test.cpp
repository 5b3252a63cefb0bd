// The event simulator against closed forms it must meet: the plan itself when nothing is added,
// the textbook pipeline with transfer time, a clock change that arrives late, seeded jitter, the
// three alignments of clock requests against the GPU's work; and the trace it writes.
#include "kareus/planner/make_plan.hpp"
#include "kareus/sim/simulator.hpp"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "kareus/core/error.hpp"
#include "kareus/pipeline/frontier_solver.hpp"
#include "kareus/sim/trace.hpp"

namespace kareus::sim {
namespace {

using schedule::InstructionType;
using schedule::ScheduleKind;

// A plan through the real producer (planner::make_plan on frontier point `which` of the solver) on a
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
          table.at(s, schedule::OptionSlot::kBackwardInput).push_back({f, 0.6 * time, 0.6 * power * time, nullptr});
          table.at(s, schedule::OptionSlot::kBackwardWeight).push_back({f, 0.4 * time, 0.4 * power * time, nullptr});
        }
      }
    }
  }
  if (chunks > 1) table = pipeline::chunk_option_table(table, chunks);
  auto schedule = schedule::PipelineSchedule::make(kind, stages, microbatches, chunks);
  auto front = pipeline::solve_frontier(table, schedule, {.p_blocking_w = 80, .unit_time_s = 1e-4});
  schedule::InstructionDag dag(schedule);
  const auto& point = front.points.at(std::min(which, front.points.size() - 1));
  return planner::make_plan(table, dag, point, {kind, microbatches, 80, 1e-4, nullptr});
}

TEST(Simulator, NothingAddedIsThePlan) {
  for (auto [kind, chunks] : {std::pair{ScheduleKind::k1F1B, 1}, std::pair{ScheduleKind::kGPipe, 1},
                              std::pair{ScheduleKind::kInterleaved1F1B, 2}, std::pair{ScheduleKind::kZeroBubbleH1, 1}}) {
    for (std::size_t which : {0u, 3u, 100u}) {
      const plan::Plan plan = solved_plan(kind, 3, 6, chunks, which);
      const SimulationResult r = simulate(plan, {});
      EXPECT_DOUBLE_EQ(r.time_s, plan.time_s) << schedule::to_string(kind) << " " << which;
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

// One stage, two instructions back to back: forward 10 ms at 1410 MHz, backward 20 ms at 705.
plan::Plan two_instruction_plan() {
  plan::Plan plan;
  plan.schedule = ScheduleKind::k1F1B;
  plan.num_stages = 1;
  plan.num_microbatches = 1;
  plan.p_blocking_w = 50;
  plan.stages = {{{InstructionType::kForward, 0, 1410, nullptr, 0.010, 3.0},
                  {InstructionType::kBackward, 0, 705, nullptr, 0.020, 4.0}}};
  plan.time_s = 0.030;
  plan.energy_j = 7.0;
  return plan;
}

TEST(Simulator, ALateClockRunsTheStartOfItsInstructionAtTheOldClock) {
  // Two instructions back to back on one stage: forward at 1410 MHz for 10 ms, backward at 705
  // for 20 ms. The backward's clock is asked for when the forward ends and arrives 4 ms later:
  // for those 4 ms it runs at 1410, twice its rate, doing 8 ms of its work; 12 ms remain.
  const plan::Plan plan = two_instruction_plan();
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

// A random plan of any schedule through solved_plan, for the properties.
plan::Plan any_plan() {
  const auto [kind, chunks] = *rc::gen::element(std::pair{ScheduleKind::k1F1B, 1}, std::pair{ScheduleKind::kGPipe, 1},
                                                std::pair{ScheduleKind::kInterleaved1F1B, 2},
                                                std::pair{ScheduleKind::kZeroBubbleH1, 1});
  const int stages = *rc::gen::inRange(1, 5);
  const int microbatches = chunks > 1 ? stages * *rc::gen::inRange(1, 3) : *rc::gen::inRange(1, 7);
  return solved_plan(kind, stages, microbatches, chunks, *rc::gen::inRange<std::size_t>(0, 40));
}

SimulationOptions any_options() {
  SimulationOptions options;
  options.transfer_bytes = *rc::gen::inRange(0, 100) * 1e6;
  options.link = [](int, int) { return Link{25e9, 1e-5}; };
  options.clock_switch_latency_s = *rc::gen::inRange(0, 20) * 1e-3;
  options.jitter = *rc::gen::element(0.0, 0.02);
  options.seed = *rc::gen::inRange<std::uint64_t>(1, 1000);
  return options;
}

TEST(Simulator, TheThreeAlignmentsOnTwoInstructions) {
  // The plan of ALateClockRunsTheStartOfItsInstructionAtTheOldClock: forward 10 ms at 1410 MHz, backward 20 ms at 705, each
  // including e = 1 ms of host exposure; the switch takes 4 ms.
  const plan::Plan plan = two_instruction_plan();
  SimulationOptions options{.clock_switch_latency_s = 0.004, .exposed_host_s = 0.001};
  auto run = [&](Alignment a) {
    options.alignment = a;
    return simulate(plan, options);
  };
  // Synced: the forward as planned; the backward's clock, asked for at 10 ms, lands at 14: it
  // idles 1 ms, runs 3 ms at twice its rate (6 ms of its 19), then 13 ms at its own clock.
  const SimulationResult sync = run(Alignment::kSync);
  EXPECT_NEAR(sync.time_s, 0.027, 1e-15);
  EXPECT_NEAR(sync.instructions[1].old_clock_s, 0.003, 1e-15);
  EXPECT_EQ(sync.instructions[1].exposed_s, 0.001);
  EXPECT_EQ(sync.late_clock_changes, 1);
  // GPU-timed: no exposure; asked for at 9 ms, landing at 13: 4 ms at 1410 (8 ms of work), 11 more.
  const SimulationResult gpu = run(Alignment::kGpuTimed);
  EXPECT_NEAR(gpu.time_s, 0.009 + 0.004 + 0.011, 1e-15);
  EXPECT_EQ(gpu.early_clock_changes, 0);
  // Host-timed, one instruction ahead: the backward's clock is asked for as the forward starts and
  // lands at 4 ms, so the forward's last 5 ms of work take 10 at half its clock; the backward 19.
  const SimulationResult host = run(Alignment::kHostTimed);
  EXPECT_NEAR(host.time_s, 0.004 + 0.010 + 0.019, 1e-15);
  EXPECT_NEAR(host.instructions[0].early_clock_s, 0.010, 1e-15);
  EXPECT_EQ(host.instructions[0].early_freq_mhz, 705);
  EXPECT_EQ(host.early_clock_changes, 1);
  EXPECT_EQ(host.late_clock_changes, 0);
  // The dynamic energy is the plan's in every alignment, P_blocking over the realised time.
  for (const SimulationResult* r : {&sync, &gpu, &host}) {
    EXPECT_NEAR(r->energy_j, 7.0 - 50 * 0.030 + 50 * r->time_s, 1e-12);
  }
}

RC_GTEST_PROP(Simulator, WithoutExposureSyncIsGpuTimedToTheBit, ()) {
  const plan::Plan plan = any_plan();
  SimulationOptions options = any_options();
  options.alignment = Alignment::kSync;
  const SimulationResult sync = simulate(plan, options);
  options.alignment = Alignment::kGpuTimed;
  const SimulationResult gpu = simulate(plan, options);
  RC_ASSERT(sync.time_s == gpu.time_s);
  RC_ASSERT(sync.energy_j == gpu.energy_j);
  RC_ASSERT(sync.late_clock_changes == gpu.late_clock_changes);
  for (std::size_t k = 0; k < sync.instructions.size(); ++k) {
    RC_ASSERT(sync.instructions[k].start_s == gpu.instructions[k].start_s);
    RC_ASSERT(sync.instructions[k].end_s == gpu.instructions[k].end_s);
  }
}

TEST(Simulator, SyncHidesASwitchLatencyUpToTheExposure) {
  constexpr double kExposureS = 40e-6;
  for (auto [kind, chunks] : {std::pair{ScheduleKind::k1F1B, 1}, std::pair{ScheduleKind::kGPipe, 1},
                              std::pair{ScheduleKind::kInterleaved1F1B, 2}, std::pair{ScheduleKind::kZeroBubbleH1, 1}}) {
    for (std::size_t which : {0u, 3u, 100u}) {
      const plan::Plan plan = solved_plan(kind, 3, 6, chunks, which);
      for (double latency_s : {0.0, 25e-6, kExposureS}) {
        const SimulationResult r = simulate(
            plan, {.clock_switch_latency_s = latency_s, .alignment = Alignment::kSync, .exposed_host_s = kExposureS});
        EXPECT_EQ(r.late_clock_changes, 0) << schedule::to_string(kind) << " " << which << " " << latency_s;
        EXPECT_EQ(r.early_clock_changes, 0);
        EXPECT_DOUBLE_EQ(r.time_s, plan.time_s);
        EXPECT_NEAR(r.energy_j, plan.energy_j, 1e-9 * plan.energy_j);
      }
    }
  }
  // The check has something to hide: the fastest plans change clocks.
  EXPECT_GT(simulate(solved_plan(ScheduleKind::k1F1B, 3, 6, 1, 3), {}).clock_changes, 0);
}

RC_GTEST_PROP(Simulator, GpuTimedIsNeverSlowerThanSyncWithoutSwitchLatency, ()) {
  const plan::Plan plan = any_plan();
  SimulationOptions options = any_options();
  options.clock_switch_latency_s = 0;
  options.exposed_host_s = *rc::gen::inRange(0, 1000) * 1e-6;
  options.alignment = Alignment::kSync;
  const SimulationResult sync = simulate(plan, options);
  options.alignment = Alignment::kGpuTimed;
  const SimulationResult gpu = simulate(plan, options);
  RC_ASSERT(gpu.time_s <= sync.time_s);
  RC_ASSERT(gpu.energy_j <= sync.energy_j);
}

RC_GTEST_PROP(Simulator, OnlyHostTimedClocksLandEarly, ()) {
  const plan::Plan plan = any_plan();
  SimulationOptions options = any_options();
  options.exposed_host_s = *rc::gen::inRange(0, 1000) * 1e-6;
  for (Alignment a : {Alignment::kSync, Alignment::kGpuTimed}) {
    options.alignment = a;
    const SimulationResult r = simulate(plan, options);
    RC_ASSERT(r.early_clock_changes == 0);
    for (const SimulatedInstruction& i : r.instructions) RC_ASSERT(i.early_clock_s == 0.0);
  }
  // A switch shorter than any instruction lands on the instruction before the one it is for.
  options.alignment = Alignment::kHostTimed;
  options.host_lead_instructions = *rc::gen::inRange(1, 5);
  options.clock_switch_latency_s = *rc::gen::inRange(0, 5) * 1e-3;
  options.jitter = 0;
  const SimulationResult host = simulate(plan, options);
  options.alignment = Alignment::kGpuTimed;
  const long changes = simulate(plan, options).clock_changes;
  RC_ASSERT(host.clock_changes == changes);
  RC_ASSERT((host.early_clock_changes > 0) == (changes > 0));
}

TEST(Simulator, AlignmentsByNameAndBadOptions) {
  for (Alignment a : {Alignment::kSync, Alignment::kGpuTimed, Alignment::kHostTimed}) {
    EXPECT_EQ(parse_alignment(to_string(a)), a);
  }
  auto message = [](auto&& call) {
    try {
      call();
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(message([] { parse_alignment("nope"); }).find("--alignment"), std::string::npos);
  const plan::Plan plan = solved_plan(ScheduleKind::k1F1B, 2, 2, 1, 0);
  EXPECT_NE(message([&] { simulate(plan, {.host_lead_instructions = 0}); }).find("--host-lead"), std::string::npos);
  EXPECT_NE(message([&] { simulate(plan, {.exposed_host_s = -1}); }).find("--engine"), std::string::npos);
  // An exposure as long as an instruction: the plan was not composed under that engine.
  EXPECT_NE(message([&] { simulate(plan, {.exposed_host_s = 1}); }).find("stages[0].instructions[0].time_s"),
            std::string::npos);
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
