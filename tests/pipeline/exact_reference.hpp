// References for the frontier solver, written apart from it: irregular random option tables (the
// shapes composition makes), the exact discrete frontier by enumerating every assignment, and the
// gap of a computed frontier to it.
//
// The enumeration shares no code with the solver: it replays the schedule stage by stage (an
// instruction starts when its stage's previous instruction and its cross-stage input are done)
// instead of reading the InstructionDag, and charges idle time at P_blocking itself.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <random>
#include <vector>

#include "kareus/core/pareto.hpp"
#include "kareus/pipeline/option_table.hpp"
#include "kareus/schedule/schedule.hpp"

namespace kareus::pipeline::testing {

// One operation's options, drawn to be awkward: duplicates, near-ties in time or energy, options
// dominated by another, effective energies E − P·t tiny or huge, one option only. Every table it
// makes passes validation (some option of each operation has E >= P·t).
inline std::vector<StageOption> irregular_options(std::mt19937_64& rng, double p_blocking_w, int max_options) {
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const int count = std::uniform_int_distribution<int>(1, max_options)(rng);
  const double base_s = 0.005 + 0.045 * unit(rng);
  std::vector<StageOption> options;
  for (int k = 0; k < count; ++k) {
    const double kind = unit(rng);
    double freq = 1410 - 15.0 * k;
    if (!options.empty() && kind < 0.15) {  // an exact duplicate
      StageOption copy = options[std::uniform_int_distribution<std::size_t>(0, options.size() - 1)(rng)];
      copy.freq_mhz = freq;
      options.push_back(copy);
      continue;
    }
    if (!options.empty() && kind < 0.3) {  // a near-tie of another option
      StageOption near = options[std::uniform_int_distribution<std::size_t>(0, options.size() - 1)(rng)];
      near.freq_mhz = freq;
      near.time_s *= 1 + (unit(rng) < 0.5 ? 1e-12 : 1e-7) * (unit(rng) < 0.5 ? -1 : 1);
      near.energy_j *= 1 + (unit(rng) < 0.5 ? 1e-12 : 1e-7) * (unit(rng) < 0.5 ? -1 : 1);
      options.push_back(near);
      continue;
    }
    if (!options.empty() && kind < 0.45) {  // dominated: slower and costlier than another
      StageOption worse = options[std::uniform_int_distribution<std::size_t>(0, options.size() - 1)(rng)];
      worse.freq_mhz = freq;
      worse.time_s *= 1 + 0.3 * unit(rng);
      worse.energy_j *= 1 + 0.3 * unit(rng);
      options.push_back(worse);
      continue;
    }
    const double time_s = base_s * (1 + unit(rng));
    double power_w = p_blocking_w * (0.5 + 3.5 * unit(rng)) + 20 + 400 * unit(rng) * unit(rng);
    if (kind < 0.55) power_w = std::max(p_blocking_w, 1.0) * (1 + 1e-9);  // effective energy tiny
    else if (kind < 0.6) power_w = (p_blocking_w + 1) * 1000;  // huge
    options.push_back({freq, time_s, power_w * time_s, nullptr});
  }
  // Validation rejects an operation whose every option has E < P·t.
  if (std::ranges::all_of(options, [&](const StageOption& o) { return o.energy_j < p_blocking_w * o.time_s; })) {
    options.front().energy_j = 2 * p_blocking_w * options.front().time_s + 1e-3;
  }
  return options;
}

// Forward and backward options per stage, and with `split_backward` B and W too.
inline OptionTable irregular_table(std::mt19937_64& rng, int stages, double p_blocking_w, int max_options,
                                   bool split_backward = false) {
  OptionTable table;
  table.options.resize(static_cast<std::size_t>(stages));
  for (int s = 0; s < stages; ++s) {
    for (schedule::OptionSlot slot : schedule::kAllOptionSlots) {
      const bool split = slot == schedule::OptionSlot::kBackwardInput || slot == schedule::OptionSlot::kBackwardWeight;
      if (split && !split_backward) continue;
      table.at(s, slot) = irregular_options(rng, p_blocking_w, max_options);
    }
  }
  validate_option_table(table, "irregular table");
  return table;
}

// The exact (time, energy) Pareto front over every option assignment, time ascending.
inline std::vector<TimeEnergy> enumerated_frontier(const OptionTable& table, const schedule::PipelineSchedule& schedule,
                                                   double p_blocking_w) {
  const int stages = schedule.num_stages();
  struct Slot {
    int stage;
    const schedule::Instruction* instruction;
    const std::vector<StageOption>* options;
  };
  std::vector<Slot> slots;
  for (int s = 0; s < stages; ++s) {
    for (const schedule::Instruction& ins : schedule.stage_order(s)) slots.push_back({s, &ins, &table.at(s, schedule::option_slot(ins))});
  }
  const std::size_t n = slots.size();
  const int microbatches = schedule.num_microbatches();
  std::vector<std::size_t> choice(n, 0);
  // finish[stage][slot][microbatch], NaN until run.
  std::vector<double> finish(static_cast<std::size_t>(stages) * schedule::kNumOptionSlots * static_cast<std::size_t>(microbatches));
  auto at = [&](int s, schedule::OptionSlot t, int m) -> double& {
    return finish[(static_cast<std::size_t>(s) * schedule::kNumOptionSlots + static_cast<std::size_t>(t)) *
                      static_cast<std::size_t>(microbatches) +
                  static_cast<std::size_t>(m)];
  };
  std::map<double, double> front;  // time -> energy, energy falling as time grows
  auto offer = [&](double t, double e) {
    auto after = front.upper_bound(t);
    if (after != front.begin() && std::prev(after)->second <= e) return;
    while (after != front.end() && after->second >= e) after = front.erase(after);
    front[t] = e;
  };
  for (;;) {
    // Replay: sweep the stages, running each one's next instruction once its input is done.
    std::ranges::fill(finish, std::numeric_limits<double>::quiet_NaN());
    std::vector<std::size_t> next(static_cast<std::size_t>(stages), 0), first(static_cast<std::size_t>(stages), 0);
    for (int s = 1; s < stages; ++s) first[static_cast<std::size_t>(s)] = first[static_cast<std::size_t>(s - 1)] + schedule.stage_order(s - 1).size();
    std::vector<double> clock(static_cast<std::size_t>(stages), 0.0);
    double sum_energy = 0, sum_time = 0;
    for (std::size_t done = 0; done < n;) {
      const std::size_t before = done;
      for (int s = 0; s < stages; ++s) {
        const auto su = static_cast<std::size_t>(s);
        while (next[su] < schedule.stage_order(s).size()) {
          const schedule::Instruction& ins = schedule.stage_order(s)[next[su]];
          double ready = 0;
          const schedule::OptionSlot slot_kind = schedule::option_slot(ins);
          if (slot_kind == schedule::OptionSlot::kForward && s > 0) ready = at(s - 1, slot_kind, ins.microbatch);
          if (slot_kind == schedule::OptionSlot::kBackward || slot_kind == schedule::OptionSlot::kBackwardInput) {
            // A backward (or its B) needs the next stage's, or on the last stage its own forward.
            ready = s + 1 < stages ? at(s + 1, slot_kind, ins.microbatch) : at(s, schedule::OptionSlot::kForward, ins.microbatch);
          }
          if (slot_kind == schedule::OptionSlot::kBackwardWeight) ready = at(s, schedule::OptionSlot::kBackwardInput, ins.microbatch);
          if (std::isnan(ready)) break;
          const std::size_t slot = first[su] + next[su];
          const StageOption& o = (*slots[slot].options)[choice[slot]];
          clock[su] = std::max(clock[su], ready) + o.time_s;
          at(s, slot_kind, ins.microbatch) = clock[su];
          sum_energy += o.energy_j;
          sum_time += o.time_s;
          ++next[su];
          ++done;
        }
      }
      if (done == before) return {};  // a deadlock: not a schedule the builders make
    }
    const double makespan = *std::ranges::max_element(clock);
    offer(makespan, sum_energy + p_blocking_w * (stages * makespan - sum_time));
    std::size_t k = 0;  // odometer
    while (k < n && ++choice[k] == slots[k].options->size()) choice[k++] = 0;
    if (k == n) break;
  }
  std::vector<TimeEnergy> out;
  for (auto [t, e] : front) out.push_back({t, e});
  return out;
}

// Number of assignments the enumeration visits.
inline double assignment_count(const OptionTable& table, const schedule::PipelineSchedule& schedule) {
  double count = 1;
  for (int s = 0; s < schedule.num_stages(); ++s) {
    for (const schedule::Instruction& ins : schedule.stage_order(s)) count *= static_cast<double>(table.at(s, schedule::option_slot(ins)).size());
  }
  return count;
}

// The gap of `ours` to `exact`: for each exact point (t, e), (e' − e) / e with e' the least energy
// of our points at a time <= t·(1 + time_tolerance); the worst over the exact points. Infinite when
// we have no point that fast. The tolerance is relative: 1e-7 is 30 ns at 0.3 s, far below any
// measurement, and the size of the near-ties irregular_options makes.
struct Gap {
  double relative = 0;
  double at_time_s = 0;
};
inline Gap frontier_gap(const std::vector<TimeEnergy>& ours, const std::vector<TimeEnergy>& exact,
                        double time_tolerance = 1e-7) {
  Gap worst;
  for (const TimeEnergy& x : exact) {
    double best = std::numeric_limits<double>::infinity();
    for (const TimeEnergy& o : ours) {
      if (o.time_s <= x.time_s * (1 + time_tolerance)) best = std::min(best, o.energy_j);
    }
    const double gap = (best - x.energy_j) / x.energy_j;
    if (gap > worst.relative) worst = {gap, x.time_s};
  }
  return worst;
}

}  // namespace kareus::pipeline::testing
