// Tests of the energy monitor (nested and overlapping windows, cancel, the CSV log, the
// short-window warning) and of ReplayGpu playing that log back.
#include "kareus/runtime/energy_monitor.hpp"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <sstream>

#include "kareus/core/csv.hpp"
#include "kareus/runtime/fake_gpu.hpp"
#include "kareus/runtime/replay_gpu.hpp"
#include "runtime/runtime_test_util.hpp"

namespace kareus::runtime {
namespace {

using testing::Contains;

// Two fake GPUs on one manual clock, drawing a constant 100 W and 200 W.
struct Rig {
  std::shared_ptr<ManualTimeSource> time = std::make_shared<ManualTimeSource>(10.0);
  std::vector<std::shared_ptr<Gpu>> gpus;
  Rig(double update_period_s = 0) {
    for (int i = 0; i < 2; ++i) {
      FakeGpuConfig config = make_fake_gpu_config(i, time);
      config.power_w = [i](double, double) { return 100.0 * (i + 1); };
      config.energy_update_period_s = update_period_s;
      gpus.push_back(std::make_shared<FakeGpu>(config));
    }
  }
};

// Captures what the runtime logs while it lives.
class LogCapture {
 public:
  LogCapture() : previous_(spdlog::default_logger()) {
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(stream_);
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("capture", sink));
  }
  ~LogCapture() { spdlog::set_default_logger(previous_); }
  std::string text() const { return stream_.str(); }

 private:
  std::ostringstream stream_;
  std::shared_ptr<spdlog::logger> previous_;
};

TEST(EnergyMonitor, WindowsNestAndOverlap) {
  Rig rig;
  EnergyMonitor monitor(rig.gpus, {.time = rig.time});
  monitor.begin_window("iteration");
  rig.time->advance_s(1);
  monitor.begin_window("forward");  // nested
  rig.time->advance_s(0.5);
  monitor.begin_window("overlap");  // starts inside forward, ends after it
  rig.time->advance_s(0.25);
  Measurement forward = monitor.end_window("forward");
  rig.time->advance_s(1);
  Measurement overlap = monitor.end_window("overlap");
  Measurement iteration = monitor.end_window("iteration");

  EXPECT_NEAR(forward.elapsed_s, 0.75, 1e-12);
  EXPECT_NEAR(forward.gpu_energy_j[0], 75, 1e-9);
  EXPECT_NEAR(forward.gpu_energy_j[1], 150, 1e-9);
  EXPECT_NEAR(overlap.elapsed_s, 1.25, 1e-12);
  EXPECT_NEAR(overlap.total_energy_j(), 1.25 * 300, 1e-9);
  EXPECT_NEAR(iteration.elapsed_s, 2.75, 1e-12);
  EXPECT_NEAR(iteration.gpu_energy_j[0], 275, 1e-9);
  EXPECT_NEAR(iteration.gpu_energy_j[1], 550, 1e-9);
}

TEST(EnergyMonitor, CancelAndMisuseAreClear) {
  Rig rig;
  EnergyMonitor monitor(rig.gpus, {.time = rig.time});
  monitor.begin_window("a");
  EXPECT_TRUE(monitor.is_open("a"));
  EXPECT_THROW(monitor.begin_window("a"), InputError);
  monitor.cancel_window("a");
  EXPECT_FALSE(monitor.is_open("a"));
  try {
    monitor.end_window("a");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_TRUE(Contains(e.what(), "no energy window named 'a' is open"));
  }
  EXPECT_THROW(monitor.cancel_window("never"), InputError);
  EXPECT_THROW(EnergyMonitor({}), InputError);
}

TEST(EnergyMonitor, WarnsOnceWhenAWindowIsShorterThanTheCounterPeriod) {
  Rig rig(/*update_period_s=*/0.1);
  LogCapture log;
  EnergyMonitor monitor(rig.gpus, {.time = rig.time});
  for (int k = 0; k < 3; ++k) {
    monitor.begin_window("instruction");
    rig.time->advance_s(0.01);
    monitor.end_window("instruction");
  }
  monitor.begin_window("iteration");
  rig.time->advance_s(0.5);
  monitor.end_window("iteration");
  std::string text = log.text();
  EXPECT_TRUE(Contains(text, "energy window 'instruction' lasted 0.0100 s, shorter than"));
  EXPECT_EQ(text.find("energy window 'instruction'"), text.rfind("energy window 'instruction'"));
  EXPECT_FALSE(Contains(text, "'iteration'"));
}

TEST(EnergyMonitor, ShortWindowsCanBeEstimatedFromPower) {
  Rig rig(/*update_period_s=*/1.0);
  EnergyMonitor monitor(rig.gpus, {.time = rig.time, .approximate_short_windows = true});
  rig.time->advance_s(0.2);
  monitor.begin_window("short");
  rig.time->advance_s(0.1);
  Measurement m = monitor.end_window("short");
  EXPECT_NEAR(m.gpu_energy_j[0], 10, 1e-9);  // 100 W × 0.1 s, though the counter did not move
}

TEST(EnergyMonitor, LogsEveryEndedWindowAndReplaysExactly) {
  auto dir = testing::temp_dir("monitor-log");
  auto log_path = dir / "energy.csv";
  Rig rig;
  std::vector<Measurement> measured;
  {
    EnergyMonitor monitor(rig.gpus, {.log_csv = log_path, .time = rig.time});
    for (int k = 0; k < 3; ++k) {
      monitor.begin_window("iteration");
      monitor.begin_window("step, with a comma");
      rig.time->advance_s(0.25 * (k + 1));
      measured.push_back(monitor.end_window("step, with a comma"));
      rig.time->advance_s(0.1);
      measured.push_back(monitor.end_window("iteration"));
      monitor.begin_window("cancelled");
      monitor.cancel_window("cancelled");
    }
  }
  CsvTable table = read_csv(log_path);
  ASSERT_EQ(table.header(), (std::vector<std::string>{"start_time", "window_name", "elapsed_time",
                                                      "gpu0_energy", "gpu1_energy"}));
  ASSERT_EQ(table.rows(), 6u);
  EXPECT_EQ(table.text(0, 1), "step, with a comma");
  EXPECT_NEAR(table.number(1, 0), 10.0, 1e-12);
  EXPECT_NEAR(table.number(1, 3), measured[1].gpu_energy_j[0], 1e-9);
  EXPECT_EQ(ReplayGpu::gpu_indices_in_log(log_path), (std::vector<int>{0, 1}));

  // Replay the same windows on the log's own time axis: the same energies come back.
  auto time = std::make_shared<ManualTimeSource>(10.0);
  std::vector<std::shared_ptr<Gpu>> replayed;
  for (int i = 0; i < 2; ++i) {
    replayed.push_back(
        std::make_shared<ReplayGpu>(log_path, i, ReplayGpuOptions{time, 0.0, {}, {}}));
  }
  EnergyMonitor monitor(replayed, {.time = time});
  for (int k = 0; k < 3; ++k) {
    monitor.begin_window("iteration");
    time->advance_s(0.25 * (k + 1));
    time->advance_s(0.1);
    Measurement m = monitor.end_window("iteration");
    EXPECT_NEAR(m.elapsed_s, measured[2 * k + 1].elapsed_s, 1e-9);
    EXPECT_NEAR(m.gpu_energy_j[0], measured[2 * k + 1].gpu_energy_j[0], 1e-6);
    EXPECT_NEAR(m.gpu_energy_j[1], measured[2 * k + 1].gpu_energy_j[1], 1e-6);
  }
  std::filesystem::remove_all(dir);
}

TEST(ReplayGpu, CounterFollowsTheOutermostWindows) {
  auto dir = testing::temp_dir("replay");
  std::ofstream(dir / "log.csv") << "start_time,window_name,elapsed_time,gpu0_energy\n"
                                    "1.0,outer,2.0,200\n"
                                    "1.5,inner,0.5,999\n"
                                    "5.0,later,1.0,50\n";
  auto time = std::make_shared<ManualTimeSource>(0.0);
  ReplayGpu gpu(dir / "log.csv", 0, {.time = time, .time_offset_s = 0.0});
  EXPECT_EQ(gpu.total_energy_mj(), 0);
  time->set_s(2.0);  // half of the outer window; the nested one is ignored
  EXPECT_NEAR(gpu.total_energy_mj(), 100'000, 1e-6);
  EXPECT_NEAR(gpu.instant_power_mw(), 100'000, 1e-6);
  time->set_s(4.0);  // between windows: nothing drawn
  EXPECT_NEAR(gpu.total_energy_mj(), 200'000, 1e-6);
  EXPECT_EQ(gpu.instant_power_mw(), 0);
  time->set_s(10.0);
  EXPECT_NEAR(gpu.total_energy_mj(), 250'000, 1e-6);
  EXPECT_THROW(ReplayGpu(dir / "log.csv", 3), InputError);  // no gpu3_energy column
  std::ofstream(dir / "bad.csv") << "start_time,window_name,elapsed_time,gpu0_energy\n1.0,x,-1,5\n";
  try {
    ReplayGpu(dir / "bad.csv", 0);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_TRUE(Contains(e.what(), "bad.csv:2"));
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kareus::runtime
