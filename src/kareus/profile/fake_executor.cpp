#include "kareus/profile/fake_executor.hpp"

#include <fmt/format.h>

#include <cmath>

#include "kareus/core/error.hpp"

namespace kareus::profile {
namespace {

// The load in [0, 1] at which the fake device draws `power_w` at `clock_mhz` (power rises with
// load, so bisection finds it; clamped where the model's power is out of the device's range).
double load_for_power(const runtime::FakeGpu& device, double clock_mhz, double power_w) {
  double lo = 0, hi = 1;
  if (power_w <= device.power_w(clock_mhz, 0)) return 0;
  if (power_w >= device.power_w(clock_mhz, 1)) return 1;
  for (int i = 0; i < 60; ++i) {
    const double mid = (lo + hi) / 2;
    (device.power_w(clock_mhz, mid) < power_w ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}

}  // namespace

FakeExecutor::FakeExecutor(hardware::GpuSpec gpu, std::shared_ptr<runtime::FakeGpu> device,
                           std::shared_ptr<runtime::ManualTimeSource> time, const CollectiveGroups* groups,
                           FakeExecutorOptions options)
    : gpu_(std::move(gpu)),
      model_(gpu_),
      device_(std::move(device)),
      time_(std::move(time)),
      groups_(groups),
      options_(options) {
  KAREUS_CHECK(device_ && time_, "a fake executor needs its device and clock");
  evaluate::check_noise(options_.noise);
  if (!(options_.slowdown > 0) || !std::isfinite(options_.slowdown)) {
    throw InputError({"", 0, 0, "slowdown"}, "must be positive");
  }
}

void FakeExecutor::prepare(const workload::Partition& partition) {
  if (allocations_.contains(partition.key)) return;
  if (partition.collective && groups_ != nullptr) {
    const int members = groups_->of(partition.collective->group).size();
    if (members > 1 && members != partition.collective->ranks) {
      throw InputError({"", 0, 0, "ranks"},
                       fmt::format("partition {}'s {} spans {} ranks but its group here has {}", partition.key,
                                   workload::to_string(partition.collective->kind), partition.collective->ranks,
                                   members));
    }
  }
  allocations_[partition.key] = 1;
}

int FakeExecutor::allocations(const std::string& key) const {
  auto it = allocations_.find(key);
  return it == allocations_.end() ? 0 : it->second;
}

double FakeExecutor::run(const workload::Partition& partition, const workload::Knob& knob, long repetitions) {
  KAREUS_CHECK(allocations_.contains(partition.key), "run() before prepare()");
  KAREUS_CHECK(repetitions >= 1, "at least one repetition");
  ++runs_;
  if (partition.collective && groups_ != nullptr) {
    Group& group = groups_->of(partition.collective->group);
    if (group.size() > 1) {
      if (!every_member_agrees(group, fmt::format("{}|{:g}|{}|{}|{}", partition.key, knob.freq_mhz, knob.sms,
                                                  knob.slot, repetitions))) {
        throw DeviceError(fmt::format("ranks out of step at {}'s {}: the members run different work",
                                      partition.key, workload::to_string(partition.collective->kind)));
      }
    }
  }
  // The model at the clock the device really runs at, not the one the knob asked for.
  const double clock_mhz = device_->current_sm_clock_mhz();
  workload::Knob at_clock = knob;
  at_clock.freq_mhz = clock_mhz;
  const evaluate::EvalResult r = model_.evaluate(partition, at_clock);
  if (!r.ok()) throw DeviceError("fake executor: " + r.message);
  const evaluate::NoiseFactors noise = evaluate::noise_factors(options_.noise, partition, knob);
  const double run_s = r.time_s * noise.time * options_.slowdown;
  device_->set_load(load_for_power(*device_, clock_mhz, r.energy_j * noise.energy / (r.time_s * noise.time)));
  time_->advance_s(run_s * static_cast<double>(repetitions));
  device_->set_load(0);
  return run_s * static_cast<double>(repetitions);
}

double FakeExecutor::p2p_wait(executor::P2pRole role, int receiver, int sender, double delay_s) {
  KAREUS_CHECK(receiver != sender && delay_s >= 0, "a P2P wait needs two ranks and a non-negative delay");
  if (role == executor::P2pRole::kBystander) return 0;
  device_->set_load(0);
  time_->advance_s(delay_s);
  return delay_s;
}

}  // namespace kareus::profile
