// Measuring one knob as Zeus measures a window, on every rank at once: lock the SM clock through
// the runtime's frequency controller, warm up at that clock, calibrate the repetitions to fill a
// ~5 s window (every rank runs the same count, the largest any rank asks for, so collectives
// match), read the energy counter around the window (the runtime's GPU integrates sampled power
// where the device has no counter), cool down idle, and gather to rank 0: the knob's time is the
// slowest rank's (a collective partition ends when its last rank does), its energy is per GPU
// (the mean over the ranks), and each rank's figures are kept.
//
// Thread-safety: one thread; every rank of `world` calls measure() with the same arguments.
// Example:
//   Measurer measurer(world, groups, executor, controller, monitor, {});
//   KnobMeasurement m = measurer.measure(partition, {1410, 16, "linear_0"});   // rank 0: m.time_s
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "kareus/workload/partition.hpp"

#include "kareus/executor/executor.hpp"
#include "kareus/profile/group.hpp"
#include "kareus/runtime/energy_monitor.hpp"
#include "kareus/runtime/frequency_controller.hpp"

namespace kareus::profile {

struct MeasurementOptions {
  double warmup_s = 1.0;     // at the knob's clock, before calibrating
  double window_s = 5.0;     // the measured window, filled with whole repetitions
  double cool_down_s = 1.0;  // idle after the window, so that the next starts as cool
  long max_repetitions = 10'000'000;
  // How the protocol waits idle (the cool-down); default: sleeps. A fake moves its clock instead.
  std::function<void(double seconds)> idle{};
};

struct KnobMeasurement {
  double time_s = 0;    // per run of the partition: the slowest rank's (rank 0 only)
  double energy_j = 0;  // per run, per GPU: the mean over the ranks (rank 0 only)
  long repetitions = 0;  // runs in the window, every rank
  std::vector<double> rank_time_s;    // per rank (rank 0 only)
  std::vector<double> rank_energy_j;  // per rank's GPU (rank 0 only)
};

class Measurer {
 public:
  // `monitor` watches this rank's one GPU; `controller` drives it. Throws InputError for options
  // that are not positive (warm-up and cool-down may be 0).
  Measurer(Group& world, executor::PartitionExecutor& executor, runtime::FrequencyController& controller,
           runtime::EnergyMonitor& monitor, MeasurementOptions options);

  // Collective call. Throws DeviceError when the device fails or the window reads no time.
  KnobMeasurement measure(const workload::Partition& partition, const workload::Knob& knob);

  // One step of a sequence: `count` runs of `partition` under `knob`.
  struct Step {
    const workload::Partition* partition = nullptr;
    workload::Knob knob;
    long count = 1;
  };
  // The same protocol for a whole sequence at one clock (a pipeline stage's forward or backward:
  // its layers' partitions in order, then its non-partition work): a repetition runs every step
  // in order, so the figures are per run of the whole sequence. Collective call; `name` labels
  // the window.
  KnobMeasurement measure_sequence(const std::string& name, const std::vector<Step>& steps, double freq_mhz);
  // Returns every GPU to the driver's clock management (also done by the controller's stop()).
  void reset_clocks();

  const MeasurementOptions& options() const { return options_; }

 private:
  long agreed_repetitions(double per_run_s, double fill_s);
  // The protocol around `run(repetitions)` (device seconds of that many back-to-back runs).
  KnobMeasurement measure_work(const std::string& window, double freq_mhz, const std::function<double(long)>& run);

  Group& world_;
  executor::PartitionExecutor& executor_;
  runtime::FrequencyController& controller_;
  runtime::EnergyMonitor& monitor_;
  MeasurementOptions options_;
};

}  // namespace kareus::profile
