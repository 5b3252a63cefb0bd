#include "kareus/runtime/reset_guard.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <mutex>
#include <thread>

namespace kareus::runtime {
namespace {

constexpr int kSignals[] = {SIGINT, SIGTERM};
constexpr int kSignalCount = 2;

// Read by the signal handler: only lock-free atomics and data written before the handler is
// installed.
std::atomic<int> g_pipe_write_fd{-1};
std::atomic<pid_t> g_owner_pid{0};
struct sigaction g_previous[kSignalCount];
std::atomic<bool> g_installed[kSignalCount];

static_assert(std::atomic<int>::is_always_lock_free && std::atomic<pid_t>::is_always_lock_free,
              "the signal handler needs lock-free atomics");

struct Registry {
  std::mutex lifecycle;  // arming and disarming; always taken before `targets_mutex`
  std::timed_mutex targets_mutex;
  std::map<EmergencyResettable*, bool> targets;  // -> wants signal handling
  int signal_users = 0;
  bool process_hooks = false;
  int pipe_read_fd = -1;
  std::thread* watcher = nullptr;  // a pointer, so that a forked child can drop it unjoined
  std::terminate_handler previous_terminate = nullptr;
};

// Never destroyed: the atexit and terminate hooks may run after static destructors.
Registry& registry() {
  static Registry* instance = new Registry;
  return *instance;
}

int signal_slot(int signo) {
  for (int k = 0; k < kSignalCount; ++k) {
    if (kSignals[k] == signo) return k;
  }
  return -1;
}

// Runs the disposition that was in place before ours. Async-signal-safe.
void forward_to_previous(int signo, siginfo_t* info, void* context) {
  int k = signal_slot(signo);
  if (k < 0) return;
  const struct sigaction& previous = g_previous[k];
  if (previous.sa_flags & SA_SIGINFO) {
    if (previous.sa_sigaction) previous.sa_sigaction(signo, info, context);
  } else if (previous.sa_handler == SIG_DFL) {
    ::sigaction(signo, &previous, nullptr);
    ::raise(signo);
  } else if (previous.sa_handler != SIG_IGN && previous.sa_handler) {
    previous.sa_handler(signo);
  }
}

extern "C" void on_reset_signal(int signo, siginfo_t* info, void* context) {
  int saved_errno = errno;
  int fd = g_pipe_write_fd.load();
  if (fd >= 0 && ::getpid() == g_owner_pid.load()) {
    auto byte = static_cast<unsigned char>(signo);
    [[maybe_unused]] ssize_t written = ::write(fd, &byte, 1);
  } else {
    forward_to_previous(signo, info, context);
  }
  errno = saved_errno;
}

bool ours_installed(int k) {
  struct sigaction current;
  if (::sigaction(kSignals[k], nullptr, &current) != 0) return false;
  return (current.sa_flags & SA_SIGINFO) && current.sa_sigaction == on_reset_signal;
}

// Puts the previous disposition back, but only while ours is the one installed: a handler the
// application installed after us (torchrun's, Lightning's) stays.
void restore_signal(int k) {
  if (g_installed[k].exchange(false) && ours_installed(k)) {
    ::sigaction(kSignals[k], &g_previous[k], nullptr);
  }
}

// Runs every registered reset on a thread of its own and waits at most kSignalResetDeadline for
// it: a device call that hangs (and the device lock it holds) must not keep a process that was
// told to end alive. Returns false when the deadline passed.
bool reset_all_registered_within_deadline() {
  struct Done {
    std::mutex mutex;
    std::condition_variable changed;
    bool done = false;
  };
  auto done = std::make_shared<Done>();
  std::thread([done] {
    reset_all_registered();
    std::lock_guard lock(done->mutex);
    done->done = true;
    done->changed.notify_all();
  }).detach();  // a hung reset thread dies with the process
  std::unique_lock lock(done->mutex);
  return done->changed.wait_for(lock, kSignalResetDeadline, [&] { return done->done; });
}

void watch_signals(int read_fd) {
  for (;;) {
    unsigned char byte = 0;
    ssize_t n = ::read(read_fd, &byte, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0 || byte == 0) return;  // 0: disarmed
    int signo = byte;
    int k = signal_slot(signo);
    spdlog::warn("caught {}: resetting GPU clocks before the process ends",
                 signo == SIGINT    ? "SIGINT"
                 : signo == SIGTERM ? "SIGTERM"
                                    : "a signal");
    if (!reset_all_registered_within_deadline()) {
      std::fputs(
          "kareus: resetting GPU clocks did not finish within the signal deadline (a "
          "device call hangs); ending anyway: run `nvidia-smi -rgc` on that GPU\n",
          stderr);
    }
    // Hand the signal to whoever had it before us: the default action ends the process.
    if (k >= 0) restore_signal(k);
    ::kill(::getpid(), signo);
  }
}

void on_exit_reset() {
  reset_all_registered();
}

void on_terminate() {
  reset_all_registered();
  std::terminate_handler previous = registry().previous_terminate;
  if (previous) previous();
  std::abort();
}

// fork(): keep the registry consistent across the fork, and give the child a clean slate.
void before_fork() {
  registry().lifecycle.lock();
  registry().targets_mutex.lock();
}

void after_fork_parent() {
  registry().targets_mutex.unlock();
  registry().lifecycle.unlock();
}

void after_fork_child() {
  Registry& r = registry();
  for (int k = 0; k < kSignalCount; ++k) restore_signal(k);
  int fd = g_pipe_write_fd.exchange(-1);
  if (fd >= 0) ::close(fd);
  if (r.pipe_read_fd >= 0) ::close(r.pipe_read_fd);
  r.pipe_read_fd = -1;
  r.watcher = nullptr;  // that thread exists only in the parent; leak the handle, never join it
  r.targets.clear();
  r.signal_users = 0;
  r.targets_mutex.unlock();
  r.lifecycle.unlock();
}

// Called with `lifecycle` held.
void arm_signals(Registry& r) {
  if (!r.watcher) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) {
      spdlog::warn(
          "cannot create the signal pipe ({}); GPU clocks will not be reset on SIGINT or "
          "SIGTERM",
          std::strerror(errno));
      return;
    }
    // The handler must never block on a full pipe.
    ::fcntl(fds[1], F_SETFL, ::fcntl(fds[1], F_GETFL) | O_NONBLOCK);
    r.pipe_read_fd = fds[0];
    g_pipe_write_fd.store(fds[1]);
    g_owner_pid.store(::getpid());
    r.watcher = new std::thread(watch_signals, fds[0]);
  }
  for (int k = 0; k < kSignalCount; ++k) {
    if (g_installed[k].load()) continue;
    struct sigaction action;
    std::memset(&action, 0, sizeof(action));
    action.sa_sigaction = on_reset_signal;
    action.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&action.sa_mask);
    if (::sigaction(kSignals[k], &action, &g_previous[k]) == 0) g_installed[k].store(true);
  }
}

// Called with `lifecycle` held and no signal user left.
void disarm_signals(Registry& r) {
  for (int k = 0; k < kSignalCount; ++k) restore_signal(k);
  if (!r.watcher) return;
  int fd = g_pipe_write_fd.exchange(-1);
  unsigned char stop = 0;
  [[maybe_unused]] ssize_t written = ::write(fd, &stop, 1);
  r.watcher->join();
  delete r.watcher;
  r.watcher = nullptr;
  ::close(fd);
  ::close(r.pipe_read_fd);
  r.pipe_read_fd = -1;
}

}  // namespace

void register_for_reset(EmergencyResettable* target, bool handle_signals) {
  Registry& r = registry();
  std::lock_guard lifecycle(r.lifecycle);
  if (!r.process_hooks) {
    r.process_hooks = true;
    std::atexit(on_exit_reset);
    r.previous_terminate = std::set_terminate(on_terminate);
    ::pthread_atfork(before_fork, after_fork_parent, after_fork_child);
  }
  {
    std::lock_guard lock(r.targets_mutex);
    r.targets[target] = handle_signals;
  }
  if (handle_signals) {
    ++r.signal_users;
    // Idempotent; also re-arms a signal whose handling already ran and restored the previous one.
    arm_signals(r);
  }
}

void unregister_for_reset(EmergencyResettable* target) {
  Registry& r = registry();
  std::lock_guard lifecycle(r.lifecycle);
  bool handled_signals = false;
  {
    std::lock_guard lock(r.targets_mutex);
    auto it = r.targets.find(target);
    if (it == r.targets.end()) return;
    handled_signals = it->second;
    r.targets.erase(it);
  }
  if (handled_signals && --r.signal_users == 0) disarm_signals(r);
}

void reset_all_registered() noexcept {
  Registry& r = registry();
  // Bounded wait: this may run in a terminate handler on a thread that holds the lock.
  if (!r.targets_mutex.try_lock_for(std::chrono::seconds(5))) {
    std::fputs("kareus: could not reset GPU clocks (registry busy); run `nvidia-smi -rgc`\n",
               stderr);
    return;
  }
  for (auto& [target, signals] : r.targets) target->emergency_reset();
  r.targets_mutex.unlock();
}

}  // namespace kareus::runtime
