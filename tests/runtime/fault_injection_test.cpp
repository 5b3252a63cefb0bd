// Device faults in the runtime: FakeGpu's injected faults (NVML's error codes, hangs, a lost GPU,
// a wrapping energy counter), the cases they found in the frequency controller and the energy
// monitor, and a property test that runs random plans through the controller, the plan cursor and
// the energy monitor under random fault schedules (kFaultSchedules of them) and checks that the
// loop never waits on a hung call, every window's energy is what the devices drew (>= 0, through
// counter wraps), every failed call is reported exactly once, and the clocks and the power limit
// are back as they were found on every way out: stop(), destruction, an exception through the
// loop, and the emergency reset that signals, exit and std::terminate run.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "kareus/runtime/energy_monitor.hpp"
#include "kareus/runtime/fake_gpu.hpp"
#include "kareus/runtime/frequency_controller.hpp"
#include "kareus/runtime/plan_cursor.hpp"
#include "kareus/runtime/reset_guard.hpp"
#include "runtime/runtime_test_util.hpp"

namespace kareus::runtime {
namespace {

using testing::Contains;

// At least this many random fault schedules per run (the floor).
constexpr int kFaultSchedules = 1000;

// Captures spdlog's default logger for the test's lifetime.
class LogCapture {
 public:
  LogCapture() : previous_(spdlog::default_logger()) {
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(stream_);
    sink->set_pattern("%l %v");
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("capture", sink));
  }
  ~LogCapture() { spdlog::set_default_logger(previous_); }
  std::string text() const { return stream_.str(); }
  long lines() const {
    const std::string t = text();
    return static_cast<long>(std::count(t.begin(), t.end(), '\n'));
  }
  // Lines that report a failed device call: they carry NVML's error name.
  long failure_lines(const std::string& name = "(NVML_ERROR_") const {
    std::istringstream in(text());
    long n = 0;
    for (std::string line; std::getline(in, line);) n += line.find(name) != std::string::npos;
    return n;
  }

 private:
  std::ostringstream stream_;
  std::shared_ptr<spdlog::logger> previous_;
};

FakeGpuConfig config(int index, std::shared_ptr<ManualTimeSource> time,
                     std::vector<GpuFault> faults = {}, std::optional<int> cap_mw = std::nullopt) {
  FakeGpuConfig c = make_fake_gpu_config(index, std::move(time));
  c.faults = std::move(faults);
  c.start_power_limit_mw = cap_mw;
  c.hang_limit_s = 5;
  return c;
}

// ---- FakeGpu's faults ---------------------------------------------------------------------

TEST(FakeGpuFaults, FailWithNvmlsCodesAsNvmlGpuThrowsThem) {
  auto time = std::make_shared<ManualTimeSource>();
  FakeGpu gpu(
      config(2, time,
             {{GpuCall::kSetSmClocks, 2, GpuFault::Kind::kError, kNvmlErrorNoPermission},
              {GpuCall::kLockMemoryClock, 1, GpuFault::Kind::kError, kNvmlErrorNotSupported},
              {GpuCall::kTotalEnergy, 1, GpuFault::Kind::kError, kNvmlErrorTimeout},
              {GpuCall::kSetPowerLimit, 1, GpuFault::Kind::kError, kNvmlErrorUnknown}}));
  gpu.set_locked_sm_clocks(1410, 1410);  // the first call is fine
  try {
    gpu.set_locked_sm_clocks(1005, 1005);
    FAIL() << "the second SM-clock call did not fail";
  } catch (const GpuPermissionError& e) {
    EXPECT_TRUE(Contains(e.what(),
                         "GPU 2: nvmlDeviceSetGpuLockedClocks failed: Insufficient "
                         "Permissions (NVML_ERROR_NO_PERMISSION)"));
  }
  EXPECT_EQ(gpu.locked_sm_clocks_mhz(), (std::pair{1410, 1410}));  // a failed call changes nothing
  EXPECT_THROW(gpu.lock_memory_clock(1215), GpuNotSupportedError);
  try {
    (void)gpu.total_energy_mj();
    FAIL() << "the energy reading did not fail";
  } catch (const DeviceError& e) {
    EXPECT_TRUE(Contains(e.what(),
                         "nvmlDeviceGetTotalEnergyConsumption failed: Timeout "
                         "(NVML_ERROR_TIMEOUT)"));
  }
  EXPECT_THROW(gpu.set_power_limit_mw(300000), DeviceError);
  EXPECT_NO_THROW(gpu.set_power_limit_mw(300000));  // once only
  EXPECT_EQ(gpu.failed_calls(), 4);
  EXPECT_EQ(gpu.calls(GpuCall::kSetSmClocks), 2);
  EXPECT_FALSE(gpu.lost());
}

TEST(FakeGpuFaults, ALostGpuFailsEveryLaterCall) {
  FakeGpu gpu(config(0, std::make_shared<ManualTimeSource>(),
                     {{GpuCall::kTotalEnergy, 2, GpuFault::Kind::kLost}}));
  EXPECT_NO_THROW((void)gpu.total_energy_mj());
  EXPECT_THROW((void)gpu.total_energy_mj(), GpuLostError);
  EXPECT_TRUE(gpu.lost());
  EXPECT_THROW(gpu.set_locked_sm_clocks(1410, 1410), GpuLostError);
  EXPECT_THROW(gpu.reset_power_limit(), GpuLostError);
  try {
    (void)gpu.power_limit_mw();
  } catch (const GpuLostError& e) {
    EXPECT_TRUE(
        Contains(e.what(), "GPU is lost (NVML_ERROR_GPU_IS_LOST); the GPU fell off the bus"));
  }
  EXPECT_EQ(gpu.failed_calls(), 4);
}

TEST(FakeGpuFaults, AHangHoldsOnlyItsOwnCallUntilReleased) {
  FakeGpu gpu(config(0, std::make_shared<ManualTimeSource>(),
                     {{GpuCall::kSetSmClocks, 1, GpuFault::Kind::kHang}}));
  std::thread hung([&] { gpu.set_locked_sm_clocks(1005, 1005); });
  while (gpu.hung_calls() == 0) std::this_thread::yield();
  (void)gpu.total_energy_mj();  // other calls go on meanwhile
  gpu.reset_power_limit();
  EXPECT_EQ(gpu.locked_sm_clocks_mhz(), std::nullopt);
  gpu.release_hangs();
  hung.join();
  EXPECT_EQ(gpu.locked_sm_clocks_mhz(), (std::pair{1005, 1005}));  // then the call completes
  EXPECT_EQ(gpu.hangs_timed_out(), 0);
}

TEST(FakeGpuFaults, TheEnergyCounterWrapsAtItsModulus) {
  auto time = std::make_shared<ManualTimeSource>();
  FakeGpuConfig c = config(0, time);
  c.energy_counter_wrap_mj = 100000;
  c.energy_counter_start_mj = 90000;
  FakeGpu gpu(c);
  EXPECT_EQ(gpu.energy_counter_wrap_mj(), 100000);
  EXPECT_DOUBLE_EQ(gpu.total_energy_mj(), 90000);
  time->advance_s(1);  // at idle, tens of W: past the wrap
  const double drawn_mj = gpu.true_energy_mj();
  ASSERT_GT(drawn_mj, 10000);
  ASSERT_LT(drawn_mj, 110000);
  EXPECT_DOUBLE_EQ(gpu.total_energy_mj(), 90000 + drawn_mj - 100000);
}

TEST(FakeGpuFaults, ParsesAndPrintsFaults) {
  EXPECT_EQ(parse_gpu_fault("total_energy@3:lost"),
            (GpuFault{GpuCall::kTotalEnergy, 3, GpuFault::Kind::kLost}));
  EXPECT_EQ(parse_gpu_fault("set_sm_clocks@1:error=999"),
            (GpuFault{GpuCall::kSetSmClocks, 1, GpuFault::Kind::kError, 999}));
  EXPECT_EQ(to_string(parse_gpu_fault("reset_power_limit@2:hang")), "reset_power_limit@2:hang");
  EXPECT_EQ(to_string(parse_gpu_fault("instant_power@7:kill")), "instant_power@7:kill");
  for (const char* bad :
       {"total_energy", "total_energy@0:lost", "total_energy@x:lost", "warp_drive@1:lost",
        "total_energy@1:explode", "total_energy@1:error=", "total_energy@1:error=-4"}) {
    EXPECT_THROW(parse_gpu_fault(bad), InputError) << bad;
  }
}

// ---- What the faults found ----------------------------------------------------------------

// Found by the property test: a GPU that refused to lock its memory clock (NOT_SUPPORTED) after the
// power limit was reset from an administrator's cap forgot the cap, so stop() left the default.
TEST(FaultsFound, AMemoryClockRefusedAfterThePowerLimitResetStillRestoresTheCap) {
  auto time = std::make_shared<ManualTimeSource>();
  auto gpu = std::make_shared<FakeGpu>(config(
      0, time, {{GpuCall::kLockMemoryClock, 1, GpuFault::Kind::kError, kNvmlErrorNotSupported}},
      250000));  // the administrator's cap
  {
    FrequencyController controller({gpu}, {.reset_on_signals = false});
    EXPECT_EQ(gpu->power_limit_setting_mw(), 400000);  // the default while running
  }
  EXPECT_EQ(gpu->power_limit_setting_mw(), 250000);
}

TEST(FaultsFound, ALostGpuIsReportedOnceAndThenLeftAlone) {
  LogCapture log;
  auto gpu = std::make_shared<FakeGpu>(config(0, std::make_shared<ManualTimeSource>(),
                                              {{GpuCall::kSetSmClocks, 2, GpuFault::Kind::kLost}},
                                              250000));
  FrequencyController controller({gpu}, {.reset_on_signals = false});
  for (int clock : {1410, 1005, 810, 1200, 1005}) {
    controller.request_sm_clock(clock);
    controller.wait_idle();
  }
  controller.stop();
  EXPECT_TRUE(controller.lost(0));
  // The lost call itself, and nothing after: no set, no reset of the SM clock, memory clock or
  // power limit (each would fail and, on a real GPU, could take the driver's timeout).
  EXPECT_EQ(gpu->calls(GpuCall::kSetSmClocks), 2);
  EXPECT_EQ(gpu->calls(GpuCall::kResetSmClocks), 0);
  EXPECT_EQ(gpu->calls(GpuCall::kResetMemoryClock), 0);
  EXPECT_EQ(gpu->calls(GpuCall::kSetPowerLimit), 0);
  EXPECT_EQ(controller.stats(0).errors, gpu->failed_calls());
  EXPECT_EQ(controller.stats(0).errors, 1);
  const std::string text = log.text();
  EXPECT_EQ(log.lines(), 1) << text;
  EXPECT_TRUE(Contains(text, "NVML_ERROR_GPU_IS_LOST"));
  EXPECT_TRUE(Contains(text, "stops setting this GPU's clocks"));
  EXPECT_TRUE(Contains(controller.report(), "GPU 0: lost ("));
  EXPECT_TRUE(
      Contains(controller.power_limit_note(0), "250 W at start NOT restored: the GPU is lost"));
}

TEST(FaultsFound, ARestoreThatTimesOutIsTriedAgain) {
  LogCapture log;
  auto gpu = std::make_shared<FakeGpu>(
      config(0, std::make_shared<ManualTimeSource>(),
             {{GpuCall::kResetSmClocks, 1, GpuFault::Kind::kError, kNvmlErrorTimeout},
              {GpuCall::kResetSmClocks, 2, GpuFault::Kind::kError, kNvmlErrorUnknown},
              {GpuCall::kSetPowerLimit, 1, GpuFault::Kind::kError, kNvmlErrorTimeout}},
             250000));
  FrequencyController controller({gpu}, {.reset_on_signals = false});
  controller.request_sm_clock(1005);
  controller.wait_idle();
  controller.stop();
  EXPECT_EQ(gpu->locked_sm_clocks_mhz(), std::nullopt);
  EXPECT_EQ(gpu->locked_memory_clock_mhz(), std::nullopt);
  EXPECT_EQ(gpu->power_limit_setting_mw(), 250000);
  EXPECT_EQ(gpu->calls(GpuCall::kResetSmClocks), 3);
  EXPECT_EQ(controller.stats(0).errors, gpu->failed_calls());
  EXPECT_EQ(log.lines(), gpu->failed_calls()) << log.text();  // one line per failure
  EXPECT_TRUE(Contains(controller.power_limit_note(0), "restored to 250 W"));
}

TEST(FaultsFound, AFailedEnergyReadingClosesItsWindowSoTheLoopGoesOn) {
  auto time = std::make_shared<ManualTimeSource>();
  auto gpu = std::make_shared<FakeGpu>(
      config(0, time, {{GpuCall::kTotalEnergy, 2, GpuFault::Kind::kError, kNvmlErrorUnknown}}));
  EnergyMonitor monitor({gpu}, {.time = time});
  monitor.begin_window("iteration");
  time->advance_s(1);
  EXPECT_THROW(monitor.end_window("iteration"), DeviceError);
  EXPECT_FALSE(monitor.is_open("iteration"));
  monitor.begin_window("iteration");  // before, this threw "already open": a second report
  time->advance_s(1);
  EXPECT_GT(monitor.end_window("iteration").gpu_energy_j[0], 0);
}

TEST(FaultsFound, WindowsAcrossAWrapCountThroughIt) {
  LogCapture log;
  auto time = std::make_shared<ManualTimeSource>();
  FakeGpuConfig c = config(0, time);
  c.energy_counter_wrap_mj = 50000;
  c.energy_counter_start_mj = 45000;
  auto gpu = std::make_shared<FakeGpu>(c);
  EnergyMonitor monitor({gpu}, {.time = time});
  monitor.begin_window("run");
  double inner_j = 0;
  for (int k = 0; k < 6; ++k) {
    monitor.begin_window("step");
    const double before_mj = gpu->true_energy_mj();
    time->advance_s(0.5);
    const double step_j = monitor.end_window("step").gpu_energy_j[0];
    EXPECT_NEAR(step_j, (gpu->true_energy_mj() - before_mj) / 1000, 1e-9) << k;
    inner_j += step_j;
  }
  EXPECT_NEAR(monitor.end_window("run").gpu_energy_j[0], inner_j, 1e-9);
  EXPECT_EQ(log.lines(), 1) << log.text();
  EXPECT_TRUE(Contains(log.text(), "energy counter wrapped (at 50000 mJ)"));
}

// GPU 0's failed reading leaves GPU 1 unread that time: GPU 1's wraps are still counted while its
// two gaps together hold less than a modulus (the property's first case with a failed reading had
// a 70 J modulus across two 0.1 s gaps at 635 W).
TEST(FaultsFound, AFailedReadingOfOneGpuLeavesTheOthersWrapsCounted) {
  auto time = std::make_shared<ManualTimeSource>();
  auto failing = std::make_shared<FakeGpu>(
      config(0, time, {{GpuCall::kTotalEnergy, 3, GpuFault::Kind::kError, kNvmlErrorUnknown}}));
  FakeGpuConfig c = config(1, time);
  c.energy_counter_wrap_mj = 80000;
  c.energy_counter_start_mj = 50000;
  auto wrapping = std::make_shared<FakeGpu>(c);
  EnergyMonitor monitor({failing, wrapping}, {.time = time});
  monitor.begin_window("run");
  const double before_mj = wrapping->true_energy_mj();
  int failed = 0;
  for (int k = 0; k < 6; ++k) {
    monitor.begin_window("step");
    time->advance_s(0.25);
    try {
      (void)monitor.end_window("step");
    } catch (const DeviceError&) {
      ++failed;
    }
  }
  const double drawn_j = (wrapping->true_energy_mj() - before_mj) / 1000;
  ASSERT_GT(50 + drawn_j, 80.0) << "the run must pass the counter's wrap";
  ASSERT_LT(drawn_j / 6 * 2, 80.0) << "two steps must hold less than a modulus";
  EXPECT_EQ(failed, 1);
  EXPECT_EQ(wrapping->calls(GpuCall::kTotalEnergy), 12);  // one reading fewer than GPU 0's
  EXPECT_NEAR(monitor.end_window("run").gpu_energy_j[1], drawn_j, 1e-9);
}

// ---- The property ---------------------------------------------------------------------------

enum class Exit { kStop, kDestructor, kException, kEmergency };

struct Schedule {
  int gpus = 1;
  int stages = 1, microbatches = 1, stage = 0, iterations = 1;
  std::vector<int> clocks;                 // the plan's, instruction by instruction
  std::vector<std::optional<int>> cap_mw;  // an administrator's power limit at start, per GPU
  std::vector<double> wrap_mj, start_mj;   // the energy counter's modulus and start, per GPU
  std::vector<std::vector<GpuFault>> faults;
  Exit exit = Exit::kStop;
};

void showValue(const Schedule& s, std::ostream& os);
std::string show(const Schedule& s) {
  std::string out =
      fmt::format("{} GPUs, stage {} of {}x{} 1F1B, {} iterations, exit {}; ", s.gpus, s.stage,
                  s.stages, s.microbatches, s.iterations, static_cast<int>(s.exit));
  for (int g = 0; g < s.gpus; ++g) {
    out += fmt::format("GPU {}: cap {}, wrap {}/{} mJ, faults", g,
                       s.cap_mw[g] ? std::to_string(*s.cap_mw[g]) : "none", s.start_mj[g],
                       s.wrap_mj[g]);
    for (const auto& f : s.faults[g]) out.append(" ").append(to_string(f));
    out += "; ";
  }
  return out;
}

void showValue(const Schedule& s, std::ostream& os) {
  os << show(s);
}

rc::Gen<GpuFault> fault_gen() {
  using K = GpuFault::Kind;
  return rc::gen::exec([] {
    GpuFault f;
    // Every call the loop's runtime makes (none asks current_sm_clock or instant_power here), at an
    // occurrence it reaches: start's calls once, stop's a few times, clock changes and energy
    // readings a few and up to ~50 times a run.
    f.call = *rc::gen::element(
        GpuCall::kPowerLimit, GpuCall::kPowerLimitConstraints, GpuCall::kResetPowerLimit,
        GpuCall::kLockMemoryClock, GpuCall::kSetSmClocks, GpuCall::kSetSmClocks,
        GpuCall::kSetSmClocks, GpuCall::kTotalEnergy, GpuCall::kTotalEnergy, GpuCall::kTotalEnergy,
        GpuCall::kResetSmClocks, GpuCall::kResetMemoryClock, GpuCall::kSetPowerLimit);
    long most = 4;  // start's and stop's
    if (f.call == GpuCall::kSetSmClocks) most = 6;
    if (f.call == GpuCall::kTotalEnergy) most = 50;
    f.occurrence = *rc::gen::inRange<long>(1, most);
    const int kind = *rc::gen::inRange(0, 10);
    // A hang only where the worker calls (a hang on the caller's thread holds it, as documented).
    if (kind < 3 && f.call == GpuCall::kSetSmClocks) {
      f.kind = K::kHang;
    } else if (kind == 3) {
      f.kind = K::kLost;
    } else if (f.call == GpuCall::kResetSmClocks || f.call == GpuCall::kResetMemoryClock ||
               f.call == GpuCall::kSetPowerLimit) {
      // A restoring call: refusals (no privilege, not supported) are final by design and never
      // come after the same call worked; what may pass is retried.
      f.kind = K::kError;
      f.nvml_code = *rc::gen::element(kNvmlErrorUnknown, kNvmlErrorTimeout);
    } else {
      f.kind = K::kError;
      f.nvml_code = *rc::gen::element(kNvmlErrorUnknown, kNvmlErrorTimeout, kNvmlErrorNoPermission,
                                      kNvmlErrorNotSupported, kNvmlErrorUnknown, kNvmlErrorTimeout);
    }
    return f;
  });
}

rc::Gen<Schedule> schedule_gen() {
  return rc::gen::exec([] {
    Schedule s;
    s.gpus = *rc::gen::inRange(1, 4);
    s.stages = *rc::gen::inRange(1, 4);
    s.microbatches = *rc::gen::inRange(1, 5);
    s.stage = *rc::gen::inRange(0, s.stages);
    s.iterations = *rc::gen::inRange(1, 4);
    s.clocks = *rc::gen::container<std::vector<int>>(
        2 * s.microbatches, rc::gen::element(1410, 1200, 1005, 810, 1000 /* snapped */));
    // Readings that fail so far, on this GPU or one before it: the monitor reads the GPUs in
    // order and a failure stops the reading, so each joins two of a later GPU's gaps too.
    int failing_readings = 0;
    for (int g = 0; g < s.gpus; ++g) {
      const bool capped = *rc::gen::inRange(0, 2) == 1;
      s.cap_mw.push_back(capped ? std::optional<int>(*rc::gen::inRange(100000, 400000))
                                : std::nullopt);
      std::vector<GpuFault> faults = *rc::gen::container<std::vector<GpuFault>>(
          static_cast<std::size_t>(*rc::gen::inRange(0, 6)), fault_gen());
      // A restore is tried three times: at most two failures of each restoring call, so that a
      // GPU that is not lost is always restored.
      std::map<GpuCall, int> restoring;
      std::erase_if(faults, [&](const GpuFault& f) {
        const bool restores = f.call == GpuCall::kResetSmClocks ||
                              f.call == GpuCall::kResetMemoryClock ||
                              f.call == GpuCall::kSetPowerLimit;
        return restores && f.kind == GpuFault::Kind::kError && ++restoring[f.call] > 2;
      });
      failing_readings += static_cast<int>(std::ranges::count_if(faults, [](const GpuFault& f) {
        return f.call == GpuCall::kTotalEnergy && f.kind == GpuFault::Kind::kError;
      }));
      const bool wraps = *rc::gen::inRange(0, 3) > 0;
      // Wider than the energy between two successful readings (an instruction: <= 0.1 s at the
      // fake A100's 635 W, full load at a locked 1410 MHz, over the board's limit; one more for
      // each failed reading that may join two gaps), narrower than a run's. A whole modulus
      // between two readings is a wrap no counter can show: the shrunk cases of 50 J between two
      // readings, and of 70 J across a failed one, were such.
      const int narrowest_mj = 70000 * (1 + failing_readings);
      s.wrap_mj.push_back(wraps ? *rc::gen::inRange(narrowest_mj, 2000000) : 0);
      s.start_mj.push_back(wraps ? *rc::gen::inRange(0, static_cast<int>(s.wrap_mj.back())) : 0);
      s.faults.push_back(std::move(faults));
    }
    s.exit = static_cast<Exit>(*rc::gen::inRange(0, 4));
    return s;
  });
}

struct LoopFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

int runs = 0;

void check_schedule(const Schedule& s) {
  ++runs;
  bool hangs = false, losses = false, wraps = false;
  for (int g = 0; g < s.gpus; ++g) {
    wraps |= s.wrap_mj[g] > 0;
    for (const auto& f : s.faults[g]) {
      hangs |= f.kind == GpuFault::Kind::kHang;
      losses |= f.kind == GpuFault::Kind::kLost;
    }
  }
  RC_CLASSIFY(hangs, "a hang");
  RC_CLASSIFY(losses, "a lost GPU");
  RC_CLASSIFY(wraps, "a wrapping counter");
  LogCapture log;
  auto time = std::make_shared<ManualTimeSource>();
  std::vector<std::shared_ptr<FakeGpu>> fakes;
  std::vector<std::shared_ptr<Gpu>> gpus;
  std::vector<int> start_limit_mw;
  for (int g = 0; g < s.gpus; ++g) {
    FakeGpuConfig c = config(g, time, s.faults[g], s.cap_mw[g]);
    c.energy_counter_wrap_mj = s.wrap_mj[g];
    c.energy_counter_start_mj = s.start_mj[g];
    auto fake = std::make_shared<FakeGpu>(c);
    start_limit_mw.push_back(fake->power_limit_setting_mw());
    fakes.push_back(fake);
    gpus.push_back(fake);
  }
  plan::Plan p = testing::make_test_plan(s.stages, s.microbatches);
  for (auto& ins : p.stages[s.stage]) {
    ins.freq_mhz =
        s.clocks[static_cast<std::size_t>(&ins - p.stages[s.stage].data()) % s.clocks.size()];
  }

  long reported = 0;  // failures the loop saw as exceptions
  std::optional<long> controller_errors;
  auto restored = [&] {
    for (int g = 0; g < s.gpus; ++g) {
      if (fakes[g]->lost()) continue;
      RC_ASSERT(fakes[g]->locked_sm_clocks_mhz() == std::nullopt);
      RC_ASSERT(fakes[g]->locked_memory_clock_mhz() == std::nullopt);
      RC_ASSERT(fakes[g]->power_limit_setting_mw() == start_limit_mw[g]);
    }
  };

  std::unique_ptr<FrequencyController> controller;
  try {
    controller = std::make_unique<FrequencyController>(
        gpus, FrequencyControllerOptions{.reset_on_signals = false});
  } catch (const DeviceError&) {
    // A start action failed for good: the constructor undid the others and said so once.
    RC_TAG("the controller's start failed");
    restored();
    return;
  }
  RC_TAG(s.exit == Exit::kStop         ? "exit: stop()"
         : s.exit == Exit::kDestructor ? "exit: destructor"
         : s.exit == Exit::kException  ? "exit: an exception through the loop"
                                       : "exit: emergency reset, then stop()");
  try {
    PlanCursor cursor(p, s.stage, controller.get());
    EnergyMonitor monitor(gpus, {.time = time});
    // Opens a window; true when it is open (a failed reading is one report, and no window).
    auto begin = [&](const std::string& name, std::vector<double>& truth) {
      try {
        monitor.begin_window(name);
      } catch (const DeviceError&) {
        ++reported;
        return false;
      }
      truth.clear();
      for (const auto& f : fakes) truth.push_back(f->true_energy_mj());
      return true;
    };
    auto end = [&](const std::string& name, const std::vector<double>& truth) {
      Measurement m;
      try {
        m = monitor.end_window(name);
      } catch (const DeviceError&) {
        ++reported;
        RC_ASSERT(!monitor.is_open(name));
        return;
      }
      for (int g = 0; g < s.gpus; ++g) {
        const double drawn_j = (fakes[g]->true_energy_mj() - truth[g]) / 1000;
        RC_ASSERT(m.gpu_energy_j[g] >= 0);
        RC_ASSERT(std::abs(m.gpu_energy_j[g] - drawn_j) <= 1e-9 * std::max(1.0, drawn_j));
      }
    };
    std::vector<double> iteration_truth, instruction_truth;
    for (int it = 0; it < s.iterations; ++it) {
      const bool iteration_open = begin("iteration", iteration_truth);
      for (std::size_t k = 0; k < cursor.instructions_per_iteration(); ++k) {
        const plan::PlannedInstruction& ins = cursor.instruction(k);
        cursor.on_instruction_begin(ins.type, ins.microbatch);  // only records a clock
        const bool open = begin("instruction", instruction_truth);
        for (const auto& f : fakes) f->set_load(1);
        time->advance_s(ins.time_s);
        for (const auto& f : fakes) f->set_load(0.1);
        if (open) end("instruction", instruction_truth);
      }
      cursor.on_step_end();
      if (iteration_open) end("iteration", iteration_truth);
    }
    // The loop never waited on a hung call: had it, the hang would have run out its real-time
    // limit instead of being released here.
    for (const auto& f : fakes) RC_ASSERT(f->hangs_timed_out() == 0);
    long hung = 0, failed = 0, lost = 0;
    for (const auto& f : fakes) {
      hung += f->hung_calls();
      failed += f->failed_calls();
      lost += f->lost();
    }
    RC_CLASSIFY(hung > 0, "a call hung while the loop ran on");
    RC_CLASSIFY(lost > 0, "a GPU was lost during the loop");
    RC_CLASSIFY(failed > 0, "calls failed during the loop");
    for (const auto& f : fakes) f->release_hangs();
    if (s.exit == Exit::kException) throw LoopFailure("the training loop failed");
  } catch (const LoopFailure&) {
  }

  switch (s.exit) {
    case Exit::kStop:
    case Exit::kEmergency:
      if (s.exit == Exit::kEmergency) reset_all_registered();  // what a signal or exit runs
      controller->stop();
      restored();
      controller_errors = 0;
      for (int g = 0; g < s.gpus; ++g) {
        *controller_errors += controller->stats(g).errors;
        if (controller->lost(g)) {
          RC_ASSERT(controller->report().find(fmt::format("GPU {}: lost", g)) != std::string::npos);
        }
      }
      break;
    case Exit::kDestructor:
    case Exit::kException:
      break;
  }
  controller.reset();
  restored();
  for (const auto& f : fakes) RC_ASSERT(f->hangs_timed_out() == 0);
  if (controller_errors) {
    // Every failed call reported exactly once: counted by the controller or thrown to the loop.
    long failed = 0;
    for (const auto& f : fakes) failed += f->failed_calls();
    RC_ASSERT(*controller_errors + reported == failed);
    // ... and logged at most once: no line without a failure behind it.
    RC_ASSERT(log.failure_lines() <= failed);
    // A lost GPU is said once, by the controller's first call that finds it: then left alone.
    RC_ASSERT(log.failure_lines("NVML_ERROR_GPU_IS_LOST") <= s.gpus);
  }
}

TEST(FaultInjection, RandomPlansUnderRandomDeviceFaults) {
  rc::detail::TestParams params = rc::detail::configuration().testParams;
  params.maxSuccess = std::max(params.maxSuccess, kFaultSchedules);
  runs = 0;
  rc::detail::TestMetadata metadata;
  metadata.id = "FaultInjection/RandomPlansUnderRandomDeviceFaults";
  metadata.description = "random plans under random device faults";
  const auto result = rc::detail::checkProperty(
      // At full size throughout: rapidcheck scales inRange to the size, which starves the first
      // hundreds of cases of faults that strike.
      rc::detail::toProperty([] { check_schedule(*rc::gen::resize(100, schedule_gen())); }),
      metadata, params);
  std::ostringstream message;
  rc::detail::printResultMessage(result, message);
  if (!result.template is<rc::detail::SuccessResult>()) FAIL() << message.str();
  std::cout << message.str() << "\n";  // how the schedules were spread
  EXPECT_GE(runs, kFaultSchedules);
}

}  // namespace
}  // namespace kareus::runtime
