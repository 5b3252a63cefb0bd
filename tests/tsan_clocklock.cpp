// Linked into the test binaries of a ThreadSanitizer build only (tests/CMakeLists.txt).
// libstdc++'s std::timed_mutex::try_lock_for and try_lock_until on the steady clock lock through
// pthread_mutex_clocklock, which the TSan runtimes of GCC 12 and clang 14 do not intercept: TSan
// never sees those locks taken, so it reports their unlock as one of an unlocked mutex and what they
// guard as racing. Defined here, ahead of libc's, the call becomes pthread_mutex_timedlock on the
// same deadline on the realtime clock, which TSan intercepts.
#include <pthread.h>
#include <time.h>

extern "C" int pthread_mutex_clocklock(pthread_mutex_t* mutex, clockid_t clock, const struct timespec* deadline) {
  if (clock == CLOCK_REALTIME) return pthread_mutex_timedlock(mutex, deadline);
  constexpr long long kNs = 1000000000LL;
  timespec now{}, real_now{};
  clock_gettime(clock, &now);
  clock_gettime(CLOCK_REALTIME, &real_now);
  long long left = (deadline->tv_sec - now.tv_sec) * kNs + (deadline->tv_nsec - now.tv_nsec);
  if (left < 0) left = 0;
  const long long real_ns = real_now.tv_nsec + left;
  const timespec real_deadline{static_cast<time_t>(real_now.tv_sec + real_ns / kNs), static_cast<long>(real_ns % kNs)};
  return pthread_mutex_timedlock(mutex, &real_deadline);
}
