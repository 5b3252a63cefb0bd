// Multi-objective helpers on plain data: Pareto filtering, 2-D hypervolume, and the iso-time /
// iso-energy comparisons of the Kareus evaluation. Both objectives are minimised.
//
// Example:
//   std::vector<TimeEnergy> frontier = pareto_front(points);
//   double hv = hypervolume_2d(frontier, {max_time_s, max_energy_j});
#pragma once

#include <compare>
#include <optional>
#include <span>
#include <vector>

namespace kareus {

struct TimeEnergy {
  double time_s = 0;
  double energy_j = 0;
  auto operator<=>(const TimeEnergy&) const = default;
};

// True when a is no worse than b in both objectives and better in at least one.
bool dominates(const TimeEnergy& a, const TimeEnergy& b);

// Indices of the non-dominated points, ordered by time ascending (energy descending). Of several
// identical points, the first is kept.
std::vector<std::size_t> pareto_indices(std::span<const TimeEnergy> points);

// The non-dominated points, time ascending.
std::vector<TimeEnergy> pareto_front(std::span<const TimeEnergy> points);

// Whether a point of a set (time ascending) is as fast and as frugal as a given point: then
// pareto_indices drops the given point wherever it comes after the set, so points offered to a front
// one at a time can be let go as they come without changing the Pareto set of the front and the
// others together.
class WeaklyDominated {
 public:
  explicit WeaklyDominated(std::span<const TimeEnergy> time_ascending);
  bool operator()(const TimeEnergy& point) const;

 private:
  std::vector<double> time_s_;
  std::vector<double> least_energy_j_;  // of the points up to each
};

// Area dominated by `points` and bounded by `reference` (points beyond it contribute nothing).
double hypervolume_2d(std::span<const TimeEnergy> points, const TimeEnergy& reference);

// Lowest energy among points with time_s <= max_time_s (within a relative 1e-12), if any.
std::optional<double> min_energy_within_time(std::span<const TimeEnergy> points, double max_time_s);
// Shortest time among points with energy_j <= max_energy_j (within a relative 1e-12), if any.
std::optional<double> min_time_within_energy(std::span<const TimeEnergy> points,
                                             double max_energy_j);

// Iso-time energy reduction (%) of `method` against `reference`: the reference's fastest plan
// (T_r, E_r) against the method's lowest energy at time <= T_r. Empty when the method has no plan
// that fast.
std::optional<double> iso_time_energy_reduction_pct(std::span<const TimeEnergy> method,
                                                    std::span<const TimeEnergy> reference);
// Iso-energy time reduction (%): the reference's lowest-energy plan (T_r, E_r) against the method's
// fastest plan at energy <= E_r. Empty when the method has no plan that frugal.
std::optional<double> iso_energy_time_reduction_pct(std::span<const TimeEnergy> method,
                                                    std::span<const TimeEnergy> reference);

// `count` points of a time-ascending frontier, evenly spaced by index, both ends included.
std::vector<TimeEnergy> sample_evenly(std::span<const TimeEnergy> frontier, std::size_t count);

}  // namespace kareus
