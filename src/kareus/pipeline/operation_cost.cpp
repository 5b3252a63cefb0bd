#include "kareus/pipeline/operation_cost.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "kareus/core/error.hpp"

namespace kareus::pipeline {

std::string_view to_string(CostModelKind kind) {
  return kind == CostModelKind::kHull ? "hull" : "exponential";
}

std::optional<CostModelKind> parse_cost_model_kind(std::string_view text) {
  if (text == "hull") return CostModelKind::kHull;
  if (text == "exponential") return CostModelKind::kExponential;
  return std::nullopt;
}

namespace {

// Lower convex hull (Andrew's monotone chain) of candidates sorted by quantised time, with its
// segments' savings per unit, (E_a − E_b) / (u_b − u_a), strictly falling. Points are dropped by
// comparing those very savings, not a cross product: near-collinear points (near-ties, options a
// unit apart) can make the two disagree in floating point, and the solver needs the savings it is
// given to be convex, not merely the points.
struct Hull {
  std::vector<std::size_t> vertices;  // indices into the candidates
  std::vector<double> saving_j;       // per segment: saving of one unit longer
};
Hull lower_hull(std::span<const Candidate> c) {
  auto saving = [&](std::size_t a, std::size_t b) {
    return (c[a].effective_energy_j - c[b].effective_energy_j) /
           static_cast<double>(c[b].quantized_units - c[a].quantized_units);
  };
  Hull hull;
  for (std::size_t i = 0; i < c.size(); ++i) {
    while (!hull.saving_j.empty() && hull.saving_j.back() <= saving(hull.vertices.back(), i)) {
      hull.vertices.pop_back();
      hull.saving_j.pop_back();
    }
    if (!hull.vertices.empty()) hull.saving_j.push_back(saving(hull.vertices.back(), i));
    hull.vertices.push_back(i);
  }
  return hull;
}

}  // namespace

std::array<double, 3> fit_exponential(std::span<const double> x, std::span<const double> y) {
  KAREUS_CHECK(x.size() == y.size() && !x.empty(), "exponential fit needs matching, non-empty data");
  const double x0 = *std::min_element(x.begin(), x.end());
  const double span = std::max(1.0, *std::max_element(x.begin(), x.end()) - x0);
  const double n = static_cast<double>(x.size());

  // For a fixed rate b, the best (a, c) solve a 2x2 linear least-squares problem.
  auto solve = [&](double b) {
    double sg = 0, sgg = 0, sy = 0, sgy = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      double g = std::exp(b * (x[i] - x0));
      sg += g;
      sgg += g * g;
      sy += y[i];
      sgy += g * y[i];
    }
    double det = n * sgg - sg * sg;
    double a = det > 1e-300 ? (n * sgy - sg * sy) / det : 0.0;
    if (a < 0) a = 0;  // keep the model convex and non-increasing
    double c = (sy - a * sg) / n;
    double sse = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      double r = a * std::exp(b * (x[i] - x0)) + c - y[i];
      sse += r * r;
    }
    return std::array<double, 3>{a, c, sse};
  };
  // Golden-section search over log(-b) between a rate that is nearly linear over the data's span
  // and one that decays a hundredfold per unit of span.
  double lo = std::log(1e-4 / span), hi = std::log(50.0 / span);
  const double phi = (std::sqrt(5.0) - 1) / 2;
  double m1 = hi - phi * (hi - lo), m2 = lo + phi * (hi - lo);
  double f1 = solve(-std::exp(m1))[2], f2 = solve(-std::exp(m2))[2];
  for (int iter = 0; iter < 100; ++iter) {
    if (f1 <= f2) {
      hi = m2, m2 = m1, f2 = f1;
      m1 = hi - phi * (hi - lo);
      f1 = solve(-std::exp(m1))[2];
    } else {
      lo = m1, m1 = m2, f1 = f2;
      m2 = lo + phi * (hi - lo);
      f2 = solve(-std::exp(m2))[2];
    }
  }
  double b = -std::exp((lo + hi) / 2);
  auto [a, c, sse] = solve(b);
  (void)sse;
  // Re-express around x = 0: a·exp(b(x - x0)) = (a·exp(-b·x0))·exp(b·x).
  return {a * std::exp(-b * x0), b, c};
}

OperationCost::OperationCost(std::span<const StageOption> options, double p_blocking_w,
                             double unit_time_s, CostModelKind model, const std::string& what)
    : model_(model) {
  KAREUS_CHECK(!options.empty(), "an operation needs at least one option");
  KAREUS_CHECK(unit_time_s > 0, "the time unit must be positive");
  // Past this many units a duration is no stage's (a profile's time not in seconds, or a unit far
  // too fine), and the per-unit tables below would not fit in memory.
  constexpr double kMaxUnits = 1e7;
  std::vector<Candidate> all;
  for (std::size_t i = 0; i < options.size(); ++i) {
    const StageOption& o = options[i];
    if (o.time_s / unit_time_s > kMaxUnits) {
      throw InputError(fmt::format("{}: an option's time {:g} s is {:.3g} units of {:g} s, more than the solver's {:.0e}: "
                                   "is the profile's time in seconds, and the unit not too fine?",
                                   what, o.time_s, o.time_s / unit_time_s, unit_time_s, kMaxUnits));
    }
    // Durations are whole units: the nearest to the measured time, and at least one.
    long units = std::max(1L, static_cast<long>(std::llround(o.time_s / unit_time_s)));
    all.push_back({i, units, o.time_s, o.energy_j - p_blocking_w * o.time_s});
  }
  if (std::all_of(all.begin(), all.end(), [](auto& c) { return c.effective_energy_j < 0; })) {
    double max_p = 0;
    for (const StageOption& o : options) max_p = std::max(max_p, o.energy_j / o.time_s);
    throw InputError(fmt::format(
        "{}: P_blocking {} W makes the effective energy E - P·t of every option negative "
        "(its highest average power is {:.2f} W); P_blocking must be below that",
        what, p_blocking_w, max_p));
  }
  // Pareto set in (real time, effective energy); of equal options the first in the table.
  std::stable_sort(all.begin(), all.end(), [](const Candidate& a, const Candidate& b) {
    if (a.time_s != b.time_s) return a.time_s < b.time_s;
    return a.effective_energy_j < b.effective_energy_j;
  });
  for (const Candidate& c : all) {
    if (pareto_.empty() || c.effective_energy_j < pareto_.back().effective_energy_j) {
      if (!pareto_.empty() && pareto_.back().time_s == c.time_s) continue;
      pareto_.push_back(c);
    }
  }
  candidate_of_.assign(options.size(), kNotCandidate);
  for (std::size_t i = 0; i < pareto_.size(); ++i) candidate_of_[pareto_[i].option] = i;
  // The model stops at the option of least real energy (see the header).
  std::size_t last_modelled = 0;
  for (std::size_t i = 1; i < pareto_.size(); ++i) {
    const StageOption& best = options[pareto_[last_modelled].option];
    if (options[pareto_[i].option].energy_j < best.energy_j) last_modelled = i;
  }
  // Per time unit, the modelled option of least effective energy that fits, and the fastest.
  std::vector<std::size_t> modelled;  // indices into pareto_, one per distinct unit
  std::vector<std::size_t> fastest_in_unit;
  for (std::size_t i = 0; i <= last_modelled; ++i) {
    if (!modelled.empty() && pareto_[modelled.back()].quantized_units == pareto_[i].quantized_units) {
      modelled.back() = i;  // later in the same unit = less effective energy
    } else {
      modelled.push_back(i);
      fastest_in_unit.push_back(i);
    }
  }
  min_units_ = pareto_[modelled.front()].quantized_units;
  max_units_ = pareto_[modelled.back()].quantized_units;
  const auto width = static_cast<std::size_t>(max_units_ - min_units_ + 1);
  frugal_at_.resize(width);
  tight_at_.resize(width);
  for (std::size_t k = 0, c = 0; k < width; ++k) {
    while (c + 1 < modelled.size() && pareto_[modelled[c + 1]].quantized_units <= min_units_ + static_cast<long>(k)) ++c;
    frugal_at_[k] = modelled[c];
    tight_at_[k] = fastest_in_unit[c];
  }

  std::vector<Candidate> points;
  for (std::size_t i : modelled) points.push_back(pareto_[i]);
  cost_at_.resize(width);
  saving_at_.assign(width - 1, 0.0);
  if (model == CostModelKind::kHull) {
    const Hull hull = lower_hull(points);
    for (std::size_t v = 0; v + 1 < hull.vertices.size(); ++v) {
      const Candidate& a = points[hull.vertices[v]];
      const Candidate& b = points[hull.vertices[v + 1]];
      for (long d = a.quantized_units; d <= b.quantized_units; ++d) {
        const auto k = static_cast<std::size_t>(d - min_units_);
        cost_at_[k] = a.effective_energy_j - static_cast<double>(d - a.quantized_units) * hull.saving_j[v];
        if (d < b.quantized_units) saving_at_[k] = hull.saving_j[v];
      }
    }
    if (hull.vertices.size() == 1) cost_at_[0] = points.front().effective_energy_j;
  } else {
    // Fitted over units from min_units: re-expressed around 0, a steep fit far from it (fine
    // units) would overflow a·exp(b·x).
    std::vector<double> x, y;
    for (const Candidate& c : points) {
      x.push_back(static_cast<double>(c.quantized_units - min_units_));
      y.push_back(c.effective_energy_j);
    }
    auto [a, b, c] = fit_exponential(x, y);
    for (std::size_t k = 0; k < width; ++k) {
      const double e = a * std::exp(b * static_cast<double>(k));
      cost_at_[k] = e + c;
      // a·e^{bd}·(1 − e^b): falls with d as exp does, where a difference of costs may not.
      if (k + 1 < width) saving_at_[k] = e * -std::expm1(b);
    }
  }
}

void OperationCost::fail_not_candidate(std::size_t option) {
  ::kareus::detail::fail_check("option is a candidate", __FILE__, __LINE__,
                               fmt::format("option {} is not a candidate of this operation", option));
}

double OperationCost::model_cost_j(long units) const {
  KAREUS_CHECK(units >= min_units() && units <= max_units(), "duration outside the model's range");
  return cost_at_[static_cast<std::size_t>(units - min_units())];
}

double OperationCost::shortening_cost_j(long units) const {
  return lengthening_saving_j(units - 1);
}

double OperationCost::lengthening_saving_j(long units) const {
  KAREUS_CHECK(units >= min_units() && units < max_units(), "duration outside the model's range");
  return saving_at_[static_cast<std::size_t>(units - min_units())];
}

}  // namespace kareus::pipeline
