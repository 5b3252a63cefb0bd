#include "kareus/core/pareto.hpp"

#include <algorithm>
#include <limits>
#include <numeric>

#include "kareus/core/error.hpp"

namespace kareus {
namespace {
constexpr double kRelativeSlack = 1e-12;
}

bool dominates(const TimeEnergy& a, const TimeEnergy& b) {
  return a.time_s <= b.time_s && a.energy_j <= b.energy_j &&
         (a.time_s < b.time_s || a.energy_j < b.energy_j);
}

std::vector<std::size_t> pareto_indices(std::span<const TimeEnergy> points) {
  std::vector<std::size_t> order(points.size());
  std::iota(order.begin(), order.end(), 0);
  // Time ascending, then energy ascending, then input order: the first of equals survives.
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    if (points[a].time_s != points[b].time_s) return points[a].time_s < points[b].time_s;
    return points[a].energy_j < points[b].energy_j;
  });
  std::vector<std::size_t> front;
  double best_energy = std::numeric_limits<double>::infinity();
  for (std::size_t i : order) {
    if (points[i].energy_j < best_energy) {
      front.push_back(i);
      best_energy = points[i].energy_j;
    }
  }
  return front;
}

std::vector<TimeEnergy> pareto_front(std::span<const TimeEnergy> points) {
  std::vector<TimeEnergy> front;
  for (std::size_t i : pareto_indices(points)) front.push_back(points[i]);
  return front;
}

WeaklyDominated::WeaklyDominated(std::span<const TimeEnergy> time_ascending) {
  for (const TimeEnergy& p : time_ascending) {
    time_s_.push_back(p.time_s);
    least_energy_j_.push_back(least_energy_j_.empty() ? p.energy_j : std::min(p.energy_j, least_energy_j_.back()));
  }
}

bool WeaklyDominated::operator()(const TimeEnergy& point) const {
  const auto faster = std::upper_bound(time_s_.begin(), time_s_.end(), point.time_s) - time_s_.begin();
  return faster > 0 && least_energy_j_[static_cast<std::size_t>(faster - 1)] <= point.energy_j;
}

double hypervolume_2d(std::span<const TimeEnergy> points, const TimeEnergy& reference) {
  double volume = 0;
  double previous_energy = reference.energy_j;
  for (const TimeEnergy& p : pareto_front(points)) {
    if (p.time_s >= reference.time_s || p.energy_j >= previous_energy) continue;
    volume += (reference.time_s - p.time_s) * (previous_energy - p.energy_j);
    previous_energy = p.energy_j;
  }
  return volume;
}

std::optional<double> min_energy_within_time(std::span<const TimeEnergy> points,
                                             double max_time_s) {
  std::optional<double> best;
  double limit = max_time_s * (1 + kRelativeSlack);
  for (const TimeEnergy& p : points) {
    if (p.time_s <= limit && (!best || p.energy_j < *best)) best = p.energy_j;
  }
  return best;
}

std::optional<double> min_time_within_energy(std::span<const TimeEnergy> points,
                                             double max_energy_j) {
  std::optional<double> best;
  double limit = max_energy_j * (1 + kRelativeSlack);
  for (const TimeEnergy& p : points) {
    if (p.energy_j <= limit && (!best || p.time_s < *best)) best = p.time_s;
  }
  return best;
}

std::optional<double> iso_time_energy_reduction_pct(std::span<const TimeEnergy> method,
                                                    std::span<const TimeEnergy> reference) {
  KAREUS_CHECK(!reference.empty(), "iso-time comparison needs a non-empty reference frontier");
  auto fastest = std::min_element(reference.begin(), reference.end(), [](auto& a, auto& b) {
    return a.time_s < b.time_s || (a.time_s == b.time_s && a.energy_j < b.energy_j);
  });
  auto energy = min_energy_within_time(method, fastest->time_s);
  if (!energy) return std::nullopt;
  return 100.0 * (fastest->energy_j - *energy) / fastest->energy_j;
}

std::optional<double> iso_energy_time_reduction_pct(std::span<const TimeEnergy> method,
                                                    std::span<const TimeEnergy> reference) {
  KAREUS_CHECK(!reference.empty(), "iso-energy comparison needs a non-empty reference frontier");
  auto frugal = std::min_element(reference.begin(), reference.end(), [](auto& a, auto& b) {
    return a.energy_j < b.energy_j || (a.energy_j == b.energy_j && a.time_s < b.time_s);
  });
  auto time = min_time_within_energy(method, frugal->energy_j);
  if (!time) return std::nullopt;
  return 100.0 * (frugal->time_s - *time) / frugal->time_s;
}

std::vector<TimeEnergy> sample_evenly(std::span<const TimeEnergy> frontier, std::size_t count) {
  if (count == 0 || frontier.empty()) return {};
  if (frontier.size() <= count) return {frontier.begin(), frontier.end()};
  std::vector<TimeEnergy> out;
  if (count == 1) return {frontier.front()};
  for (std::size_t k = 0; k < count; ++k) {
    std::size_t index = (k * (frontier.size() - 1) + (count - 1) / 2) / (count - 1);
    out.push_back(frontier[index]);
  }
  return out;
}

}  // namespace kareus
