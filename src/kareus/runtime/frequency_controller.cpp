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
      try {
        if (options_.reset_power_limit) {
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
        }
        if (options_.lock_memory_clock) {
          auto memory = w->gpu->supported_memory_clocks_mhz();
          if (!memory.empty()) {
            std::lock_guard device(w->device_mutex);
            w->memory_locked =
                true;  // before the call: a reset after a partial failure is harmless
            w->gpu->lock_memory_clock(*std::max_element(memory.begin(), memory.end()));
          }
        }
      } catch (const GpuPermissionError& e) {
        w->memory_locked = false;
        w->start_power_limit_mw.reset();
        if (options_.require_privilege) throw;
        missing_privilege(e);
      } catch (const GpuNotSupportedError& e) {
        w->memory_locked = false;
        w->start_power_limit_mw.reset();
        spdlog::warn("{}; continuing without it", e.what());
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
    if (halted_ || !clocks_enabled_) return;
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
    bool unchanged = false;
    {
      std::lock_guard device(w.device_mutex);
      if (halted_ || !clocks_enabled_) {
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
      if (!w.warned_error && clocks_enabled_) {
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
    try {
      w->gpu->reset_locked_sm_clocks();
      w->applied = Target{false, 0};
    } catch (const std::exception& e) {
      // Without privilege nothing was locked, so there is nothing to undo.
      if (!quiet && clocks_enabled_)
        spdlog::error("resetting GPU {}'s SM clock failed: {}", w->gpu->index(), e.what());
    }
    if (w->memory_locked) {
      try {
        w->gpu->reset_memory_clock();
        w->memory_locked = false;
      } catch (const std::exception& e) {
        if (!quiet)
          spdlog::error("resetting GPU {}'s memory clock failed: {}", w->gpu->index(), e.what());
      }
    }
    if (w->start_power_limit_mw) {
      int restore_mw = *w->start_power_limit_mw;
      try {
        w->gpu->set_power_limit_mw(restore_mw);
        w->start_power_limit_mw.reset();
        w->power_limit_note = fmt::format(
            "power limit {:.0f} W at start, the default {:.0f} W while running, restored to "
            "{:.0f} W",
            restore_mw / 1e3, w->running_power_limit_mw / 1e3, restore_mw / 1e3);
      } catch (const std::exception& e) {
        w->power_limit_note = fmt::format("power limit {:.0f} W at start NOT restored: {}",
                                          restore_mw / 1e3, e.what());
        if (!quiet) spdlog::error("GPU {}: {}", w->gpu->index(), w->power_limit_note);
      }
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
    std::string note = power_limit_note(k);
    if (!note.empty()) out += fmt::format("GPU {}: {}\n", workers_[k]->gpu->index(), note);
  }
  return out;
}

}  // namespace kareus::runtime
