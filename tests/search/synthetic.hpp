// A small analytic stand-in for a partition on a GPU, for the search's tests: compute slows when
// the collective takes SMs, the collective speeds up with SMs until the link saturates, the launch
// slot decides how much of the compute the collective overlaps, and power follows C·V²·f over a
// static floor. Not the project's simulated GPU; just enough structure for a real frontier.
#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kareus/core/pareto.hpp"
#include "kareus/search/knob_space.hpp"
#include "kareus/search/search.hpp"

namespace kareus::search::testing {

struct SyntheticPartition {
  int total_sms = 108;
  double static_power_w = 85;
  double compute_s_at_max = 2.0e-3;  // whole compute at 1410 MHz on all SMs
  double comm_s_saturated = 0.9e-3;  // collective at link saturation
  int saturating_sms = 18;
  std::vector<std::string> slots{"norm_0", "linear_0", "attn_0", "linear_1"};
  std::vector<double> slot_fraction{0.0, 0.1, 0.45, 0.7};  // compute done before each slot

  double voltage(double f) const { return f < 1100 ? 0.75 : 0.75 + 0.3 * (f - 1100) / 310; }

  TimeEnergy operator()(const Knob& k) const {
    const double f = k.freq_mhz;
    const double compute_full = compute_s_at_max * 1410 / f;
    const double comm = comm_s_saturated * std::max(1.0, static_cast<double>(saturating_sms) / std::max(1, k.sms)) *
                        (0.85 + 0.15 * 1410 / f);
    double time = 0, busy = 0;
    if (k.sequential()) {
      time = compute_full + comm;
      busy = compute_full + 0.3 * comm;
    } else {
      std::size_t s = static_cast<std::size_t>(std::find(slots.begin(), slots.end(), k.slot) - slots.begin());
      const double before = slot_fraction[s] * compute_full;
      const double slowed = compute_full * total_sms / (total_sms - k.sms);
      const double rest = (1 - slot_fraction[s]) * slowed;
      // The collective runs beside the rest of the compute; the compute regains its SMs after.
      const double overlap_end = std::min(rest, comm);
      const double remaining = (rest - overlap_end) * (total_sms - k.sms) / total_sms;
      time = before + std::max(comm, overlap_end + remaining);
      busy = compute_full + 0.3 * comm;
    }
    const double v = voltage(f);
    const double dynamic_w = 250 * (v * v * f) / (1.05 * 1.05 * 1410);
    const double energy = static_power_w * time + dynamic_w * busy + 20 * time;
    return {time, energy};
  }
};

inline KnobSpace synthetic_space(const SyntheticPartition& p) {
  std::vector<double> clocks;
  for (int f = 900; f <= 1410; f += 30) clocks.push_back(f);
  std::vector<int> sms;
  for (int s = 3; s <= 30; s += 3) sms.push_back(s);
  return KnobSpace::make(clocks, sms, p.slots, 20);
}

inline SearchOptions options(std::size_t budget, double static_power_w = 85, int max_failures = 2) {
  SearchOptions o;
  o.budget = budget;
  o.static_power_w = static_power_w;
  o.max_failures = max_failures;
  return o;
}

}  // namespace kareus::search::testing
