#include "kareus/profile/measurer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <thread>

#include "kareus/core/error.hpp"

namespace kareus::profile {

Measurer::Measurer(Group& world, executor::PartitionExecutor& executor, runtime::FrequencyController& controller,
                   runtime::EnergyMonitor& monitor, MeasurementOptions options)
    : world_(world), executor_(executor), controller_(controller), monitor_(monitor), options_(std::move(options)) {
  if (!(options_.window_s > 0) || !std::isfinite(options_.window_s)) {
    throw InputError({"", 0, 0, "--window"}, "the measurement window must be positive");
  }
  if (!(options_.warmup_s >= 0) || !(options_.cool_down_s >= 0)) {
    throw InputError({"", 0, 0, "--warmup"}, "warm-up and cool-down must not be negative");
  }
  if (options_.max_repetitions < 1) throw InputError({"", 0, 0, "max_repetitions"}, "must be at least 1");
  if (monitor_.gpus().size() != 1) throw InputError("a rank's energy monitor watches exactly its one GPU");
  if (!options_.idle) {
    options_.idle = [](double seconds) { std::this_thread::sleep_for(std::chrono::duration<double>(seconds)); };
  }
}

// Runs that fill `fill_s` at `per_run_s` each, the largest count any rank asks for (at least 1).
long Measurer::agreed_repetitions(double per_run_s, double fill_s) {
  long wanted = 1;
  if (per_run_s > 0 && std::isfinite(per_run_s)) {
    wanted = static_cast<long>(std::ceil(fill_s / per_run_s));
  } else if (!(per_run_s > 0)) {
    wanted = options_.max_repetitions;  // too fast to time: as many as allowed
  }
  wanted = std::clamp(wanted, 1L, options_.max_repetitions);
  return static_cast<long>(world_.min_max(wanted).second);
}

KnobMeasurement Measurer::measure(const workload::Partition& partition, const workload::Knob& knob) {
  executor_.prepare(partition);
  return measure_work(fmt::format("{}@{:g}/{}/{}", partition.key, knob.freq_mhz, knob.sms, knob.slot), knob.freq_mhz,
                      [&](long repetitions) { return executor_.run(partition, knob, repetitions); });
}

KnobMeasurement Measurer::measure_sequence(const std::string& name, const std::vector<Step>& steps, double freq_mhz) {
  if (steps.empty()) throw InputError({"", 0, 0, name}, "an empty sequence has nothing to measure");
  for (const Step& step : steps) {
    KAREUS_CHECK(step.partition != nullptr && step.count >= 1, "a sequence step runs a partition at least once");
    executor_.prepare(*step.partition);
  }
  return measure_work(fmt::format("{}@{:g}", name, freq_mhz), freq_mhz, [&](long repetitions) {
    double seconds = 0;
    for (long rep = 0; rep < repetitions; ++rep) {
      for (const Step& step : steps) {
        workload::Knob knob = step.knob;
        knob.freq_mhz = freq_mhz;
        seconds += executor_.run(*step.partition, knob, step.count);
      }
    }
    return seconds;
  });
}

KnobMeasurement Measurer::measure_work(const std::string& window, double freq_mhz,
                                       const std::function<double(long)>& run) {
  if (!controller_.clocks_enabled()) {
    throw DeviceError("the SM clock cannot be locked (missing privilege): a knob's clock would not be measured");
  }
  controller_.request_sm_clock(static_cast<int>(std::lround(freq_mhz)));
  controller_.wait_idle();

  // Warm-up: one run to learn the pace, then enough to fill the warm-up time.
  double per_run_s = run(1);
  if (options_.warmup_s > 0) {
    const long warm = agreed_repetitions(per_run_s, options_.warmup_s);
    per_run_s = run(warm) / static_cast<double>(warm);
  }
  const long repetitions = agreed_repetitions(per_run_s, options_.window_s);

  // The window: every rank starts together, so the collectives of its runs meet.
  world_.barrier();
  monitor_.begin_window(window);
  try {
    run(repetitions);
  } catch (...) {
    monitor_.cancel_window(window);
    throw;
  }
  const runtime::Measurement m = monitor_.end_window(window);
  if (!(m.elapsed_s > 0)) throw DeviceError(fmt::format("the window of {} read no time", window));
  const double time_s = m.elapsed_s / static_cast<double>(repetitions);
  const double energy_j = m.total_energy_j() / static_cast<double>(repetitions);

  if (options_.cool_down_s > 0) options_.idle(options_.cool_down_s);
  world_.barrier();

  KnobMeasurement out;
  out.repetitions = repetitions;
  const std::vector<double> all = world_.gather({time_s, energy_j});
  for (std::size_t r = 0; r + 1 < all.size(); r += 2) {
    out.rank_time_s.push_back(all[r]);
    out.rank_energy_j.push_back(all[r + 1]);
  }
  if (!out.rank_time_s.empty()) {
    out.time_s = *std::max_element(out.rank_time_s.begin(), out.rank_time_s.end());
    out.energy_j = std::accumulate(out.rank_energy_j.begin(), out.rank_energy_j.end(), 0.0) /
                   static_cast<double>(out.rank_energy_j.size());
  }
  return out;
}

void Measurer::reset_clocks() {
  controller_.request_reset();
  controller_.wait_idle();
}

}  // namespace kareus::profile
