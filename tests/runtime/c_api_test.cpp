// Tests of the C API: the same fake training loop through kareus_runtime.h and through the C++
// classes gives the same clocks and energy; errors come back as codes with a message. (The knobs a
// real plan carries are checked in real_plan_cursor_test.cpp.)
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "kareus/runtime/energy_monitor.hpp"
#include "kareus/runtime/kareus_runtime.h"
#include "kareus/runtime/plan_cursor.hpp"
#include "runtime/runtime_test_util.hpp"

namespace kareus::runtime {
namespace {

using testing::Contains;

struct LoopResult {
  std::vector<int> clocks_mhz;
  std::vector<std::string> knobs;
  double elapsed_s = 0, energy_j = 0;
};

// Two iterations of stage 0: load 1 while an instruction runs for its planned time.
LoopResult run_cpp(const std::filesystem::path& plan_path) {
  auto time = std::make_shared<ManualTimeSource>();
  auto gpu = std::make_shared<FakeGpu>(make_fake_gpu_config(0, time));
  FrequencyController controller({gpu});
  PlanCursor cursor = PlanCursor::open(plan_path, 0, &controller);
  EnergyMonitor monitor({gpu}, {.time = time});
  LoopResult result;
  monitor.begin_window("run");
  for (int iteration = 0; iteration < 2; ++iteration) {
    for (std::size_t k = 0; k < cursor.instructions_per_iteration(); ++k) {
      const auto& ins = cursor.instruction(k);
      const CommKnobs& knobs = cursor.on_instruction_begin(schedule::to_string(ins.type));
      result.knobs.push_back(plan::to_json(knobs).dump());
      controller.wait_idle();
      result.clocks_mhz.push_back(gpu->locked_sm_clocks_mhz()->second);
      gpu->set_load(1);
      time->advance_s(ins.time_s);
      gpu->set_load(0);
    }
    cursor.on_step_end();
  }
  Measurement m = monitor.end_window("run");
  result.elapsed_s = m.elapsed_s;
  result.energy_j = m.total_energy_j();
  return result;
}

#define ASSERT_OK(call) ASSERT_EQ((call), KAREUS_OK) << kareus_last_error()

LoopResult run_c(const std::filesystem::path& plan_path) {
  LoopResult result;
  kareus_clock* clock = nullptr;
  kareus_gpu* gpu = nullptr;
  kareus_controller* controller = nullptr;
  kareus_cursor* cursor = nullptr;
  kareus_monitor* monitor = nullptr;
  EXPECT_EQ(kareus_clock_new_manual(&clock), KAREUS_OK);
  EXPECT_EQ(kareus_gpu_open_fake(0, clock, &gpu), KAREUS_OK);
  EXPECT_EQ(kareus_controller_new(&gpu, 1, &controller), KAREUS_OK);
  EXPECT_EQ(kareus_cursor_new(plan_path.c_str(), -1, 0, controller, &cursor), KAREUS_OK)
      << kareus_last_error();
  EXPECT_EQ(kareus_monitor_new(&gpu, 1, nullptr, clock, &monitor), KAREUS_OK);
  plan::Plan plan = plan::read_plan(plan_path);
  EXPECT_EQ(kareus_monitor_begin_window(monitor, "run"), KAREUS_OK);
  for (int iteration = 0; iteration < 2; ++iteration) {
    for (const auto& ins : plan.stages[0]) {
      const char* knobs = nullptr;
      EXPECT_EQ(
          kareus_cursor_on_instruction_begin(
              cursor, std::string(schedule::to_string(ins.type)).c_str(), ins.microbatch, &knobs),
          KAREUS_OK)
          << kareus_last_error();
      result.knobs.push_back(knobs);
      EXPECT_EQ(kareus_controller_wait_idle(controller), KAREUS_OK);
      int locked = 0, mhz = 0;
      EXPECT_EQ(kareus_fake_gpu_locked_sm_clock_mhz(gpu, &locked, &mhz), KAREUS_OK);
      EXPECT_EQ(locked, 1);
      result.clocks_mhz.push_back(mhz);
      EXPECT_EQ(kareus_fake_gpu_set_load(gpu, 1), KAREUS_OK);
      EXPECT_EQ(kareus_clock_advance_s(clock, ins.time_s), KAREUS_OK);
      EXPECT_EQ(kareus_fake_gpu_set_load(gpu, 0), KAREUS_OK);
    }
    EXPECT_EQ(kareus_cursor_on_step_end(cursor), KAREUS_OK);
  }
  double energy_j = 0;
  EXPECT_EQ(kareus_monitor_end_window(monitor, "run", &result.elapsed_s, &energy_j, 1), KAREUS_OK);
  result.energy_j = energy_j;

  kareus_controller_stats stats{};
  EXPECT_EQ(kareus_controller_stats_of(controller, 0, &stats), KAREUS_OK);
  EXPECT_EQ(stats.requests, 8);
  // The GPU handle may go first: the controller and monitor hold their own references.
  kareus_gpu_free(gpu);
  kareus_monitor_free(monitor);
  kareus_controller_free(controller);  // the cursor keeps the controller alive
  EXPECT_EQ(kareus_cursor_on_instruction_begin(cursor, "forward", -1, nullptr), KAREUS_OK);
  kareus_cursor_free(cursor);
  kareus_clock_free(clock);
  return result;
}

TEST(CApi, BehavesAsTheCppApi) {
  auto dir = testing::temp_dir("c-api");
  plan::write_plan(testing::make_test_plan(), dir / "plan.json");
  LoopResult cpp = run_cpp(dir / "plan.json");
  LoopResult c = run_c(dir / "plan.json");
  EXPECT_EQ(c.clocks_mhz, cpp.clocks_mhz);
  EXPECT_EQ(c.clocks_mhz, (std::vector<int>{1410, 1005, 810, 1410, 1410, 1005, 810, 1410}));
  EXPECT_EQ(c.knobs, cpp.knobs);
  EXPECT_EQ(c.knobs[0], R"({"partitions":[],"recompute":[]})") << "a clock-only plan";
  EXPECT_DOUBLE_EQ(c.elapsed_s, cpp.elapsed_s);
  EXPECT_DOUBLE_EQ(c.energy_j, cpp.energy_j);
  EXPECT_NEAR(c.elapsed_s, 0.6, 1e-12);
  std::filesystem::remove_all(dir);
}

TEST(CApi, ErrorsAreCodesWithAMessage) {
  kareus_gpu* gpu = nullptr;
  kareus_status status = kareus_gpu_open_nvml(0, &gpu);
  if (status != KAREUS_OK) {
    EXPECT_EQ(status, KAREUS_ERROR_DEVICE);
    EXPECT_TRUE(Contains(kareus_last_error(), "NVML not available"));
  }
  kareus_gpu_free(gpu);

  EXPECT_EQ(kareus_cursor_new("/nonexistent/plan.json", -1, 0, nullptr, nullptr),
            KAREUS_ERROR_INPUT);
  kareus_cursor* cursor = nullptr;
  EXPECT_EQ(kareus_cursor_new("/nonexistent/plan.json", -1, 0, nullptr, &cursor),
            KAREUS_ERROR_INPUT);
  EXPECT_TRUE(Contains(kareus_last_error(), "/nonexistent/plan.json"));
  EXPECT_EQ(cursor, nullptr);

  auto dir = testing::temp_dir("c-api-errors");
  plan::write_plan(testing::make_test_plan(), dir / "plan.json");
  ASSERT_OK(kareus_cursor_new((dir / "plan.json").c_str(), -1, 1, nullptr, &cursor));
  EXPECT_EQ(kareus_cursor_on_instruction_begin(cursor, "backward", -1, nullptr),
            KAREUS_ERROR_INPUT);
  EXPECT_TRUE(Contains(kareus_last_error(), "stages[1].instructions[0]"));
  EXPECT_EQ(kareus_cursor_on_instruction_begin(cursor, "forward", -1, nullptr), KAREUS_OK);
  EXPECT_EQ(kareus_cursor_on_step_end(cursor), KAREUS_ERROR_INPUT);
  EXPECT_TRUE(Contains(kareus_last_error(), "ended after 1 of stage 1's 4 instructions"));
  kareus_cursor_free(cursor);

  kareus_gpu* fake = nullptr;
  ASSERT_OK(kareus_gpu_open_fake(0, nullptr, &fake));
  char name[8];
  ASSERT_OK(kareus_gpu_name(fake, name, sizeof(name)));
  EXPECT_EQ(std::string(name), "Fake NV");  // truncated, terminated
  size_t count = 0;
  int top[2] = {0, 0};
  ASSERT_OK(kareus_gpu_supported_sm_clocks_mhz(fake, top, 2, &count));
  EXPECT_EQ(count, 81u);
  EXPECT_EQ(top[0], 1410);
  EXPECT_EQ(kareus_fake_gpu_set_load(fake, 2.0), KAREUS_ERROR_INPUT);
  kareus_controller* controller = nullptr;
  EXPECT_EQ(kareus_controller_new(&fake, 0, &controller), KAREUS_ERROR_INPUT);
  EXPECT_TRUE(Contains(kareus_last_error(), "no GPUs"));
  kareus_gpu_free(fake);
  kareus_gpu_free(nullptr);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kareus::runtime
