// P_static: the power a GPU draws while blocked in a point-to-point receive, which the pipeline
// solver charges for a stage's idle time (P_blocking). Measured as the Kareus artifact's
// profile_p2p does: one rank waits in a receive while its peer idles before sending; the energy
// window is on the waiting GPU, at a clock locked through the runtime's frequency controller.
//
// Thread-safety: one thread; every rank of `world` calls measure_p_static() with the same options.
// Example:
//   PStaticResult r = measure_p_static(world, executor, controller, monitor, {.wait_s = 5});
//   if (world.rank() == 0) fmt::print("P_static {:.1f} W\n", r.power_w);
#pragma once

#include <functional>

#include "kareus/executor/executor.hpp"
#include "kareus/profile/group.hpp"
#include "kareus/runtime/energy_monitor.hpp"
#include "kareus/runtime/frequency_controller.hpp"

namespace kareus::profile {

struct PStaticOptions {
  double clock_mhz = 0;  // the SM clock locked for the wait
  double wait_s = 5;     // how long the sender idles before sending: the measured window
  int receiver = 0;      // world ranks
  int sender = 1;
  // How the protocol waits idle before and after (settling, cool-down); default: sleeps.
  double settle_s = 1;
  std::function<void(double seconds)> idle{};
};

struct PStaticResult {
  double power_w = 0;   // energy / time of the receiver's window (every rank)
  double time_s = 0;    // the window: how long the receiver waited
  double energy_j = 0;  // the receiver GPU's energy over it
};

// Collective call on every rank of `world` (at least 2). Throws InputError for options that do
// not fit the world (fewer than 2 ranks, receiver == sender, a rank outside it, wait not
// positive), DeviceError when the clock cannot be locked or the window reads no time.
PStaticResult measure_p_static(Group& world, executor::PartitionExecutor& executor,
                               runtime::FrequencyController& controller, runtime::EnergyMonitor& monitor,
                               PStaticOptions options);

}  // namespace kareus::profile
