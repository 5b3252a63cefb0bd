// Where the runtime reads the time: the steady clock in production, a hand-advanced clock in tests
// and in `kareus replay`, so that simulated devices and the energy monitor agree on one time axis
// and a run is deterministic.
//
// Thread-safety: both implementations may be read and (ManualTimeSource) advanced from any thread.
// Example:
//   auto time = std::make_shared<ManualTimeSource>();
//   FakeGpu gpu({.time = time});
//   time->advance_s(0.5);   // the fake's energy counter advances by 0.5 s at its current power
#pragma once

#include <atomic>
#include <memory>

namespace kareus::runtime {

class TimeSource {
 public:
  virtual ~TimeSource() = default;
  // Seconds on this source's own axis; only differences and the order of readings mean anything.
  virtual double now_s() const = 0;
};

// std::chrono::steady_clock in seconds since its epoch (never wall time: it can jump).
class SteadyTimeSource final : public TimeSource {
 public:
  double now_s() const override;
};

// A clock that moves only when told to; starts at `start_s`.
class ManualTimeSource final : public TimeSource {
 public:
  explicit ManualTimeSource(double start_s = 0) : now_s_(start_s) {}
  double now_s() const override { return now_s_.load(); }
  // Throws InputError when `seconds` is negative or not finite (time never runs backwards).
  void advance_s(double seconds);
  // Throws InputError when `time_s` is earlier than now.
  void set_s(double time_s);

 private:
  std::atomic<double> now_s_;
};

// The process's shared steady source (stateless; shared only to avoid an allocation per device).
std::shared_ptr<TimeSource> steady_time_source();

}  // namespace kareus::runtime
