// Tests of the frequency controller: callers never wait on a device, clocks are sent only when
// they change and snapped to supported ones, start actions, missing privilege, and the clocks are
// reset after an exception, a normal exit, an uncaught exception, SIGTERM and SIGINT (the last
// four in a forked child whose fake GPU logs to a file the parent reads).
#include "kareus/runtime/frequency_controller.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "kareus/runtime/fake_gpu.hpp"
#include "runtime/runtime_test_util.hpp"

namespace kareus::runtime {
namespace {

using testing::Contains;
using testing::FileLoggingGpu;

std::shared_ptr<FakeGpu> fake(int index = 0) {
  return std::make_shared<FakeGpu>(
      make_fake_gpu_config(index, std::make_shared<ManualTimeSource>()));
}

// A fake whose SM-clock setter blocks until the test releases it.
class GatedGpu : public FakeGpu {
 public:
  GatedGpu() : FakeGpu(make_fake_gpu_config()) {}
  void set_locked_sm_clocks(int min_clock_mhz, int max_clock_mhz) override {
    std::unique_lock lock(mutex_);
    entered_ = true;
    changed_.notify_all();
    changed_.wait(lock, [&] { return open_; });
    lock.unlock();
    FakeGpu::set_locked_sm_clocks(min_clock_mhz, max_clock_mhz);
  }
  void wait_until_entered() {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return entered_; });
  }
  void open() {
    std::lock_guard lock(mutex_);
    open_ = true;
    changed_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  bool entered_ = false, open_ = false;
};

TEST(FrequencyController, CallersNeverWaitForTheDevice) {
  auto gpu = std::make_shared<GatedGpu>();
  FrequencyController controller({gpu});
  controller.request_sm_clock(1410);
  gpu->wait_until_entered();  // the worker is now stuck inside the device call

  // While the device call hangs, more requests must still return. They run on another thread so
  // that a regression fails the test instead of hanging it.
  auto requests = std::async(std::launch::async, [&] {
    controller.request_sm_clock(1200);
    controller.request_sm_clock(990);
    return controller.stats(0);
  });
  ASSERT_EQ(requests.wait_for(std::chrono::seconds(60)), std::future_status::ready)
      << "request_sm_clock blocked on a device call";
  ControllerGpuStats during = requests.get();
  EXPECT_EQ(during.requests, 3);
  EXPECT_EQ(during.applied, 0);     // the first call has not returned yet
  EXPECT_EQ(during.superseded, 1);  // 1200 was overtaken by 990 before the worker got to it

  gpu->open();
  controller.wait_idle();
  EXPECT_EQ(gpu->locked_sm_clocks_mhz(), (std::pair{990, 990}));
  ControllerGpuStats after = controller.stats(0);
  EXPECT_EQ(after.applied, 2);  // 1410, then 990; 1200 never reached the device
  EXPECT_EQ(after.recent_latencies_s.size(), 2u);
  EXPECT_GT(after.max_latency_s, 0);
}

TEST(FrequencyController, SendsAClockOnlyWhenItChanges) {
  auto gpu = fake();
  FrequencyController controller({gpu});
  long calls_before = gpu->sm_clock_calls();
  for (int k = 0; k < 3; ++k) {
    controller.request_sm_clock(1005);
    controller.wait_idle();
  }
  controller.request_sm_clock(810);
  controller.wait_idle();
  controller.request_sm_clock(810);
  controller.wait_idle();
  EXPECT_EQ(gpu->sm_clock_calls() - calls_before, 2);
  ControllerGpuStats s = controller.stats(0);
  EXPECT_EQ(s.requests, 5);
  EXPECT_EQ(s.applied, 2);
  EXPECT_EQ(s.unchanged, 3);
  EXPECT_TRUE(Contains(controller.report(), "GPU 0: 5 requests, 2 clock changes (3 unchanged"));
}

TEST(FrequencyController, SnapsUnsupportedClocksToTheNearest) {
  auto gpu = fake();
  FrequencyController controller({gpu});
  controller.request_sm_clock(1000);  // between 990 and 1005
  controller.wait_idle();
  EXPECT_EQ(gpu->locked_sm_clocks_mhz(), (std::pair{1005, 1005}));
  controller.request_sm_clock(5000);
  controller.wait_idle();
  EXPECT_EQ(gpu->locked_sm_clocks_mhz(), (std::pair{1410, 1410}));
  EXPECT_EQ(controller.stats(0).snapped, 2);
  EXPECT_THROW(controller.request_sm_clock(0), InputError);
  EXPECT_THROW(controller.request_sm_clock(3, 1005), InputError);
}

TEST(FrequencyController, StartLocksMemoryAndResetsPowerLimitStopResetsClocks) {
  auto gpu = fake();
  gpu->set_power_limit_mw(300'000);
  {
    FrequencyController controller({gpu});
    EXPECT_EQ(gpu->locked_memory_clock_mhz(), 1215);
    EXPECT_EQ(gpu->power_limit_mw(), 400'000);
    controller.request_sm_clock(1005);
    controller.wait_idle();
    EXPECT_TRUE(gpu->locked_sm_clocks_mhz());
    EXPECT_TRUE(Contains(controller.report(), "GPU 0: power limit 300 W at start"));
    controller.stop();
    EXPECT_FALSE(gpu->locked_sm_clocks_mhz());
    EXPECT_FALSE(gpu->locked_memory_clock_mhz());
    // The administrator's cap comes back, and the report says so.
    EXPECT_EQ(gpu->power_limit_mw(), 300'000);
    EXPECT_TRUE(Contains(controller.report(),
                         "GPU 0: power limit 300 W at start, the default 400 W while running, "
                         "restored to 300 W"))
        << controller.report();
    controller.stop();  // idempotent
    EXPECT_THROW(controller.request_sm_clock(1005), InputError);
  }
  EXPECT_FALSE(gpu->locked_sm_clocks_mhz());
}

TEST(FrequencyController, ControlsEachGpuOnItsOwn) {
  auto a = fake(0), b = fake(1);
  FrequencyController controller({a, b});
  controller.request_sm_clock(1, 810);
  controller.wait_idle();
  EXPECT_FALSE(a->locked_sm_clocks_mhz());
  EXPECT_EQ(b->locked_sm_clocks_mhz(), (std::pair{810, 810}));
  controller.request_sm_clock(1200);
  controller.request_reset();
  controller.wait_idle();
  EXPECT_FALSE(a->locked_sm_clocks_mhz());
  EXPECT_FALSE(b->locked_sm_clocks_mhz());
}

TEST(FrequencyController, ResetsTheClocksWhenAnExceptionUnwindsPastIt) {
  auto gpu = fake();
  try {
    FrequencyController controller({gpu});
    controller.request_sm_clock(810);
    controller.wait_idle();
    ASSERT_TRUE(gpu->locked_sm_clocks_mhz());
    throw std::runtime_error("training step failed");
  } catch (const std::runtime_error&) {
  }
  EXPECT_FALSE(gpu->locked_sm_clocks_mhz());
  EXPECT_FALSE(gpu->locked_memory_clock_mhz());
}

// A fake that refuses every setter as a process without CAP_SYS_ADMIN would see it.
class UnprivilegedGpu : public FakeGpu {
 public:
  UnprivilegedGpu() : FakeGpu(make_fake_gpu_config()) {}
  [[noreturn]] void refuse() {
    throw GpuPermissionError(
        "GPU 0: nvmlDeviceSetGpuLockedClocks failed: Insufficient Permissions "
        "(NVML_ERROR_NO_PERMISSION); changing GPU clocks and power limits "
        "needs root or the CAP_SYS_ADMIN capability");
  }
  void set_locked_sm_clocks(int, int) override { refuse(); }
  void reset_locked_sm_clocks() override { refuse(); }
  void lock_memory_clock(int) override { refuse(); }
  void reset_power_limit() override { refuse(); }
};

TEST(FrequencyController, MissingPrivilegeIsOneMessageAndTheJobRunsOn) {
  auto gpu = std::make_shared<UnprivilegedGpu>();
  FrequencyController controller({gpu});
  EXPECT_FALSE(controller.clocks_enabled());
  controller.request_sm_clock(1005);  // counted, not sent
  controller.wait_idle();
  EXPECT_EQ(controller.stats(0).requests, 1);
  EXPECT_EQ(controller.stats(0).applied, 0);
  controller.stop();

  try {
    FrequencyController strict({gpu}, {.require_privilege = true});
    FAIL() << "require_privilege must throw";
  } catch (const GpuPermissionError& e) {
    EXPECT_TRUE(Contains(e.what(), "CAP_SYS_ADMIN"));
  }
}

TEST(FrequencyController, APowerLimitAtItsDefaultIsLeftAloneAndACapSurvivesEmergencies) {
  auto plain = fake(0), capped = fake(1);
  capped->set_power_limit_mw(250'000);
  FrequencyController controller({plain, capped});
  EXPECT_EQ(capped->power_limit_mw(), 400'000);
  EXPECT_EQ(controller.power_limit_note(0), "") << "nothing to restore at the default";
  reset_all_registered();  // a signal or exit
  EXPECT_EQ(capped->power_limit_mw(), 250'000);
  EXPECT_EQ(plain->power_limit_mw(), 400'000);
  EXPECT_FALSE(Contains(controller.report(), "GPU 0: power"));
}

TEST(FrequencyController, StopKeepsASignalHandlerTheApplicationInstalledAfterStart) {
  struct sigaction before {};
  ASSERT_EQ(::sigaction(SIGTERM, nullptr, &before), 0);
  auto gpu = fake();
  FrequencyController controller({gpu});
  // A framework (torchrun, Lightning) installs its own shutdown handler after Kareus started.
  struct sigaction application {};
  application.sa_handler = +[](int) {};
  sigemptyset(&application.sa_mask);
  ASSERT_EQ(::sigaction(SIGTERM, &application, nullptr), 0);
  controller.stop();
  struct sigaction after {};
  ASSERT_EQ(::sigaction(SIGTERM, nullptr, &after), 0);
  EXPECT_EQ(after.sa_handler, application.sa_handler)
      << "stop() put back the handler from before start";
  ::sigaction(SIGTERM, &before, nullptr);
  // With no later handler, stop() does put the one from before start back.
  {
    FrequencyController again({gpu});
    struct sigaction during {};
    ::sigaction(SIGTERM, nullptr, &during);
    EXPECT_NE(during.sa_handler, before.sa_handler);
  }
  ::sigaction(SIGTERM, nullptr, &after);
  EXPECT_EQ(after.sa_handler, before.sa_handler);
}

TEST(FrequencyController, EmergencyResetHaltsFurtherRequests) {
  auto gpu = fake();
  FrequencyController controller({gpu});
  controller.request_sm_clock(810);
  controller.wait_idle();
  reset_all_registered();  // what a signal or exit does
  EXPECT_TRUE(controller.halted());
  EXPECT_FALSE(gpu->locked_sm_clocks_mhz());
  controller.request_sm_clock(1005);
  controller.wait_idle();
  EXPECT_FALSE(gpu->locked_sm_clocks_mhz());
}

// --- Process ends: a child holds a controller whose fake GPU logs clock calls to a file. ---

struct ChildOutcome {
  int status = 0;
  std::string log;
};

// Forks; the child runs `hold` (which must lock a clock and then write one byte to `ready_fd`);
// then `finish(pid)` runs in the parent. Returns how the child ended and its GPU's log.
template <typename Hold, typename Finish>
ChildOutcome run_child(const std::string& name, Hold hold, Finish finish) {
  auto dir = testing::temp_dir(name);
  auto log = dir / "gpu.log";
  int ready[2];
  EXPECT_EQ(::pipe(ready), 0);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(ready[0]);
    hold(log, ready[1]);
    ::_exit(100);  // `hold` must not return
  }
  ::close(ready[1]);
  char byte = 0;
  EXPECT_EQ(::read(ready[0], &byte, 1), 1) << "the child died before locking a clock";
  ::close(ready[0]);
  finish(pid);
  ChildOutcome outcome;
  // Bounded wait: a child that fails to die is killed and reported.
  for (int k = 0; k < 600; ++k) {
    if (::waitpid(pid, &outcome.status, WNOHANG) == pid) {
      outcome.log = testing::slurp(log);
      std::filesystem::remove_all(dir);
      return outcome;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, &outcome.status, 0);
  ADD_FAILURE() << "the child did not end";
  outcome.log = testing::slurp(log);
  return outcome;
}

// Holds a controller with the clock locked at 810 MHz, then signals readiness.
FrequencyController* hold_locked(const std::filesystem::path& log, int ready_fd) {
  auto gpu = std::make_shared<FileLoggingGpu>(log);
  auto* controller = new FrequencyController({gpu});  // never deleted: only the hooks can reset
  controller->request_sm_clock(810);
  controller->wait_idle();
  [[maybe_unused]] auto n = ::write(ready_fd, "r", 1);
  return controller;
}

bool ends_with_reset(const std::string& log) {
  return log.find("lock 810\n") != std::string::npos && log.size() >= 6 &&
         log.compare(log.size() - 6, 6, "reset\n") == 0;
}

TEST(FrequencyControllerProcess, SigtermResetsTheClocksThenKillsTheProcess) {
  auto outcome = run_child(
      "sigterm",
      [](const std::filesystem::path& log, int ready_fd) {
        hold_locked(log, ready_fd);
        for (;;) ::pause();
      },
      [](pid_t pid) { ::kill(pid, SIGTERM); });
  ASSERT_TRUE(WIFSIGNALED(outcome.status)) << "status " << outcome.status;
  EXPECT_EQ(WTERMSIG(outcome.status), SIGTERM);
  EXPECT_TRUE(ends_with_reset(outcome.log)) << outcome.log;
}

// A fake whose SM-clock setter never returns once entered: a driver call that hangs.
class HungGpu : public FakeGpu {
 public:
  HungGpu() : FakeGpu(make_fake_gpu_config(0)) {}
  void set_locked_sm_clocks(int, int) override {
    entered_ = true;
    std::mutex never;
    std::unique_lock lock(never);
    std::condition_variable().wait(lock, [] { return false; });
  }
  std::atomic<bool> entered_{false};
};

TEST(FrequencyControllerProcess, SigtermEndsTheProcessInBoundedTimeDespiteAHungDeviceCall) {
  std::chrono::steady_clock::time_point signalled;
  auto outcome = run_child(
      "sigterm-hung",
      [](const std::filesystem::path& log, int ready_fd) {
        auto hung = std::make_shared<HungGpu>();
        auto answering = std::make_shared<FileLoggingGpu>(log, make_fake_gpu_config(1));
        auto* controller = new FrequencyController({hung, answering});
        controller->request_sm_clock(810);  // GPU 0's worker hangs in the call, holding its lock
        while (!hung->entered_ || !answering->locked_sm_clocks_mhz()) {
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
        [[maybe_unused]] auto n = ::write(ready_fd, "r", 1);
        for (;;) ::pause();
      },
      [&](pid_t pid) {
        signalled = std::chrono::steady_clock::now();
        ::kill(pid, SIGTERM);
      });
  const double took_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - signalled).count();
  ASSERT_TRUE(WIFSIGNALED(outcome.status)) << "status " << outcome.status;
  EXPECT_EQ(WTERMSIG(outcome.status), SIGTERM);
  // The GPU that answers is reset; the process ends within the stated bound (plus polling).
  EXPECT_TRUE(ends_with_reset(outcome.log)) << outcome.log;
  // The stated bound is kSignalResetDeadline (3 s), which covers the wait for the hung GPU (1 s).
  EXPECT_LT(took_s, std::chrono::duration<double>(kSignalResetDeadline).count() + 1.0);
}

TEST(FrequencyControllerProcess, SigintResetsTheClocksThenKillsTheProcess) {
  auto outcome = run_child(
      "sigint",
      [](const std::filesystem::path& log, int ready_fd) {
        hold_locked(log, ready_fd);
        for (;;) ::pause();
      },
      [](pid_t pid) { ::kill(pid, SIGINT); });
  ASSERT_TRUE(WIFSIGNALED(outcome.status)) << "status " << outcome.status;
  EXPECT_EQ(WTERMSIG(outcome.status), SIGINT);
  EXPECT_TRUE(ends_with_reset(outcome.log)) << outcome.log;
}

TEST(FrequencyControllerProcess, UncaughtExceptionResetsTheClocks) {
  auto outcome = run_child(
      "terminate",
      [](const std::filesystem::path& log, int ready_fd) {
        hold_locked(log, ready_fd);
        // An exception that nothing catches (gtest catches those of the test body, so throw on a
        // thread of our own): std::terminate, then abort.
        std::thread([] { throw std::runtime_error("uncaught in the training loop"); }).join();
        for (;;) ::pause();
      },
      [](pid_t) {});
  ASSERT_TRUE(WIFSIGNALED(outcome.status)) << "status " << outcome.status;
  EXPECT_EQ(WTERMSIG(outcome.status), SIGABRT);
  EXPECT_TRUE(ends_with_reset(outcome.log)) << outcome.log;
}

TEST(FrequencyControllerProcess, NormalExitResetsTheClocks) {
  auto outcome = run_child(
      "exit",
      [](const std::filesystem::path& log, int ready_fd) {
        hold_locked(log, ready_fd);
        std::exit(0);  // the controller is leaked: only the atexit hook can reset it
      },
      [](pid_t) {});
  ASSERT_TRUE(WIFEXITED(outcome.status)) << "status " << outcome.status;
  EXPECT_EQ(WEXITSTATUS(outcome.status), 0);
  EXPECT_TRUE(ends_with_reset(outcome.log)) << outcome.log;
}

// LeakSanitizer checks for leaks as a process exits, and locks its allocator to do so; a thread of
// the parent may have held that lock when it forked, and the child would wait on it forever. So a
// child forked from a process with threads skips the check (__lsan_is_turned_off, below).
std::atomic<bool> in_forked_child{false};

TEST(FrequencyControllerProcess, AForkedChildNeverResetsItsParentsGpus) {
  // A data-loader worker forked from a training process must not touch the parent's clocks when
  // it exits or is signalled.
  auto dir = testing::temp_dir("fork-child");
  auto log = dir / "gpu.log";
  auto gpu = std::make_shared<FileLoggingGpu>(log);
  FrequencyController controller({gpu});
  controller.request_sm_clock(810);
  controller.wait_idle();
  for (int how : {0, SIGTERM}) {
    pid_t pid = ::fork();
    if (pid == 0) {
      in_forked_child = true;
      if (how != 0) ::raise(how);
      std::exit(0);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    if (how == 0) {
      EXPECT_TRUE(WIFEXITED(status));
    } else {
      EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == how);
    }
  }
  EXPECT_EQ(testing::slurp(log), "lock 810\n");
  EXPECT_FALSE(controller.halted());
  controller.stop();
  EXPECT_EQ(testing::slurp(log), "lock 810\nreset\n");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kareus::runtime

// LeakSanitizer's hook (sanitizer/lsan_interface.h): nonzero skips the leak check at exit.
extern "C" int __lsan_is_turned_off() { return kareus::runtime::in_forked_child.load() ? 1 : 0; }
