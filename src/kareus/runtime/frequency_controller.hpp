// Applies SM clocks to GPUs without ever making the training loop wait: one worker thread per GPU
// owns that GPU's setters, and callers only record the clock they want. A clock reaches the
// device only when it differs from the one already there; a request overtaken by a newer one
// before its worker got to it is dropped (only the latest clock matters). Every device call's
// latency is recorded (stats(), report()).
//
// At start the memory clock is locked to its maximum (SM clocks are planned at it) and the power
// limit is reset to the default, so the plan's clocks are what the GPU runs. The locked clocks and
// the power limit found at start (an administrator's cap) are always put back: on stop(),
// destruction, normal exit, an uncaught exception (std::terminate), SIGINT and SIGTERM
// (reset_guard.hpp); report() says what the power limit was and that it was restored. On a signal
// or exit, a GPU whose device call hangs is skipped after kEmergencyDeviceWait (all GPUs together)
// so that the others are still reset and the process can end. A clock the GPU does not support is
// snapped to the nearest supported one, with one warning per GPU. Missing privilege (clock setting
// needs root or CAP_SYS_ADMIN) is one clear error message, after which the controller keeps the
// clocks as they are and the job runs on; with `require_privilege` the constructor throws instead.
//
// Device faults: a failed clock call is counted (stats().errors) and the first one per GPU logged;
// the next request is sent again. A GPU reported lost (GpuLostError, NVML_ERROR_GPU_IS_LOST) is
// said once and then left alone: requests to it are counted and dropped, and no reset is tried. A
// restore at stop or in an emergency that fails for a reason that may pass (a timeout, an unknown
// error) is tried again, three attempts in all, each failure one line. Bounds on the caller:
// request_* never waits on a device, only on a lock no device call holds; report() and
// power_limit_note() wait at most 100 ms per GPU busy in a call; wait_idle() and stop() wait for a
// device call in flight, as long as it takes (a hang holds them; a signal or exit gives up on it
// after kEmergencyDeviceWait).
//
// Thread-safety: request_*, wait_idle, stats and report may be called from any thread; stop() from
// one thread at a time. After a signal or exit reset the controller is halted: requests are
// ignored, because the process is on its way out.
// Example:
//   FrequencyController controller(gpus.all());
//   controller.request_sm_clock(1230);   // returns at once; the worker locks the clock
//   ...
//   controller.stop();                    // or let the destructor reset the clocks
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kareus/runtime/gpu.hpp"
#include "kareus/runtime/reset_guard.hpp"

namespace kareus::runtime {

// How long an emergency reset (signal, exit, terminate) waits for GPUs busy in a device call.
inline constexpr std::chrono::milliseconds kEmergencyDeviceWait{1000};

struct FrequencyControllerOptions {
  bool lock_memory_clock = true;   // to the highest supported, at start (reset at stop)
  bool reset_power_limit = true;   // to the default, at start (the start value restored at stop)
  bool reset_on_signals = true;    // SIGINT / SIGTERM reset the clocks, then re-raise
  bool require_privilege = false;  // throw GpuPermissionError at start instead of warning
};

struct ControllerGpuStats {
  long requests = 0;    // clocks or resets asked of this GPU
  long unchanged = 0;   // the GPU was already at, or headed to, that state: nothing sent
  long superseded = 0;  // overtaken by a newer request before the worker reached it
  long snapped = 0;     // moved to the nearest supported clock
  long applied = 0;     // device calls made (each one's latency is recorded)
  long errors = 0;      // device calls that failed: the worker's and the restores' at stop
  std::string last_error;
  double total_latency_s = 0;
  double max_latency_s = 0;
  std::vector<double> recent_latencies_s;  // the last kRecentLatencies calls, oldest first

  static constexpr std::size_t kRecentLatencies = 4096;
  double mean_latency_s() const;
  double median_latency_s() const;  // of the recent calls; 0 when none
};

class FrequencyController final : private EmergencyResettable {
 public:
  // Runs the start actions on the caller's thread, then starts one worker per GPU. Throws
  // InputError on an empty or null GPU list; GpuPermissionError only with `require_privilege`.
  explicit FrequencyController(std::vector<std::shared_ptr<Gpu>> gpus,
                               FrequencyControllerOptions options = {});
  ~FrequencyController();
  FrequencyController(const FrequencyController&) = delete;
  FrequencyController& operator=(const FrequencyController&) = delete;

  // Never blocks on a device. Throws InputError on a clock <= 0, a position out of range, or
  // after stop().
  void request_sm_clock(int clock_mhz);  // every GPU
  void request_sm_clock(std::size_t position, int clock_mhz);
  void request_reset();  // every GPU back to the driver's clock management

  // Blocks until every request made so far has reached its device (tests, `kareus replay`).
  void wait_idle();
  // Stops the workers and resets the locked clocks (and the memory clock it locked). Idempotent.
  void stop();

  std::size_t size() const { return workers_.size(); }
  const std::shared_ptr<Gpu>& gpu(std::size_t position) const;
  // False after missing privilege: requests are counted but no clock is sent.
  bool clocks_enabled() const { return clocks_enabled_.load(); }
  bool halted() const { return halted_.load(); }
  // True once the GPU at `position` was reported lost: nothing is sent to it any more.
  bool lost(std::size_t position) const;
  ControllerGpuStats stats(std::size_t position) const;
  // One line per GPU: requests, changes, latency; and a line on the power limit where start
  // changed it (its value at start, and whether it was restored).
  std::string report() const;
  // That power-limit line's text; empty when start left the limit alone.
  std::string power_limit_note(std::size_t position) const;

 private:
  struct Target;
  struct Worker;
  void enqueue(Worker& worker, const Target& target, bool snapped, int requested_mhz);
  void run_worker(Worker& worker);
  void missing_privilege(const GpuPermissionError& error);
  // `deadline`: give up on GPUs whose device lock is not free by then (emergencies only).
  void reset_devices(bool quiet, const std::chrono::steady_clock::time_point* deadline) noexcept;
  void emergency_reset() noexcept override;

  FrequencyControllerOptions options_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::atomic<bool> clocks_enabled_{true};
  std::atomic<bool> halted_{false};
  std::atomic<bool> stopped_{false};
  std::once_flag privilege_message_;
  std::mutex stop_mutex_;
};

}  // namespace kareus::runtime
