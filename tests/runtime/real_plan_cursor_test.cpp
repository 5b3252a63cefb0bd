// The cursors read what the planner writes: the real `kareus plan` makes plan.json and plans.json
// for a small job (with and without full activation checkpointing, and on the zb-h1 and interleaved
// schedules, whose B, W and chunk instructions the runtime must hand out too), and the C++ and C
// cursors walk every stage of them. Every instruction's knobs (partition key -> SMs and launch slot, and the
// recomputed forward's under checkpointing) and clock are checked against the raw JSON the planner
// wrote, read here independently. The frontier cursor's straggler switch is checked against a
// brute-force pick over the same plans.json and against the plan `kareus plan --target deadline:`
// writes. (tests/python checks the Python cursor likewise.)
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cmath>
#include <cstdlib>
#include <map>
#include <utility>

#include "kareus/runtime/fake_gpu.hpp"
#include "kareus/runtime/kareus_runtime.h"
#include "kareus/runtime/plan_cursor.hpp"
#include "runtime/runtime_test_util.hpp"

namespace kareus::runtime {
namespace {

using KnobMap = std::map<std::string, std::pair<std::string, int>>;  // key -> (slot, sms)

// The planner's knob list, read straight from its JSON.
KnobMap raw_knobs(const nlohmann::json& instruction, const char* list) {
  KnobMap out;
  if (!instruction.contains("knob") || !instruction["knob"].contains(list)) return out;
  for (const auto& entry : instruction["knob"][list]) {
    out[entry.at("key").get<std::string>()] = {entry.at("slot").get<std::string>(),
                                               entry.at("sms").get<int>()};
  }
  return out;
}

KnobMap cursor_knobs(const std::vector<plan::PartitionKnob>& list) {
  KnobMap out;
  for (const auto& k : list) out[k.key] = {k.slot, k.sms};
  return out;
}

// The plans the tests read: a name and the `kareus plan` flags that make it.
constexpr std::pair<const char*, const char*> kVariants[] = {
    {"none", "--checkpointing none"},
    {"full", "--checkpointing full"},
    {"zb-h1", "--checkpointing full --schedule zb-h1"},
    {"interleaved", "--checkpointing full --schedule interleaved --virtual-stages 2 --layers-per-stage 14,14"}};

// One run of the real planner per test process, for every test here; removed at exit.
struct Planned {
  std::filesystem::path dir = testing::temp_dir("real-plan");
  Planned() {
    // Llama 3.2 3B, TP 8, PP 2 on the simulated A100, four microbatches: well under a second.
    for (const auto& [name, flags] : kVariants) {
      std::string out = (dir / name).string();
      std::string command = std::string(KAREUS_BINARY) + " plan --plans all --microbatches 4 " + flags +
                            " --out " + out + " >" + out + ".log 2>&1";
      if (std::system(command.c_str()) != 0) {
        ADD_FAILURE() << command << ": " << testing::slurp(out + ".log");
      }
    }
  }
  ~Planned() { std::filesystem::remove_all(dir); }
};

const Planned& planned() {
  static Planned once;
  return once;
}

std::filesystem::path plan_path(const char* checkpointing) {
  return planned().dir / checkpointing / "plan.json";
}
std::filesystem::path plans_path() {
  return planned().dir / "full" / "plans.json";
}
nlohmann::json raw(const std::filesystem::path& path) {
  return nlohmann::json::parse(testing::slurp(path));
}

TEST(RealPlanCursor, CppCursorHandsOutEveryInstructionsKnobsAndClock) {
  for (const auto& [checkpointing, flags] : kVariants) {
    SCOPED_TRACE(checkpointing);
    const nlohmann::json plan = raw(plan_path(checkpointing));
    int recomputing_backwards = 0, knobbed = 0;
    for (int s = 0; s < plan["num_stages"].get<int>(); ++s) {
      auto gpu = std::make_shared<FakeGpu>(make_fake_gpu_config());
      FrequencyController controller({gpu});
      PlanCursor cursor = PlanCursor::open(plan_path(checkpointing), s, &controller);
      const auto& instructions = plan["stages"][s]["instructions"];
      ASSERT_EQ(cursor.instructions_per_iteration(), instructions.size());
      for (std::size_t k = 0; k < instructions.size(); ++k) {
        const auto& ins = instructions[k];
        const CommKnobs& knobs = cursor.on_instruction_begin(ins["type"].get<std::string>(),
                                                             ins["microbatch"].get<int>());
        EXPECT_EQ(cursor_knobs(knobs.partitions), raw_knobs(ins, "partitions")) << s << " " << k;
        EXPECT_EQ(cursor_knobs(knobs.recompute), raw_knobs(ins, "recompute")) << s << " " << k;
        for (const auto& [key, knob] : raw_knobs(ins, "partitions")) {
          ASSERT_NE(knobs.find(key), nullptr) << key;
          EXPECT_EQ(knobs.find(key)->sms, knob.second);
          EXPECT_EQ(knobs.find(key)->slot, knob.first);
        }
        knobbed += !knobs.partitions.empty();
        const bool backward = ins["type"].get<std::string>().starts_with("backward");
        if (!backward) {
          EXPECT_TRUE(knobs.recompute.empty()) << "a forward recomputes nothing";
        }
        recomputing_backwards += backward && !knobs.recompute.empty();
        controller.wait_idle();
        int clock = static_cast<int>(std::lround(ins["freq_mhz"].get<double>()));
        EXPECT_EQ(gpu->locked_sm_clocks_mhz(), (std::pair{clock, clock}));
      }
      cursor.on_step_end();
    }
    EXPECT_GT(knobbed, 0) << "a Kareus plan carries partition knobs";
    if (std::string(checkpointing) != "none") {
      EXPECT_GT(recomputing_backwards, 0) << "full checkpointing recomputes forwards in backwards";
    } else {
      EXPECT_EQ(recomputing_backwards, 0);
    }
  }
}

TEST(RealPlanCursor, CCursorReturnsThePlansKnobSchema) {
  for (const auto& [checkpointing, flags] : kVariants) {
    SCOPED_TRACE(checkpointing);
    const nlohmann::json plan = raw(plan_path(checkpointing));
    for (int s = 0; s < plan["num_stages"].get<int>(); ++s) {
      kareus_cursor* cursor = nullptr;
      ASSERT_EQ(kareus_cursor_new(plan_path(checkpointing).c_str(), -1, s, nullptr, &cursor),
                KAREUS_OK)
          << kareus_last_error();
      for (const auto& ins : plan["stages"][s]["instructions"]) {
        const char* text = nullptr;
        ASSERT_EQ(kareus_cursor_on_instruction_begin(cursor, ins["type"].get<std::string>().c_str(),
                                                     ins["microbatch"].get<int>(), &text),
                  KAREUS_OK)
            << kareus_last_error();
        nlohmann::json knobs = nlohmann::json::parse(text);
        nlohmann::json as_instruction = {{"knob", knobs}};
        EXPECT_EQ(raw_knobs(as_instruction, "partitions"), raw_knobs(ins, "partitions"));
        EXPECT_EQ(raw_knobs(as_instruction, "recompute"), raw_knobs(ins, "recompute"));
        EXPECT_TRUE(knobs["partitions"].is_array() && knobs["recompute"].is_array()) << text;
      }
      EXPECT_EQ(kareus_cursor_on_step_end(cursor), KAREUS_OK) << kareus_last_error();
      kareus_cursor_free(cursor);
    }
  }
}

// A marker queue a C caller keeps: markers fire, in order, when the test says the GPU got there.
struct CMarkerQueue {
  std::vector<std::pair<kareus_gpu_callback, void*>> pending;
  static int enqueue(void* user, kareus_gpu_callback fn, void* arg) {
    static_cast<CMarkerQueue*>(user)->pending.emplace_back(fn, arg);
    return 0;
  }
  void fire_next() {
    ASSERT_FALSE(pending.empty());
    auto [fn, arg] = pending.front();
    pending.erase(pending.begin());
    fn(arg);
  }
};

// GPU-timed clocks on the planner's real plans, through the C++ and the C cursor: the host issues a
// whole iteration at once (far ahead of the GPU) and still every instruction begins at its clock,
// the clock being asked for only when the GPU reaches the instruction's marker.
TEST(RealPlanCursor, GpuTimedCursorsSetEachClockWhenTheGpuReachesTheInstruction) {
  for (const auto& [variant, flags] : kVariants) {
    SCOPED_TRACE(variant);
    const nlohmann::json plan = raw(plan_path(variant));
    for (int s = 0; s < plan["num_stages"].get<int>(); ++s) {
      const auto& instructions = plan["stages"][s]["instructions"];
      // C++: a fake stream, the work of each instruction its planned time.
      auto gpu = std::make_shared<FakeGpu>(make_fake_gpu_config());
      FrequencyController controller({gpu});
      PlanCursor cursor = PlanCursor::open(plan_path(variant), s, &controller);
      auto stream = std::make_shared<FakeStream>();
      cursor.set_stream(stream);
      std::vector<double> starts;
      for (const auto& ins : instructions) {
        starts.push_back(stream->device_free_s());
        cursor.on_instruction_begin(ins["type"].get<std::string>(), ins["microbatch"].get<int>());
        stream->enqueue_work(ins["time_s"].get<double>());
      }
      controller.wait_idle();
      EXPECT_FALSE(gpu->locked_sm_clocks_mhz()) << "no clock is asked for before the GPU gets there";
      for (std::size_t k = 0; k < instructions.size(); ++k) {
        stream->run_until(starts[k]);
        controller.wait_idle();
        ASSERT_TRUE(gpu->locked_sm_clocks_mhz());
        EXPECT_EQ(gpu->locked_sm_clocks_mhz()->second, instructions[k]["freq_mhz"].get<int>()) << k;
      }
      stream->drain();
      cursor.on_step_end();

      // C: the caller's marker queue.
      kareus_clock* clock = nullptr;
      kareus_gpu* cgpu = nullptr;
      kareus_controller* ccontroller = nullptr;
      kareus_cursor* ccursor = nullptr;
      ASSERT_EQ(kareus_clock_new_manual(&clock), KAREUS_OK);
      ASSERT_EQ(kareus_gpu_open_fake(0, clock, &cgpu), KAREUS_OK);
      ASSERT_EQ(kareus_controller_new(&cgpu, 1, &ccontroller), KAREUS_OK) << kareus_last_error();
      ASSERT_EQ(kareus_cursor_new(plan_path(variant).c_str(), -1, s, ccontroller, &ccursor), KAREUS_OK)
          << kareus_last_error();
      CMarkerQueue queue;
      ASSERT_EQ(kareus_cursor_set_marker(ccursor, &CMarkerQueue::enqueue, &queue), KAREUS_OK) << kareus_last_error();
      for (const auto& ins : instructions) {
        const char* knobs = nullptr;
        ASSERT_EQ(kareus_cursor_on_instruction_begin(ccursor, ins["type"].get<std::string>().c_str(),
                                                     ins["microbatch"].get<int>(), &knobs),
                  KAREUS_OK)
            << kareus_last_error();
      }
      ASSERT_EQ(queue.pending.size(), instructions.size());
      for (const auto& ins : instructions) {
        queue.fire_next();
        ASSERT_EQ(kareus_controller_wait_idle(ccontroller), KAREUS_OK);
        int locked = 0, mhz = 0;
        ASSERT_EQ(kareus_fake_gpu_locked_sm_clock_mhz(cgpu, &locked, &mhz), KAREUS_OK);
        EXPECT_TRUE(locked);
        EXPECT_EQ(mhz, ins["freq_mhz"].get<int>());
      }
      EXPECT_EQ(kareus_cursor_on_step_end(ccursor), KAREUS_OK) << kareus_last_error();
      EXPECT_EQ(kareus_cursor_set_marker(ccursor, nullptr, nullptr), KAREUS_OK);
      kareus_cursor_free(ccursor);
      kareus_controller_free(ccontroller);
      kareus_gpu_free(cgpu);
      kareus_clock_free(clock);
    }
  }
}

// The index of the least-energy plan taking at most `target_s`, else the fastest: brute force
// over the planner's plans.json.
std::size_t brute_force_pick(const nlohmann::json& plans, double target_s) {
  std::optional<std::size_t> best, fastest;
  for (std::size_t i = 0; i < plans.size(); ++i) {
    double t = plans[i]["time_s"], e = plans[i]["energy_j"];
    if (!fastest || t < plans[*fastest]["time_s"].get<double>()) fastest = i;
    if (t <= target_s && (!best || e < plans[*best]["energy_j"].get<double>())) best = i;
  }
  return best.value_or(*fastest);
}

RC_GTEST_PROP(RealPlanCursor, StragglerSwitchesAtTheNamedIterationToTheFrugalPlanInTime, ()) {
  static const nlohmann::json plans = raw(plans_path())["plans"];
  static const std::vector<plan::Plan> frontier = plan::read_plan_set(plans_path());
  RC_ASSERT(plans.size() >= 2u);
  const double fastest_s = plans.front()["time_s"];
  const double slowest_s = plans.back()["time_s"];
  const double target_s = *rc::gen::map(rc::gen::inRange(0, 1001), [&](int k) {
    return fastest_s * 0.95 + (slowest_s * 1.05 - fastest_s * 0.95) * k / 1000.0;
  });
  const int stage = *rc::gen::inRange(0, plans.front()["num_stages"].get<int>());
  const long at = *rc::gen::inRange(1, 4);
  auto gpu = std::make_shared<FakeGpu>(make_fake_gpu_config());
  FrequencyController controller({gpu});
  // (PlanCursor::open_frontier reads the same file: the C test below goes through it.)
  PlanCursor cursor(frontier, brute_force_pick(plans, 0), stage, &controller, "plans.json");
  RC_ASSERT(cursor.frontier_size() == plans.size());
  const std::size_t start = cursor.plan_index();
  const std::size_t expected = brute_force_pick(plans, target_s);
  for (long it = 0; it <= at; ++it) {
    const std::size_t running = it < at ? start : expected;
    RC_ASSERT(cursor.plan_index() == running);
    const auto& instructions = plans[running]["stages"][stage]["instructions"];
    for (std::size_t k = 0; k < instructions.size(); ++k) {
      const auto& ins = instructions[k];
      const CommKnobs& knobs =
          cursor.on_instruction_begin(ins["type"].get<std::string>(), ins["microbatch"].get<int>());
      RC_ASSERT(cursor_knobs(knobs.partitions) == raw_knobs(ins, "partitions"));
      RC_ASSERT(cursor_knobs(knobs.recompute) == raw_knobs(ins, "recompute"));
      controller.wait_idle();
      int clock = static_cast<int>(std::lround(ins["freq_mhz"].get<double>()));
      RC_ASSERT(gpu->locked_sm_clocks_mhz() == (std::pair{clock, clock}));
      if (it == 0 && k == 0) {
        // Inside iteration 0: a switch there would split the pipeline; iteration `at` is fine.
        RC_ASSERT(!testing::input_error_of([&] { cursor.set_target_time(target_s, 0); }).empty());
        RC_ASSERT(cursor.on_straggler(target_s, at) == expected);
      }
    }
    cursor.on_step_end();
  }
}

TEST(RealPlanCursor, StragglerPicksThePlanKareusPlanPicksForThatDeadline) {
  // The same selection as `kareus plan --target deadline:T`: the very plan it writes.
  const nlohmann::json plans = raw(plans_path())["plans"];
  for (double slowdown : {1.05, 1.2}) {
    const double deadline_s = slowdown * plans.front()["time_s"].get<double>();
    const auto out = planned().dir / fmt::format("deadline-{}", slowdown);
    const std::string command = fmt::format(
        "{} plan --plans all --microbatches 4 --checkpointing full --target deadline:{:.17g} "
        "--out {} >{}.log 2>&1",
        KAREUS_BINARY, deadline_s, out.string(), out.string());
    ASSERT_EQ(std::system(command.c_str()), 0) << testing::slurp(out.string() + ".log");
    PlanCursor cursor = PlanCursor::open_frontier(plans_path(), 0, nullptr);
    cursor.set_target_time(deadline_s, 0);
    plan::Plan expected = plan::read_plan(out / "plan.json");
    for (std::size_t s = 1; s < expected.stages.size(); ++s) expected.stages[s].clear();  // rank 0 keeps its own
    EXPECT_EQ(cursor.plan(), expected) << slowdown;
  }
}

TEST(RealPlanCursor, CStragglerApiSwitchesAtTheNamedIteration) {
  const nlohmann::json plans = raw(plans_path())["plans"];
  const double target_s = plans.back()["time_s"].get<double>();  // the most frugal plan's time
  const std::size_t expected = brute_force_pick(plans, target_s);
  kareus_cursor* cursor = nullptr;
  ASSERT_EQ(kareus_cursor_new_frontier(plans_path().c_str(), nullptr, 1, nullptr, &cursor),
            KAREUS_OK)
      << kareus_last_error();
  std::size_t index = 99, chosen = 99;
  double time_s = 0;
  ASSERT_EQ(kareus_cursor_plan_index(cursor, &index, &time_s, nullptr), KAREUS_OK);
  EXPECT_EQ(index, brute_force_pick(plans, 0));
  EXPECT_EQ(time_s, plans[index]["time_s"].get<double>());
  ASSERT_EQ(kareus_cursor_on_straggler(cursor, target_s, 1, &chosen), KAREUS_OK)
      << kareus_last_error();
  EXPECT_EQ(chosen, expected);
  ASSERT_EQ(kareus_cursor_plan_index(cursor, &index, nullptr, nullptr), KAREUS_OK);
  EXPECT_EQ(index, brute_force_pick(plans, 0)) << "not before iteration 1";
  for (const auto& ins : plans[index]["stages"][1]["instructions"]) {
    ASSERT_EQ(kareus_cursor_on_instruction_begin(cursor, ins["type"].get<std::string>().c_str(), -1,
                                                 nullptr),
              KAREUS_OK);
  }
  EXPECT_EQ(kareus_cursor_set_target_time(cursor, target_s, 0, nullptr), KAREUS_ERROR_INPUT);
  EXPECT_TRUE(testing::Contains(kareus_last_error(), "every rank of the pipeline must switch"));
  ASSERT_EQ(kareus_cursor_on_step_end(cursor), KAREUS_OK);
  long iteration = 0;
  ASSERT_EQ(kareus_cursor_iteration(cursor, &iteration), KAREUS_OK);
  EXPECT_EQ(iteration, 1);
  ASSERT_EQ(kareus_cursor_plan_index(cursor, &index, nullptr, nullptr), KAREUS_OK);
  EXPECT_EQ(index, expected);
  EXPECT_EQ(
      kareus_cursor_new_frontier(plans_path().c_str(), "deadline:0.0001", 0, nullptr, &cursor),
      KAREUS_ERROR_INPUT);
  kareus_cursor_free(cursor);
}

}  // namespace
}  // namespace kareus::runtime
