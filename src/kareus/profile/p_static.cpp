#include "kareus/profile/p_static.hpp"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <thread>

#include "kareus/core/error.hpp"

namespace kareus::profile {

PStaticResult measure_p_static(Group& world, executor::PartitionExecutor& executor,
                               runtime::FrequencyController& controller, runtime::EnergyMonitor& monitor,
                               PStaticOptions options) {
  const int n = world.size();
  if (n < 2) {
    throw InputError({"", 0, 0, "--p-static"}, "P_static needs two ranks, one waiting for the other (mpirun -np 2)");
  }
  if (options.receiver == options.sender || options.receiver < 0 || options.sender < 0 || options.receiver >= n ||
      options.sender >= n) {
    throw InputError({"", 0, 0, "--p-static"}, fmt::format("receiver {} and sender {} must be two of the {} ranks",
                                                           options.receiver, options.sender, n));
  }
  if (!(options.wait_s > 0) || !std::isfinite(options.wait_s)) {
    throw InputError({"", 0, 0, "--window"}, "the wait must be positive");
  }
  if (!controller.clocks_enabled()) {
    throw DeviceError("the SM clock cannot be locked (missing privilege): P_static's clock would not be known");
  }
  if (!options.idle) {
    options.idle = [](double s) { std::this_thread::sleep_for(std::chrono::duration<double>(s)); };
  }
  const int rank = world.rank();
  const executor::P2pRole role = rank == options.receiver ? executor::P2pRole::kReceiver
                                 : rank == options.sender ? executor::P2pRole::kSender
                                                          : executor::P2pRole::kBystander;
  controller.request_sm_clock(static_cast<int>(std::lround(options.clock_mhz)));
  controller.wait_idle();
  // A first, short exchange sets the channel up (communicators, connections), outside the window.
  executor.p2p_wait(role, options.receiver, options.sender, 0);
  if (options.settle_s > 0) options.idle(options.settle_s);
  world.barrier();

  double energy_j = 0, time_s = 0;
  const std::string window = "p_static";
  if (role == executor::P2pRole::kReceiver) monitor.begin_window(window);
  try {
    executor.p2p_wait(role, options.receiver, options.sender, options.wait_s);
  } catch (...) {
    if (role == executor::P2pRole::kReceiver) monitor.cancel_window(window);
    throw;
  }
  if (role == executor::P2pRole::kReceiver) {
    const runtime::Measurement m = monitor.end_window(window);
    if (!(m.elapsed_s > 0)) throw DeviceError("P_static's window read no time");
    time_s = m.elapsed_s;
    energy_j = m.total_energy_j();
  }
  if (options.settle_s > 0) options.idle(options.settle_s);
  world.barrier();

  // The receiver's figures, at every rank.
  std::string figures = fmt::format("{:.17g} {:.17g}", time_s, energy_j);
  if (options.receiver != 0) {
    // broadcast() sends rank 0's text: the receiver's reaches rank 0 through a gather.
    const std::vector<double> all = world.gather({time_s, energy_j});
    if (rank == 0) {
      figures = fmt::format("{:.17g} {:.17g}", all[2 * static_cast<std::size_t>(options.receiver)],
                            all[2 * static_cast<std::size_t>(options.receiver) + 1]);
    }
  }
  world.broadcast(figures);
  PStaticResult result;
  if (std::sscanf(figures.c_str(), "%lf %lf", &result.time_s, &result.energy_j) != 2) {
    throw InternalError("P_static: the receiver's figures did not arrive");
  }
  if (!(result.time_s > 0.5 * options.wait_s)) {
    // A receive that did not block measured something else (the sender did not idle first).
    throw DeviceError(fmt::format("P_static: the receiver waited {:.3f} s of the sender's {:.3f} s idle",
                                  result.time_s, options.wait_s));
  }
  result.power_w = result.energy_j / result.time_s;
  return result;
}

}  // namespace kareus::profile
