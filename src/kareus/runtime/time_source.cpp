#include "kareus/runtime/time_source.hpp"

#include <fmt/format.h>

#include <chrono>
#include <cmath>

#include "kareus/core/error.hpp"

namespace kareus::runtime {

double SteadyTimeSource::now_s() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void ManualTimeSource::advance_s(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) {
    throw InputError(
        fmt::format("ManualTimeSource: cannot advance by {} s (must be finite and >= 0)", seconds));
  }
  double now = now_s_.load();
  while (!now_s_.compare_exchange_weak(now, now + seconds)) {
  }
}

void ManualTimeSource::set_s(double time_s) {
  double now = now_s_.load();
  if (!std::isfinite(time_s) || time_s < now) {
    throw InputError(
        fmt::format("ManualTimeSource: cannot set the time to {} s (now {} s; time "
                    "never runs backwards)",
                    time_s, now));
  }
  now_s_.store(time_s);
}

std::shared_ptr<TimeSource> steady_time_source() {
  static const std::shared_ptr<TimeSource> source = std::make_shared<SteadyTimeSource>();
  return source;
}

}  // namespace kareus::runtime
