// The process-wide safety net that puts GPU clocks back when a process ends in any way other than
// an orderly stop: normal exit (atexit), an uncaught exception (std::terminate), and SIGINT or
// SIGTERM. Frequency controllers register themselves; this file owns the process-global hooks so
// that no other code has to.
//
// Signals: the handler only writes the signal number to a pipe (write(2) is async-signal-safe;
// NVML calls are not). A watcher thread reads it, resets every registered controller, puts the
// previous disposition back and re-raises the signal, so the process dies (or the previous
// handler, e.g. Python's KeyboardInterrupt, runs) exactly as it would have without Kareus.
// The resets get kSignalResetDeadline: a device call that hangs cannot keep a process that was
// sent SIGTERM alive; the GPUs that answer are reset, the signal is re-raised at the deadline at
// the latest. Disarming puts the previous disposition back only while Kareus's handler is still
// the installed one, so a handler the application installed after start survives stop().
// A forked child starts with no registrations and the previous dispositions, so a data-loader
// worker's exit or signal never touches its parent's GPUs. SIGKILL cannot be caught: nothing
// helps there (`nvidia-smi -rgc` resets by hand).
//
// Thread-safety: all functions may be called from any thread.
// Example (what FrequencyController does):
//   register_for_reset(this, /*handle_signals=*/true);
//   ...
//   unregister_for_reset(this);   // after its own orderly reset
#pragma once

#include <chrono>

namespace kareus::runtime {

// How long a signal's resets may take before the signal is re-raised anyway.
inline constexpr std::chrono::milliseconds kSignalResetDeadline{3000};

class EmergencyResettable {
 public:
  // Resets the devices at once and stops applying further requests. Called from the watcher
  // thread, an atexit handler or the terminate handler; must not throw or wait on the caller.
  virtual void emergency_reset() noexcept = 0;

 protected:
  ~EmergencyResettable() = default;
};

void register_for_reset(EmergencyResettable* target, bool handle_signals);
// Returns once no emergency reset of `target` is running or can start.
void unregister_for_reset(EmergencyResettable* target);
// Resets every registered target now: what a signal, exit or terminate does.
void reset_all_registered() noexcept;

}  // namespace kareus::runtime
