// The task group and parallel loop the solver and the search run their threads with: oneTBB's,
// except under ThreadSanitizer. oneTBB's scheduler runs inside libtbb, which Debian ships
// uninstrumented, so TSan sees neither that a task starts after it was spawned nor that wait()
// returns after the tasks end, and it reports every hand-off of data to a task as a race (oneTBB's
// own task objects too, built in its instrumented headers). So under -fsanitize=thread these run
// the same bodies on std::threads, whose start and join TSan sees: what it then reports is ours.
// Either way a task's exception reaches the caller of wait() (the loop's caller), the first one
// if several throw.
//
// Thread-safety: one thread runs and waits on a TaskGroup.
// Example:
//   TaskGroup group;
//   group.run([&] { find_moves(chunk); });
//   group.wait();                                  // chunk's moves visible here
//   parallel_for(std::size_t{0}, n, [&](std::size_t k) { out[k] = f(in[k]); });
#pragma once

#if defined(__SANITIZE_THREAD__)
#define KAREUS_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define KAREUS_TSAN 1
#endif
#endif

#ifdef KAREUS_TSAN
#include <algorithm>
#include <exception>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>
#else
#include <tbb/parallel_for.h>
#include <tbb/task_group.h>

#include <utility>
#endif

namespace kareus {

#ifndef KAREUS_TSAN

class TaskGroup {
 public:
  template <typename F>
  void run(F&& task) {
    group_.run(std::forward<F>(task));
  }
  void wait() { group_.wait(); }

 private:
  tbb::task_group group_;
};

template <typename Index, typename F>
void parallel_for(Index first, Index last, const F& body) {
  tbb::parallel_for(first, last, body);
}

#else

namespace detail {
// Runs tasks on threads of their own and rethrows the first exception at join().
class Threads {
 public:
  Threads() = default;
  Threads(const Threads&) = delete;
  Threads& operator=(const Threads&) = delete;
  ~Threads() {
    for (std::thread& t : threads_) t.join();
  }
  template <typename F>
  void start(F task) {
    threads_.emplace_back([this, task = std::move(task)] {
      try {
        task();
      } catch (...) {
        std::lock_guard lock(mutex_);
        if (!error_) error_ = std::current_exception();
      }
    });
  }
  void join() {
    for (std::thread& t : threads_) t.join();
    threads_.clear();
    if (std::exception_ptr error = std::exchange(error_, nullptr)) std::rethrow_exception(error);
  }

 private:
  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::exception_ptr error_;
};
}  // namespace detail

class TaskGroup {
 public:
  template <typename F>
  void run(F&& task) {
    threads_.start(std::forward<F>(task));
  }
  void wait() { threads_.join(); }

 private:
  detail::Threads threads_;
};

template <typename Index, typename F>
void parallel_for(Index first, Index last, const F& body) {
  constexpr Index kThreads = 4;  // enough to interleave, whatever the machine
  const Index per_thread = (last - first + kThreads - 1) / kThreads;
  detail::Threads threads;
  for (Index begin = first; begin < last; begin += per_thread) {
    const Index end = std::min<Index>(last, begin + per_thread);
    threads.start([&body, begin, end] {
      for (Index k = begin; k < end; ++k) body(k);
    });
  }
  threads.join();
}

#endif

}  // namespace kareus
