// The front that gathers a solve's plans: an online Pareto set in true (time, energy), keyed by time,
// energies strictly falling as time grows, each plan with what the local search found for it.
//
// A plan at most a relative 1e-8 slower than a kept one counts as fast enough: the local search
// otherwise fills the front with plans nanoseconds apart, which no measurement resolves and no output
// format tells apart. A plan dropped for a slower one is remembered by the time of the fastest plan
// it stood for (its anchor), and only dropped while that is within 1e-8: so every plan offered keeps
// one in the front within 1e-8 of its time and no costlier. (Without anchors such drops chain, and
// the front drifted from the fastest plan by many steps of 1e-8.) Likewise a slower plan must save
// more than a relative 1e-9 of energy to enter: printed to nine digits, nanojoule savings would read
// as a slower plan of the same energy.
//
// Thread-safety: none; one thread offers.
// Example:
//   PlanFront<Extra> front;
//   if (front.offer(plan)) ...;  for (auto& [time_s, kept] : front.plans()) use(kept.point);
#pragma once

#include <algorithm>
#include <iterator>
#include <map>
#include <utility>

#include "kareus/pipeline/frontier_solver.hpp"

namespace kareus::pipeline {

template <typename Extra>
class PlanFront {
 public:
  struct Kept {
    FrontierPoint point;
    Extra extra;
    double anchor_s = 0;  // the fastest time of the plans it stands for (itself, or those it dropped)
  };

  static double same_time_s(double time_s) { return 1e-8 * time_s; }

  // True when a kept plan is as fast (up to same_time_s) and as frugal (up to a relative 1e-9).
  bool dominated(double time_s, double energy_j) const {
    auto after = plans_.upper_bound(time_s + same_time_s(time_s));
    return after != plans_.begin() && std::prev(after)->second.point.energy_j <= energy_j * (1 + 1e-9);
  }

  // Keeps `point` unless it is dominated, dropping the plans it dominates; true when it entered.
  bool offer(FrontierPoint point, Extra extra = {}) {
    ++offered_;
    if (dominated(point.time_s, point.energy_j)) return false;
    const double time_s = point.time_s;
    double anchor_s = time_s;
    auto after = plans_.lower_bound(time_s - same_time_s(time_s));
    while (after != plans_.end() && after->second.point.energy_j * (1 + 1e-9) >= point.energy_j) {
      if (after->first < time_s && after->second.anchor_s < time_s - same_time_s(time_s)) {
        ++after;  // faster, and standing for a plan too much faster: it stays
        continue;
      }
      anchor_s = std::min(anchor_s, after->second.anchor_s);
      after = plans_.erase(after);
    }
    plans_.insert_or_assign(time_s, Kept{std::move(point), std::move(extra), anchor_s});
    return true;
  }
  // Counts a plan offered and refused without building it.
  void count_refused() { ++offered_; }

  // The kept plan of exactly this time, or null.
  Kept* find(double time_s) {
    auto it = plans_.find(time_s);
    return it == plans_.end() ? nullptr : &it->second;
  }
  const std::map<double, Kept>& plans() const { return plans_; }
  std::map<double, Kept>& plans() { return plans_; }
  long offered() const { return offered_; }

 private:
  std::map<double, Kept> plans_;
  long offered_ = 0;
};

}  // namespace kareus::pipeline
