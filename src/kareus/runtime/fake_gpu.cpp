#include "kareus/runtime/fake_gpu.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <csignal>

#include "kareus/runtime/nvml_gpu.hpp"

namespace kareus::runtime {
namespace {

struct GpuCallName {
  GpuCall call;
  std::string_view name;
  std::string_view nvml;
};

constexpr GpuCallName kGpuCalls[kGpuCallKinds] = {
    {GpuCall::kCurrentSmClock, "current_sm_clock", "nvmlDeviceGetClockInfo"},
    {GpuCall::kSetSmClocks, "set_sm_clocks", "nvmlDeviceSetGpuLockedClocks"},
    {GpuCall::kResetSmClocks, "reset_sm_clocks", "nvmlDeviceResetGpuLockedClocks"},
    {GpuCall::kLockMemoryClock, "lock_memory_clock", "nvmlDeviceSetMemoryLockedClocks"},
    {GpuCall::kResetMemoryClock, "reset_memory_clock", "nvmlDeviceResetMemoryLockedClocks"},
    {GpuCall::kPowerLimitConstraints, "power_limit_constraints",
     "nvmlDeviceGetPowerManagementLimitConstraints"},
    {GpuCall::kPowerLimit, "power_limit", "nvmlDeviceGetPowerManagementLimit"},
    {GpuCall::kSetPowerLimit, "set_power_limit", "nvmlDeviceSetPowerManagementLimit"},
    {GpuCall::kResetPowerLimit, "reset_power_limit", "nvmlDeviceSetPowerManagementLimit"},
    {GpuCall::kTotalEnergy, "total_energy", "nvmlDeviceGetTotalEnergyConsumption"},
    {GpuCall::kInstantPower, "instant_power", "nvmlDeviceGetPowerUsage"},
};

std::size_t slot(GpuCall call) {
  return static_cast<std::size_t>(call);
}

// nvmlErrorString's text for the codes faults use; the code's number otherwise.
std::string nvml_error_text(int code) {
  switch (code) {
    case kNvmlErrorNotSupported:
      return "Not Supported";
    case kNvmlErrorNoPermission:
      return "Insufficient Permissions";
    case kNvmlErrorTimeout:
      return "Timeout";
    case kNvmlErrorGpuIsLost:
      return "GPU is lost";
    case kNvmlErrorUnknown:
      return "Unknown Error";
    default:
      return fmt::format("NVML error {}", code);
  }
}

}  // namespace

std::string_view to_string(GpuCall call) {
  return kGpuCalls[slot(call)].name;
}

std::string_view nvml_function(GpuCall call) {
  return kGpuCalls[slot(call)].nvml;
}

std::optional<GpuCall> parse_gpu_call(std::string_view text) {
  for (const auto& entry : kGpuCalls) {
    if (entry.name == text) return entry.call;
  }
  return std::nullopt;
}

GpuFault parse_gpu_fault(std::string_view text) {
  const std::string what(text);
  auto bad = [&](const std::string& why) {
    return InputError(fmt::format(
        "fault '{}': {} (expected CALL@N:error=CODE, CALL@N:hang, CALL@N:lost or CALL@N:kill)",
        what, why));
  };
  const std::size_t at = text.find('@');
  const std::size_t colon = text.find(':', at == std::string_view::npos ? 0 : at);
  if (at == std::string_view::npos || colon == std::string_view::npos) throw bad("malformed");
  GpuFault fault;
  auto call = parse_gpu_call(text.substr(0, at));
  if (!call) {
    std::string names;
    for (const auto& entry : kGpuCalls)
      names += (names.empty() ? "" : ", ") + std::string(entry.name);
    throw bad(fmt::format("unknown call '{}' (one of {})", text.substr(0, at), names));
  }
  fault.call = *call;
  auto number = [&](std::string_view digits, long& out) {
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), out);
    return ec == std::errc() && end == digits.data() + digits.size();
  };
  if (!number(text.substr(at + 1, colon - at - 1), fault.occurrence) || fault.occurrence < 1) {
    throw bad("N must be a whole number >= 1");
  }
  const std::string_view kind = text.substr(colon + 1);
  if (kind == "hang") {
    fault.kind = GpuFault::Kind::kHang;
  } else if (kind == "lost") {
    fault.kind = GpuFault::Kind::kLost;
  } else if (kind == "kill") {
    fault.kind = GpuFault::Kind::kKill;
  } else if (kind.starts_with("error=")) {
    long code = 0;
    if (!number(kind.substr(6), code) || code <= 0) throw bad("CODE must be an NVML error number");
    fault.kind = GpuFault::Kind::kError;
    fault.nvml_code = static_cast<int>(code);
  } else {
    throw bad(fmt::format("unknown fault '{}'", kind));
  }
  return fault;
}

std::string to_string(const GpuFault& fault) {
  std::string kind;
  switch (fault.kind) {
    case GpuFault::Kind::kError:
      kind = fmt::format("error={}", fault.nvml_code);
      break;
    case GpuFault::Kind::kHang:
      kind = "hang";
      break;
    case GpuFault::Kind::kLost:
      kind = "lost";
      break;
    case GpuFault::Kind::kKill:
      kind = "kill";
      break;
  }
  return fmt::format("{}@{}:{}", to_string(fault.call), fault.occurrence, kind);
}

double model_power_w(const hardware::GpuSpec& gpu, double sm_clock_mhz, double load) {
  hardware::Activity activity = hardware::full_load_activity(gpu);
  const double share = std::clamp(load, 0.0, 1.0);
  activity.compute_sm_fraction *= share;
  activity.comm_sm_fraction *= share;
  activity.hbm_bytes_per_s *= share;
  activity.link_bytes_per_s *= share;
  return hardware::power_w(gpu, std::clamp(sm_clock_mhz, 1.0, gpu.max_clock_mhz), activity);
}

FakeGpuConfig make_fake_gpu_config(const hardware::GpuSpec& gpu, int index,
                                   std::shared_ptr<TimeSource> time) {
  FakeGpuConfig config;
  config.index = index;
  config.name = fmt::format("Fake {} (simulated)", gpu.display_name);
  for (double f : gpu.sm_clocks_mhz)
    config.sm_clocks_mhz.push_back(static_cast<int>(std::lround(f)));
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
  if (!(config_.hang_limit_s >= 0) || !(config_.energy_counter_wrap_mj >= 0) ||
      !(config_.energy_counter_start_mj >= 0)) {
    throw InputError("FakeGpu: hang_limit_s and the energy counter's wrap and start must be >= 0");
  }
  for (const GpuFault& fault : config_.faults) add_fault(fault);
  std::sort(config_.sm_clocks_mhz.rbegin(), config_.sm_clocks_mhz.rend());
  std::sort(config_.memory_clocks_mhz.rbegin(), config_.memory_clocks_mhz.rend());
  if (!config_.time) config_.time = steady_time_source();
  power_limit_mw_ = config_.start_power_limit_mw.value_or(limits.default_power_limit_mw);
  if (power_limit_mw_ < limits.min_power_limit_mw || power_limit_mw_ > limits.max_power_limit_mw) {
    throw InputError(fmt::format("FakeGpu: the power limit at start, {} mW, is outside [{}, {}] mW",
                                 power_limit_mw_, limits.min_power_limit_mw,
                                 limits.max_power_limit_mw));
  }
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

int FakeGpu::power_limit_setting_mw() const {
  std::lock_guard lock(mutex_);
  return power_limit_mw_;
}

long FakeGpu::sm_clock_calls() const {
  std::lock_guard lock(mutex_);
  return sm_clock_calls_;
}

int FakeGpu::current_sm_clock_mhz() const {
  strike(GpuCall::kCurrentSmClock);
  std::lock_guard lock(mutex_);
  return effective_clock_locked();
}

void FakeGpu::set_locked_sm_clocks(int min_clock_mhz, int max_clock_mhz) {
  if (min_clock_mhz <= 0 || max_clock_mhz < min_clock_mhz) {
    throw DeviceError(fmt::format("GPU {}: cannot lock the SM clock to [{}, {}] MHz", config_.index,
                                  min_clock_mhz, max_clock_mhz));
  }
  strike(GpuCall::kSetSmClocks);
  std::lock_guard lock(mutex_);
  advance_locked();
  locked_sm_ = {min_clock_mhz, max_clock_mhz};
  ++sm_clock_calls_;
}

void FakeGpu::reset_locked_sm_clocks() {
  strike(GpuCall::kResetSmClocks);
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
  strike(GpuCall::kLockMemoryClock);
  std::lock_guard lock(mutex_);
  locked_memory_ = clock_mhz;
}

void FakeGpu::reset_memory_clock() {
  strike(GpuCall::kResetMemoryClock);
  std::lock_guard lock(mutex_);
  locked_memory_.reset();
}

PowerLimitConstraints FakeGpu::power_limit_constraints() const {
  strike(GpuCall::kPowerLimitConstraints);
  return config_.power_limits;
}

int FakeGpu::power_limit_mw() const {
  strike(GpuCall::kPowerLimit);
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
  strike(GpuCall::kSetPowerLimit);
  set_power_limit_unchecked(power_limit_mw);
}

void FakeGpu::set_power_limit_unchecked(int power_limit_mw) {
  std::lock_guard lock(mutex_);
  advance_locked();
  power_limit_mw_ = power_limit_mw;
}

void FakeGpu::reset_power_limit() {
  strike(GpuCall::kResetPowerLimit);
  set_power_limit_unchecked(config_.power_limits.default_power_limit_mw);
}

double FakeGpu::total_energy_mj() const {
  strike(GpuCall::kTotalEnergy);
  std::lock_guard lock(mutex_);
  advance_locked();
  double energy = config_.energy_update_period_s > 0 ? published_energy_mj_ : energy_mj_;
  if (config_.energy_counter_wrap_mj > 0) {
    energy = std::fmod(config_.energy_counter_start_mj + energy, config_.energy_counter_wrap_mj);
  }
  return energy;
}

std::optional<double> FakeGpu::energy_counter_wrap_mj() const {
  if (config_.energy_counter_wrap_mj > 0) return config_.energy_counter_wrap_mj;
  return std::nullopt;
}

double FakeGpu::true_energy_mj() const {
  std::lock_guard lock(mutex_);
  advance_locked();
  return energy_mj_;
}

void FakeGpu::add_fault(const GpuFault& fault) {
  if (fault.occurrence < 1) throw InputError("FakeGpu: a fault's occurrence counts from 1");
  std::lock_guard lock(fault_mutex_);
  faults_.push_back(fault);
}

void FakeGpu::release_hangs() {
  std::lock_guard lock(fault_mutex_);
  released_all_ = true;
  released_.notify_all();
}

long FakeGpu::calls(GpuCall call) const {
  std::lock_guard lock(fault_mutex_);
  return calls_[slot(call)];
}

long FakeGpu::failed_calls() const {
  std::lock_guard lock(fault_mutex_);
  return failed_;
}

long FakeGpu::hung_calls() const {
  std::lock_guard lock(fault_mutex_);
  return hung_;
}

long FakeGpu::hangs_timed_out() const {
  std::lock_guard lock(fault_mutex_);
  return hangs_timed_out_;
}

bool FakeGpu::lost() const {
  std::lock_guard lock(fault_mutex_);
  return lost_;
}

void FakeGpu::strike(GpuCall call) const {
  std::unique_lock lock(fault_mutex_);
  const long n = ++calls_[slot(call)];
  auto fail = [&](int code) {
    ++failed_;
    lock.unlock();
    throw_nvml_error(code, nvml_error_text(code), nvml_function(call), config_.index);
  };
  if (lost_) fail(kNvmlErrorGpuIsLost);
  for (std::size_t k = 0; k < faults_.size(); ++k) {
    const GpuFault fault = faults_[k];  // a copy: add_fault may grow the list while we wait
    if (fault.call != call || fault.occurrence != n) continue;
    switch (fault.kind) {
      case GpuFault::Kind::kHang: {
        ++hung_;
        const bool released =
            released_.wait_for(lock, std::chrono::duration<double>(config_.hang_limit_s),
                               [&] { return released_all_; });
        --hung_;
        if (!released) ++hangs_timed_out_;
        break;
      }
      case GpuFault::Kind::kLost:
        lost_ = true;
        fail(kNvmlErrorGpuIsLost);
        break;
      case GpuFault::Kind::kError:
        fail(fault.nvml_code);
        break;
      case GpuFault::Kind::kKill:
        std::raise(SIGKILL);
        break;
    }
  }
}

double FakeGpu::instant_power_mw() const {
  strike(GpuCall::kInstantPower);
  std::lock_guard lock(mutex_);
  return power_w_locked() * 1000;
}

}  // namespace kareus::runtime
