// The search driver: asks a Strategy for knobs, measures them (in parallel with oneTBB when the
// measuring function may be called from several threads), records every result in the journal as
// it completes, and stops at the budget, when the grid is exhausted, or when the strategy says so.
// A journal's measurements are loaded first, so a rerun resumes where the last one stopped.
//
// Thread-safety: run_search() is one call on one thread; `measure` is called concurrently only
// when `concurrent_measure` is true; `progress` is called under a lock, one call at a time.
// Example:
//   KnobSpace space = KnobSpace::make(clocks, sms, slots, 20);
//   MoboStrategy mobo(MoboOptions{});
//   Journal journal = Journal::open("fwd_mlp.jsonl", header);
//   SearchOptions o;  o.budget = 150;  o.static_power_w = 85;
//   SearchOutcome out = run_search(space, mobo, measure, true, &journal, o);
#pragma once

#include <functional>
#include <vector>

#include "kareus/core/pareto.hpp"
#include "kareus/search/journal.hpp"
#include "kareus/search/knob_space.hpp"
#include "kareus/search/strategy.hpp"

namespace kareus::search {

// Measures one knob: (time_s, energy_j). `repetition` is 0 for a knob's first measurement and n
// for its n-th measurement again (a device simply measures again; a drawn noise draws anew). A
// failure is an exception (DeviceError or any standard exception other than
// InputError/InternalError, which abort the search) or a non-finite or negative result; it is
// recorded as failed.
using MeasureFn = std::function<TimeEnergy(const Knob&, int repetition)>;

struct SearchOptions {
  std::size_t budget = 0;  // measurements of this partition in all, the journal's included
  double static_power_w = 0;
  int max_failures = 2;  // a knob failing this often (over all runs) is not tried again
  bool parallel = true;  // when concurrent measuring is allowed
};

struct SearchProgress {
  std::size_t measurements = 0;  // recorded so far, journal included
  std::size_t budget = 0;
  std::size_t failed = 0;
  double hypervolume = 0;       // of the measured set in (real energy, time), see frontier_hypervolume()
  double elapsed_s = 0;         // this run
  std::size_t measured_now = 0;  // by this run
};

struct SearchOutcome {
  StopReason stop = StopReason::kBudgetSpent;
  std::size_t measured_now = 0;  // measurements this run added
  std::vector<Measurement> measurements;  // every measurement of the journal, in journal order
};

SearchOutcome run_search(const KnobSpace& space, Strategy& strategy, const MeasureFn& measure, bool concurrent_measure,
                         Journal* journal, const SearchOptions& options,
                         const std::function<void(const SearchProgress&)>& progress = {});

// Hypervolume of a measured set in (real energy, time) against the reference point (max time,
// max energy) of the same set: what `kareus search` reports. Zero for an empty set.
struct FrontierHypervolume {
  double hypervolume = 0;
  TimeEnergy reference;
};
FrontierHypervolume frontier_hypervolume(const std::vector<TimeEnergy>& points);

}  // namespace kareus::search
