// What one pipeline operation (a (stage, instruction type) pair) costs at each integer duration.
//
// Costs are effective energies E − P_blocking·t: what an option adds to the iteration's energy
// beyond the blocking power the GPU draws anyway. `options()` is the Pareto set of the options in
// (real time, effective energy), time ascending; plans are assigned from it.
//
// The solver's model covers those options from the fastest up to the one of least real energy:
// a slower option costs more real energy and more time, so it is never worth it on the critical
// path, and off the critical path slack reclamation takes it when plans are evaluated. Modelling
// it would only stretch the frontier's dominated slow end.
//
// Options are quantised up: an option of real time t fits a duration of d units when
// t <= d * unit_time_s, i.e. its quantised time is ceil(t / unit). Planned durations are therefore
// never shorter than the real times they stand for. Per unit, the modelled option is the one of
// least effective energy that fits.
//
// The cost model turns the discrete candidates into a convex cost on every integer duration
// between the fastest and slowest candidate, as the Phillips–Dessouky solver needs:
// - kHull: the lower convex hull of the candidates, linear between its vertices; exact at vertices.
// - kExponential: the a·exp(b·d) + c least-squares fit Perseus uses (a > 0, b < 0).
// Per-unit slopes are rounded to integers in `cost_scale` units per joule; rounding a monotone
// sequence keeps it monotone, so the model stays exactly convex in integers.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <span>
#include <string_view>
#include <optional>
#include <vector>

#include "kareus/pipeline/option_table.hpp"

namespace kareus::pipeline {

enum class CostModelKind { kHull, kExponential };
std::string_view to_string(CostModelKind kind);
std::optional<CostModelKind> parse_cost_model_kind(std::string_view text);

struct Candidate {
  std::size_t option = 0;  // index into the operation's option list
  long quantized_units = 0;
  double time_s = 0;
  double effective_energy_j = 0;
};

class OperationCost {
 public:
  // Throws InputError when every option's effective energy is negative (P_blocking above the
  // operation's average power), naming `what`.
  OperationCost(std::span<const StageOption> options, double p_blocking_w, double unit_time_s,
                CostModelKind model, const std::string& what);

  long min_units() const { return min_units_; }
  long max_units() const { return max_units_; }
  // Pareto set in (real time, effective energy), real time strictly ascending.
  std::span<const Candidate> options() const { return pareto_; }
  // The options the model covers: options() from the fastest up to the one of least real energy,
  // which is the frugal option of the longest duration.
  std::span<const Candidate> modelled() const { return std::span(pareto_).first(frugal_at_.back() + 1); }
  // Index into options() of the table option `option`, which must be one of them.
  std::size_t candidate_of(std::size_t option) const {  // inline: the local search asks per node
    if (option >= candidate_of_.size() || candidate_of_[option] == kNotCandidate) fail_not_candidate(option);
    return candidate_of_[option];
  }

  // Index into options() of the option that runs within `units` at least effective energy (the
  // fastest option when none fits).
  // (Both inline: the solver asks for every instruction at every step.)
  std::size_t frugal_for(long units) const {
    return frugal_at_[static_cast<std::size_t>(std::clamp(units, min_units_, max_units_) - min_units_)];
  }
  // Index of the fastest option within the same time unit as frugal_for(units).
  std::size_t tight_for(long units) const {
    return tight_at_[static_cast<std::size_t>(std::clamp(units, min_units_, max_units_) - min_units_)];
  }

  // Model cost, in joules, at an integer duration within [min_units, max_units].
  double model_cost_j(long units) const;

  // Continuous joules of model cost change per unit at the current duration:
  // shortening_cost(d) = cost(d-1) - cost(d) for d > min_units;
  // lengthening_saving(d) = cost(d) - cost(d+1) for d < max_units.
  // Each is computed directly (the hull's segment slope, the fit's derivative step), not as a
  // difference of costs, so that the sequence never rises: the solver's convexity rests on it.
  double shortening_cost_j(long units) const;
  double lengthening_saving_j(long units) const;

  CostModelKind model() const { return model_; }

 private:
  static constexpr std::size_t kNotCandidate = static_cast<std::size_t>(-1);
  [[noreturn]] static void fail_not_candidate(std::size_t option);
  std::vector<Candidate> pareto_;
  std::vector<std::size_t> candidate_of_;  // per table option: its index in pareto_
  long min_units_ = 0, max_units_ = 0;
  std::vector<std::size_t> frugal_at_, tight_at_;  // per unit offset from min_units
  std::vector<double> cost_at_;                    // model cost per unit offset from min_units
  std::vector<double> saving_at_;                  // lengthening saving per unit offset, never rising
  CostModelKind model_;
};

// Fits cost = a·exp(b·x) + c to the points by least squares with a > 0, b < 0 (convex and
// decreasing): for each b the best a, c are linear least squares; b is found by golden-section
// search on a log scale. Returns {a, b, c}.
std::array<double, 3> fit_exponential(std::span<const double> x, std::span<const double> y);

}  // namespace kareus::pipeline
