#include "kareus/runtime/frequency_controller.hpp"

#include <fmt/format.h>
#include <pthread.h>
#include <signal.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <optional>
#include <string_view>
#include <thread>

namespace kareus::runtime {

double ControllerGpuStats::mean_latency_s() const {
  return applied > 0 ? total_latency_s / static_cast<double>(applied) : 0;
}

double ControllerGpuStats::median_latency_s() const {
  if (recent_latencies_s.empty()) return 0;
  std::vector<double> sorted = recent_latencies_s;
  auto middle = sorted.begin() + static_cast<long>(sorted.size() / 2);
  std::nth_element(sorted.begin(), middle, sorted.end());
  return *middle;
}

// What a GPU's SM clock should be: locked at a clock, or under the driver's management.
struct FrequencyController::Target {
  bool locked = false;
  int clock_mhz = 0;
  bool operator==(const Target&) const = default;
};

struct FrequencyController::Worker {
  std::shared_ptr<Gpu> gpu;
  std::vector<int> supported_mhz;  // highest first; empty: pass clocks through
  bool memory_locked = false;

  // Guards the request slot and the statistics; never held across a device call.
  std::mutex mutex;
  std::condition_variable wake, idle;
  std::optional<Target> desired;  // the latest request, pending or applied
  bool pending = false, busy = false, stop = false, warned_snap = false, warned_error = false;
  ControllerGpuStats stats;
  // NVML_ERROR_GPU_IS_LOST was seen: nothing is sent to the device any more (every call would
  // fail, and on a real GPU each may take the driver's own timeout).
  std::atomic<bool> lost{false};

  // Held across every device call, by the worker and by resets, so a reset is never undone by
  // a set still in flight. Timed: an emergency reset gives up on a GPU whose call hangs.
  std::timed_mutex device_mutex;
  // The power limit found at start, when start changed it; put back at stop.
  std::optional<int> start_power_limit_mw;
  int running_power_limit_mw = 0;
  std::string power_limit_note;   // what happened to the power limit, for report()
  std::optional<Target> applied;  // what the device has; nullopt: unknown

  std::thread thread;
};

namespace {

template <typename W>
void count_start_error(W& w, const std::exception& e) {
  std::lock_guard lock(w.mutex);
  ++w.stats.errors;
  w.stats.last_error = e.what();
}

}  // namespace

FrequencyController::FrequencyController(std::vector<std::shared_ptr<Gpu>> gpus,
                                         FrequencyControllerOptions options)
    : options_(options) {
  if (gpus.empty()) throw InputError("FrequencyController: no GPUs to control");
  for (auto& gpu : gpus) {
    if (!gpu) throw InputError("FrequencyController: a GPU is null");
    auto worker = std::make_unique<Worker>();
    worker->supported_mhz = gpu->supported_sm_clocks_mhz();
    std::sort(worker->supported_mhz.rbegin(), worker->supported_mhz.rend());
    worker->gpu = std::move(gpu);
    workers_.push_back(std::move(worker));
  }
  // Registered before anything is changed, so that every change is covered.
  register_for_reset(this, options_.reset_on_signals);
  try {
    for (auto& w : workers_) {
      // Each start action on its own: a refusal of one (no privilege, no such feature) leaves
      // what the other did to be undone at stop, e.g. a power limit reset before a memory clock
      // the GPU cannot lock.
      auto start_action = [&](auto&& action, auto&& undo_nothing) {
        try {
          action();
        } catch (const GpuPermissionError& e) {
          undo_nothing();
          count_start_error(*w, e);
          if (options_.require_privilege) throw;
          missing_privilege(e);
        } catch (const GpuNotSupportedError& e) {
          undo_nothing();
          count_start_error(*w, e);
          spdlog::warn("{}; continuing without it", e.what());
        }
      };
      if (options_.reset_power_limit) {
        start_action(
            [&] {
              // An administrator's cap is remembered and restored at stop: the plan's clocks are
              // planned at the default limit, but the machine's setting outlives the job.
              int before_mw = w->gpu->power_limit_mw();
              int default_mw = w->gpu->power_limit_constraints().default_power_limit_mw;
              if (before_mw != default_mw) {
                std::lock_guard device(w->device_mutex);
                w->start_power_limit_mw = before_mw;  // before the call, as for the memory clock
                w->gpu->reset_power_limit();
                w->running_power_limit_mw = default_mw;
              }
            },
            [&] { w->start_power_limit_mw.reset(); });
      }
      if (options_.lock_memory_clock) {
        start_action(
            [&] {
              auto memory = w->gpu->supported_memory_clocks_mhz();
              if (!memory.empty()) {
                std::lock_guard device(w->device_mutex);
                w->memory_locked = true;  // before the call: a reset after a partial failure is
                                          // harmless
                w->gpu->lock_memory_clock(*std::max_element(memory.begin(), memory.end()));
              }
            },
            [&] { w->memory_locked = false; });
      }
    }
    for (auto& w : workers_) {
      Worker* worker = w.get();
      worker->thread = std::thread([this, worker] { run_worker(*worker); });
    }
  } catch (...) {
    for (auto& w : workers_) {
      if (w->thread.joinable()) {
        {
          std::lock_guard lock(w->mutex);
          w->stop = true;
        }
        w->wake.notify_all();
        w->thread.join();
      }
    }
    reset_devices(/*quiet=*/true, nullptr);
    unregister_for_reset(this);
    throw;
  }
}

FrequencyController::~FrequencyController() {
  try {
    stop();
  } catch (const std::exception& e) {
    spdlog::error("frequency controller: stopping failed: {}", e.what());
  }
}

const std::shared_ptr<Gpu>& FrequencyController::gpu(std::size_t position) const {
  if (position >= workers_.size()) {
    throw InputError(fmt::format("GPU position {} is out of range: the controller has {}", position,
                                 workers_.size()));
  }
  return workers_[position]->gpu;
}

void FrequencyController::missing_privilege(const GpuPermissionError& error) {
  clocks_enabled_ = false;
  std::call_once(privilege_message_, [&] {
    spdlog::error(
        "{}. Kareus will leave the GPU clocks as they are; the job runs, but the plan's "
        "clocks are not applied.",
        error.what());
  });
}

void FrequencyController::request_sm_clock(int clock_mhz) {
  for (std::size_t k = 0; k < workers_.size(); ++k) request_sm_clock(k, clock_mhz);
}

void FrequencyController::request_sm_clock(std::size_t position, int clock_mhz) {
  if (clock_mhz <= 0) throw InputError(fmt::format("SM clock {} MHz must be positive", clock_mhz));
  gpu(position);  // range check
  Worker& w = *workers_[position];
  int snapped = w.supported_mhz.empty() ? clock_mhz : nearest_clock_mhz(w.supported_mhz, clock_mhz);
  enqueue(w, {true, snapped}, snapped != clock_mhz, clock_mhz);
}

void FrequencyController::request_reset() {
  for (auto& w : workers_) enqueue(*w, {false, 0}, false, 0);
}

void FrequencyController::enqueue(Worker& w, const Target& target, bool snapped,
                                  int requested_mhz) {
  if (stopped_) throw InputError("the frequency controller was stopped; make a new one");
  bool warn_snap = false;
  {
    std::lock_guard lock(w.mutex);
    ++w.stats.requests;
    if (snapped) {
      ++w.stats.snapped;
      warn_snap = !w.warned_snap;
      w.warned_snap = true;
    }
    if (halted_ || !clocks_enabled_ || w.lost) return;
    if (w.desired == target) {
      ++w.stats.unchanged;
    } else {
      if (w.pending) ++w.stats.superseded;
      w.desired = target;
      w.pending = true;
      w.wake.notify_one();
    }
  }
  if (warn_snap) {
    spdlog::warn(
        "GPU {} does not support {} MHz; using the nearest supported clock, {} MHz (further "
        "clocks are snapped likewise without a warning)",
        w.gpu->index(), requested_mhz, target.clock_mhz);
  }
}

void FrequencyController::run_worker(Worker& w) {
  // Signals belong to the application's threads; the worker must never be the one to take them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  std::unique_lock lock(w.mutex);
  for (;;) {
    w.wake.wait(lock, [&] { return w.stop || w.pending; });
    if (w.stop) break;  // pending requests are moot: stop() resets the clocks
    Target target = *w.desired;
    w.pending = false;
    w.busy = true;
    lock.unlock();

    std::optional<double> latency_s;
    std::optional<std::string> error;
    bool unchanged = false, lost_now = false;
    {
      std::lock_guard device(w.device_mutex);
      if (halted_ || !clocks_enabled_ || w.lost) {
        unchanged = true;
      } else if (w.applied == target) {
        unchanged = true;
      } else {
        auto start = std::chrono::steady_clock::now();
        try {
          if (target.locked) {
            w.gpu->set_locked_sm_clocks(target.clock_mhz, target.clock_mhz);
          } else {
            w.gpu->reset_locked_sm_clocks();
          }
          w.applied = target;
        } catch (const GpuPermissionError& e) {
          missing_privilege(e);
          error = e.what();
        } catch (const GpuLostError& e) {
          w.applied.reset();
          w.lost = true;
          lost_now = true;
          error = e.what();
        } catch (const std::exception& e) {
          w.applied.reset();  // unknown after a failure: the next request is sent again
          error = e.what();
        }
        latency_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      }
    }

    lock.lock();
    if (unchanged) ++w.stats.unchanged;
    if (latency_s) {
      ++w.stats.applied;
      w.stats.total_latency_s += *latency_s;
      w.stats.max_latency_s = std::max(w.stats.max_latency_s, *latency_s);
      auto& recent = w.stats.recent_latencies_s;
      if (recent.size() == ControllerGpuStats::kRecentLatencies) recent.erase(recent.begin());
      recent.push_back(*latency_s);
    }
    if (error) {
      ++w.stats.errors;
      w.stats.last_error = *error;
      if (lost_now) {
        // Terminal, so said apart from the first-error warning, and only once: nothing more is
        // sent to this GPU.
        spdlog::error(
            "frequency controller: {}; Kareus stops setting this GPU's clocks (the driver resets "
            "a GPU that comes back)",
            *error);
        w.warned_error = true;
      } else if (!w.warned_error && clocks_enabled_) {
        spdlog::warn(
            "frequency controller: {} (further errors on this GPU are counted, not logged)",
            *error);
        w.warned_error = true;
      }
    }
    w.busy = false;
    w.idle.notify_all();
  }
  w.busy = false;
  w.idle.notify_all();
}

void FrequencyController::wait_idle() {
  for (auto& w : workers_) {
    std::unique_lock lock(w->mutex);
    w->idle.wait(lock, [&] { return (!w->pending && !w->busy) || w->stop; });
  }
}

namespace {

// A restore that fails for a reason that may pass (NVML_ERROR_TIMEOUT, NVML_ERROR_UNKNOWN, ...) is
// tried again, kResetAttempts times in all; a lost GPU, a missing privilege or a missing feature
// is final. Each failed attempt is one line (`say`); returns the last failure, or nullopt.
constexpr int kResetAttempts = 3;

template <typename Call, typename Say>
std::optional<std::string> attempt_restore(std::atomic<bool>& lost, long& failures, Call&& call,
                                           Say&& say) {
  std::optional<std::string> last;
  for (int k = 1; k <= kResetAttempts; ++k) {
    try {
      call();
      return std::nullopt;
    } catch (const GpuLostError& e) {
      lost = true;
      ++failures;
      say(e.what(), /*final=*/true);
      return std::string(e.what());
    } catch (const GpuPermissionError& e) {
      ++failures;
      say(e.what(), true);
      return std::string(e.what());
    } catch (const GpuNotSupportedError& e) {
      ++failures;
      say(e.what(), true);
      return std::string(e.what());
    } catch (const std::exception& e) {
      ++failures;
      last = e.what();
      say(e.what(), k == kResetAttempts);
    }
  }
  return last;
}

}  // namespace

void FrequencyController::reset_devices(
    bool quiet, const std::chrono::steady_clock::time_point* deadline) noexcept {
  for (auto& w : workers_) {
    std::unique_lock device(w->device_mutex, std::defer_lock);
    if (deadline) {
      // A worker stuck in a device call holds the lock: skip that GPU, reset the others.
      if (!device.try_lock_until(*deadline)) {
        std::fprintf(stderr,
                     "kareus: GPU %d does not answer (a device call hangs); its clocks were not "
                     "reset: run `nvidia-smi -rgc -i %d`\n",
                     w->gpu->index(), w->gpu->index());
        continue;
      }
    } else {
      device.lock();
    }
    const int index = w->gpu->index();
    if (w->lost) {
      // Said once when it was lost; a lost GPU answers nothing, and the driver resets it.
      w->memory_locked = false;
      if (w->start_power_limit_mw) {
        w->power_limit_note =
            fmt::format("power limit {:.0f} W at start NOT restored: the GPU is lost",
                        *w->start_power_limit_mw / 1e3);
        w->start_power_limit_mw.reset();
      }
      continue;
    }
    long failures = 0;
    // Without privilege nothing was locked, so a refused SM-clock reset has nothing to undo.
    auto say = [&](const char* what, const char* error, bool final) {
      if (quiet || (!clocks_enabled_ && std::string_view(what) == "SM clock")) return;
      if (final) {
        spdlog::error("resetting GPU {}'s {} failed: {}", index, what, error);
      } else {
        spdlog::warn("resetting GPU {}'s {} failed: {}; trying again", index, what, error);
      }
    };
    if (!attempt_restore(
            w->lost, failures, [&] { w->gpu->reset_locked_sm_clocks(); },
            [&](const char* error, bool final) { say("SM clock", error, final); })) {
      w->applied = Target{false, 0};
    }
    if (w->memory_locked && !w->lost) {
      if (!attempt_restore(
              w->lost, failures, [&] { w->gpu->reset_memory_clock(); },
              [&](const char* error, bool final) { say("memory clock", error, final); })) {
        w->memory_locked = false;
      }
    }
    if (w->start_power_limit_mw) {
      int restore_mw = *w->start_power_limit_mw;
      std::optional<std::string> error;
      const bool lost_before_limit = w->lost;
      if (w->lost) {
        error = "the GPU is lost";
      } else {
        error = attempt_restore(
            w->lost, failures, [&] { w->gpu->set_power_limit_mw(restore_mw); },
            [&](const char* text, bool final) {
              // The final failure is the note's own line below.
              if (!final && !quiet) {
                spdlog::warn("GPU {}: restoring the power limit failed: {}; trying again", index,
                             text);
              }
            });
      }
      if (!error) {
        w->start_power_limit_mw.reset();
        w->power_limit_note = fmt::format(
            "power limit {:.0f} W at start, the default {:.0f} W while running, restored to "
            "{:.0f} W",
            restore_mw / 1e3, w->running_power_limit_mw / 1e3, restore_mw / 1e3);
      } else {
        w->power_limit_note =
            fmt::format("power limit {:.0f} W at start NOT restored: {}", restore_mw / 1e3, *error);
        // A GPU lost in this reset was said so already, by the call that found it.
        if (!quiet && !lost_before_limit) spdlog::error("GPU {}: {}", index, w->power_limit_note);
      }
    }
    if (failures > 0) {
      std::lock_guard lock(w->mutex);
      w->stats.errors += failures;
    }
  }
}

void FrequencyController::emergency_reset() noexcept {
  halted_ = true;
  const auto deadline = std::chrono::steady_clock::now() + kEmergencyDeviceWait;
  reset_devices(/*quiet=*/false, &deadline);
}

void FrequencyController::stop() {
  std::lock_guard stopping(stop_mutex_);
  if (stopped_.exchange(true)) return;
  for (auto& w : workers_) {
    {
      std::lock_guard lock(w->mutex);
      w->stop = true;
    }
    w->wake.notify_all();
    w->idle.notify_all();
  }
  for (auto& w : workers_) {
    if (w->thread.joinable()) w->thread.join();
  }
  reset_devices(/*quiet=*/false, nullptr);
  spdlog::debug("frequency controller stopped; clocks reset\n{}", report());
  // Last: until here a signal or exit must still be able to reset the clocks.
  unregister_for_reset(this);
}

bool FrequencyController::lost(std::size_t position) const {
  gpu(position);  // range check
  return workers_[position]->lost.load();
}

ControllerGpuStats FrequencyController::stats(std::size_t position) const {
  gpu(position);  // range check
  Worker& w = *workers_[position];
  std::lock_guard lock(w.mutex);
  return w.stats;
}

std::string FrequencyController::power_limit_note(std::size_t position) const {
  gpu(position);  // range check
  Worker& w = *workers_[position];
  std::unique_lock device(w.device_mutex, std::defer_lock);
  if (!device.try_lock_for(std::chrono::milliseconds(100))) return "";
  if (!w.power_limit_note.empty()) return w.power_limit_note;
  if (w.start_power_limit_mw) {
    return fmt::format(
        "power limit {:.0f} W at start, the default {:.0f} W while running (restored "
        "at stop)",
        *w.start_power_limit_mw / 1e3, w.running_power_limit_mw / 1e3);
  }
  return "";
}

std::string FrequencyController::report() const {
  std::string out;
  for (std::size_t k = 0; k < workers_.size(); ++k) {
    ControllerGpuStats s = stats(k);
    out += fmt::format(
        "GPU {}: {} requests, {} clock changes ({} unchanged, {} superseded, {} snapped, {} "
        "errors); "
        "set latency median {:.3f} ms, mean {:.3f} ms, max {:.3f} ms\n",
        workers_[k]->gpu->index(), s.requests, s.applied, s.unchanged, s.superseded, s.snapped,
        s.errors, s.median_latency_s() * 1e3, s.mean_latency_s() * 1e3, s.max_latency_s * 1e3);
    if (workers_[k]->lost) {
      out += fmt::format("GPU {}: lost ({}); its clocks were not reset\n",
                         workers_[k]->gpu->index(), s.last_error);
    }
    std::string note = power_limit_note(k);
    if (!note.empty()) out += fmt::format("GPU {}: {}\n", workers_[k]->gpu->index(), note);
  }
  return out;
}

}  // namespace kareus::runtime
