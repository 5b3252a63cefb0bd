#include "kareus/runtime/fake_gpu.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace kareus::runtime {

double model_power_w(const hardware::GpuSpec& gpu, double sm_clock_mhz, double load) {
  hardware::Activity activity = hardware::full_load_activity(gpu);
  const double share = std::clamp(load, 0.0, 1.0);
  activity.compute_sm_fraction *= share;
  activity.comm_sm_fraction *= share;
  activity.hbm_bytes_per_s *= share;
  activity.link_bytes_per_s *= share;
  return hardware::power_w(gpu, std::clamp(sm_clock_mhz, 1.0, gpu.max_clock_mhz), activity);
}

FakeGpuConfig make_fake_gpu_config(const hardware::GpuSpec& gpu, int index, std::shared_ptr<TimeSource> time) {
  FakeGpuConfig config;
  config.index = index;
  config.name = fmt::format("Fake {} (simulated)", gpu.display_name);
  for (double f : gpu.sm_clocks_mhz) config.sm_clocks_mhz.push_back(static_cast<int>(std::lround(f)));
  config.memory_clocks_mhz = {1215};
  const int tdp_mw = static_cast<int>(std::lround(gpu.tdp_w * 1000));
  config.power_limits = {tdp_mw / 4, tdp_mw, tdp_mw};
  config.power_w = [gpu](double f, double load) { return model_power_w(gpu, f, load); };
  config.time = std::move(time);
  return config;
}

FakeGpuConfig make_fake_gpu_config(int index, std::shared_ptr<TimeSource> time) {
  static const hardware::GpuSpec a100 = hardware::load_gpu_preset("a100-sxm4-40gb");
  return make_fake_gpu_config(a100, index, std::move(time));
}

FakeGpu::FakeGpu(FakeGpuConfig config) : config_(std::move(config)) {
  if (config_.sm_clocks_mhz.empty()) throw InputError("FakeGpu: the SM clock list is empty");
  if (!config_.power_w) throw InputError("FakeGpu: no power function");
  const auto& limits = config_.power_limits;
  if (limits.min_power_limit_mw <= 0 || limits.max_power_limit_mw < limits.min_power_limit_mw ||
      limits.default_power_limit_mw < limits.min_power_limit_mw ||
      limits.default_power_limit_mw > limits.max_power_limit_mw) {
    throw InputError(fmt::format(
        "FakeGpu: power limits min {} / default {} / max {} mW are inconsistent",
        limits.min_power_limit_mw, limits.default_power_limit_mw, limits.max_power_limit_mw));
  }
  if (!(config_.energy_update_period_s >= 0)) {
    throw InputError("FakeGpu: energy_update_period_s must be >= 0");
  }
  std::sort(config_.sm_clocks_mhz.rbegin(), config_.sm_clocks_mhz.rend());
  std::sort(config_.memory_clocks_mhz.rbegin(), config_.memory_clocks_mhz.rend());
  if (!config_.time) config_.time = steady_time_source();
  power_limit_mw_ = limits.default_power_limit_mw;
  last_time_s_ = config_.time->now_s();
}

int FakeGpu::effective_clock_locked() const {
  const auto& clocks = config_.sm_clocks_mhz;  // highest first
  std::size_t top = 0;
  int floor_mhz = clocks.back();
  if (locked_sm_) {
    // The highest supported clock inside the lock; the lowest supported when the lock is below all.
    while (top + 1 < clocks.size() && clocks[top] > locked_sm_->second) ++top;
    floor_mhz = std::max(floor_mhz, std::min(locked_sm_->first, clocks[top]));
  }
  // Power capping: step down while over the limit by more than the enforcement's resolution
  // (0.1 W; a preset's rounded parameters put full load a hair off its TDP), never below the
  // lock's floor.
  constexpr double kResolutionMw = 100;
  std::size_t k = top;
  while (k + 1 < clocks.size() && clocks[k + 1] >= floor_mhz &&
         config_.power_w(clocks[k], load_) * 1000 > power_limit_mw_ + kResolutionMw) {
    ++k;
  }
  return clocks[k];
}

double FakeGpu::power_w_locked() const {
  return config_.power_w(effective_clock_locked(), load_);
}

void FakeGpu::advance_locked() const {
  double now = config_.time->now_s();
  if (now <= last_time_s_) return;
  double power_mw = power_w_locked() * 1000;
  double period = config_.energy_update_period_s;
  if (period > 0) {
    double last_update_s = std::floor(now / period) * period;
    if (last_update_s > last_time_s_) {
      published_energy_mj_ = energy_mj_ + power_mw * (last_update_s - last_time_s_);
    }
  }
  energy_mj_ += power_mw * (now - last_time_s_);
  last_time_s_ = now;
}

void FakeGpu::set_load(double load) {
  if (!(load >= 0 && load <= 1)) {
    throw InputError(fmt::format("FakeGpu {}: load {} is outside [0, 1]", config_.index, load));
  }
  std::lock_guard lock(mutex_);
  advance_locked();
  load_ = load;
}

double FakeGpu::load() const {
  std::lock_guard lock(mutex_);
  return load_;
}

std::optional<std::pair<int, int>> FakeGpu::locked_sm_clocks_mhz() const {
  std::lock_guard lock(mutex_);
  return locked_sm_;
}

std::optional<int> FakeGpu::locked_memory_clock_mhz() const {
  std::lock_guard lock(mutex_);
  return locked_memory_;
}

long FakeGpu::sm_clock_calls() const {
  std::lock_guard lock(mutex_);
  return sm_clock_calls_;
}

int FakeGpu::current_sm_clock_mhz() const {
  std::lock_guard lock(mutex_);
  return effective_clock_locked();
}

void FakeGpu::set_locked_sm_clocks(int min_clock_mhz, int max_clock_mhz) {
  if (min_clock_mhz <= 0 || max_clock_mhz < min_clock_mhz) {
    throw DeviceError(fmt::format("GPU {}: cannot lock the SM clock to [{}, {}] MHz", config_.index,
                                  min_clock_mhz, max_clock_mhz));
  }
  std::lock_guard lock(mutex_);
  advance_locked();
  locked_sm_ = {min_clock_mhz, max_clock_mhz};
  ++sm_clock_calls_;
}

void FakeGpu::reset_locked_sm_clocks() {
  std::lock_guard lock(mutex_);
  advance_locked();
  locked_sm_.reset();
  ++sm_clock_calls_;
}

void FakeGpu::lock_memory_clock(int clock_mhz) {
  if (clock_mhz <= 0) {
    throw DeviceError(
        fmt::format("GPU {}: cannot lock the memory clock to {} MHz", config_.index, clock_mhz));
  }
  std::lock_guard lock(mutex_);
  locked_memory_ = clock_mhz;
}

void FakeGpu::reset_memory_clock() {
  std::lock_guard lock(mutex_);
  locked_memory_.reset();
}

int FakeGpu::power_limit_mw() const {
  std::lock_guard lock(mutex_);
  return power_limit_mw_;
}

void FakeGpu::set_power_limit_mw(int power_limit_mw) {
  const auto& limits = config_.power_limits;
  if (power_limit_mw < limits.min_power_limit_mw || power_limit_mw > limits.max_power_limit_mw) {
    throw DeviceError(fmt::format("GPU {}: power limit {} mW is outside [{}, {}] mW", config_.index,
                                  power_limit_mw, limits.min_power_limit_mw,
                                  limits.max_power_limit_mw));
  }
  std::lock_guard lock(mutex_);
  advance_locked();
  power_limit_mw_ = power_limit_mw;
}

void FakeGpu::reset_power_limit() {
  set_power_limit_mw(config_.power_limits.default_power_limit_mw);
}

double FakeGpu::total_energy_mj() const {
  std::lock_guard lock(mutex_);
  advance_locked();
  return config_.energy_update_period_s > 0 ? published_energy_mj_ : energy_mj_;
}

double FakeGpu::instant_power_mw() const {
  std::lock_guard lock(mutex_);
  return power_w_locked() * 1000;
}

}  // namespace kareus::runtime
