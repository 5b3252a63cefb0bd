#include "kareus/search/batch.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <numbers>
#include <numeric>

#include "kareus/core/error.hpp"

namespace kareus::search {

namespace {

// hypervolume_improvement() on a front that is already Pareto, time ascending.
double improvement_over_pareto(std::span<const TimeEnergy> f, const TimeEnergy& point, const TimeEnergy& reference) {
  if (!(point.time_s < reference.time_s) || !(point.energy_j < reference.energy_j)) return 0.0;
  // The added area is ∫ max(0, h(t) − e_q) dt over [t_q, t_ref], with h(t) the lowest energy the
  // front reaches by time t (capped at the reference).
  double h = reference.energy_j;
  std::size_t i = 0;
  for (; i < f.size() && f[i].time_s <= point.time_s; ++i) h = std::min(h, f[i].energy_j);
  double area = 0;
  double t = point.time_s;
  for (; i < f.size() && h > point.energy_j; ++i) {
    double next = std::min(f[i].time_s, reference.time_s);
    area += (next - t) * (h - point.energy_j);
    t = next;
    if (t >= reference.time_s) return area;
    h = std::min(h, f[i].energy_j);
  }
  if (h > point.energy_j) area += (reference.time_s - t) * (h - point.energy_j);
  return area;
}

// Probabilists' Gauss–Hermite rule, 4 nodes: E[g(Z)] ≈ Σ w·g(z) for standard normal Z.
constexpr std::array<double, 4> kNodes{-2.3344142183389773, -0.7419637843027258, 0.7419637843027258,
                                       2.3344142183389773};
constexpr std::array<double, 4> kWeights{0.04587585476806849, 0.4541241452319315, 0.4541241452319315,
                                         0.04587585476806849};

}  // namespace

double hypervolume_improvement(std::span<const TimeEnergy> front, const TimeEnergy& point, const TimeEnergy& reference) {
  std::vector<TimeEnergy> f = pareto_front(front);  // time ascending, energy descending
  return improvement_over_pareto(f, point, reference);
}

TimeEnergy reference_point(std::span<const TimeEnergy> points, double margin) {
  KAREUS_CHECK(!points.empty(), "a reference point needs at least one point");
  std::vector<TimeEnergy> f = pareto_front(points);
  TimeEnergy nadir{f.back().time_s, f.front().energy_j};
  TimeEnergy ideal{f.front().time_s, f.back().energy_j};
  auto push = [&](double worst, double best) {
    double extent = worst - best;
    double step = extent > 0 ? margin * extent : margin * std::abs(worst);
    return worst + (step > 0 ? step : margin);
  };
  return {push(nadir.time_s, ideal.time_s), push(nadir.energy_j, ideal.energy_j)};
}

std::array<std::size_t, 4> pass_counts(std::size_t batch_size, const BatchShares& shares) {
  const double rest = std::max(0.0, 1.0 - shares.hv_real - shares.hv_effective - shares.fastest);
  const std::array<double, 4> quota{shares.hv_real * static_cast<double>(batch_size),
                                    shares.hv_effective * static_cast<double>(batch_size),
                                    shares.fastest * static_cast<double>(batch_size),
                                    rest * static_cast<double>(batch_size)};
  std::array<std::size_t, 4> counts{};
  std::size_t used = 0;
  for (std::size_t i = 0; i < 4; ++i) {
    counts[i] = static_cast<std::size_t>(std::floor(quota[i] + 1e-9));
    used += counts[i];
  }
  std::array<std::size_t, 4> order{0, 1, 2, 3};
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return quota[a] - static_cast<double>(counts[a]) > quota[b] - static_cast<double>(counts[b]) + 1e-9;
  });
  for (std::size_t k = 0; used < batch_size; k = (k + 1) % 4) {
    ++counts[order[k]];
    ++used;
  }
  while (used > batch_size) {  // shares summing above one: trim from the last pass
    for (std::size_t i = 4; i-- > 0 && used > batch_size;) {
      if (counts[i] > 0) --counts[i], --used;
    }
  }
  return counts;
}

namespace {

double population_sd(const std::vector<double>& v) {
  if (v.empty()) return 1.0;
  double mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  double var = 0;
  for (double x : v) var += (x - mean) * (x - mean);
  double sd = std::sqrt(var / static_cast<double>(v.size()));
  if (sd > 0) return sd;
  return std::abs(mean) > 0 ? std::abs(mean) : 1.0;
}

double box_area(const TimeEnergy& reference, std::span<const TimeEnergy> points) {
  double t = reference.time_s, e = reference.energy_j;
  for (const TimeEnergy& p : points) t = std::min(t, p.time_s), e = std::min(e, p.energy_j);
  double area = (reference.time_s - t) * (reference.energy_j - e);
  return area > 0 ? area : 1.0;
}

class BatchState {
 public:
  BatchState(std::span<const Observed> observed, const GpPrediction& time, const GpPrediction& effective,
             const BatchOptions& o)
      : time_(time), effective_(effective), o_(o), n_(static_cast<std::size_t>(time.mean().size())) {
    KAREUS_CHECK(effective.mean().size() == time.mean().size(), "time and energy predictions differ in size");
    KAREUS_CHECK(!observed.empty(), "a batch needs at least one observation");
    var_t_ = time.variance();
    var_e_ = effective.variance();
    mu_t_ = time.mean();
    mu_e_ = effective.mean();
    taken_.assign(n_, false);
    std::vector<double> ts, es;
    for (const Observed& ob : observed) {
      real_front_.push_back({ob.time_s, ob.effective_energy_j + o.static_power_w * ob.time_s});
      eff_front_.push_back({ob.time_s, ob.effective_energy_j});
      ts.push_back(ob.time_s);
      es.push_back(real_front_.back().energy_j);
    }
    ref_real_ = reference_point(real_front_, o.reference_margin);
    ref_eff_ = reference_point(eff_front_, o.reference_margin);
    area_real_ = box_area(ref_real_, real_front_);
    area_eff_ = box_area(ref_eff_, eff_front_);
    hv_real_ = hypervolume_2d(real_front_, ref_real_);
    real_front_ = pareto_front(real_front_);
    eff_front_ = pareto_front(eff_front_);
    sd_time_ = population_sd(ts);
    sd_energy_ = population_sd(es);
  }

  std::size_t size() const { return n_; }
  bool taken(std::size_t i) const { return taken_[i]; }
  std::size_t picked() const { return plan_.picks.size(); }
  bool full() const { return picked() >= o_.batch_size || picked() >= n_; }
  BatchPlan& plan() { return plan_; }

  double sd_t(std::size_t i) const { return std::sqrt(std::max(0.0, var_t_(idx(i)))); }
  double sd_real(std::size_t i) const {
    return std::sqrt(std::max(0.0, var_e_(idx(i)) + o_.static_power_w * o_.static_power_w * var_t_(idx(i))));
  }
  double mu_t(std::size_t i) const { return mu_t_(idx(i)); }
  double mu_eff(std::size_t i) const { return mu_e_(idx(i)); }
  double mu_real(std::size_t i) const { return mu_eff(i) + o_.static_power_w * mu_t(i); }

  // Expected reduction of the fastest time known (observed, or assumed in this batch) if the
  // candidate is measured: E[max(0, t_fastest − T)] for T ~ N(μ, σ²).
  double expected_speedup(std::size_t i) const {
    const double gap = real_front_.front().time_s - mu_t(i);
    const double sd = sd_t(i);
    if (!(sd > 0)) return std::max(0.0, gap);
    const double z = gap / sd;
    return sd * (z * 0.5 * std::erfc(-z / std::sqrt(2.0)) + std::exp(-0.5 * z * z) / std::sqrt(2.0 * std::numbers::pi));
  }
  double sd_eff(std::size_t i) const { return std::sqrt(std::max(0.0, var_e_(idx(i)))); }
  // The improvement a candidate promises: expected (over the two models' Gaussian predictions,
  // by a 4×4 Gauss–Hermite rule), or at its optimistic point.
  double improvement(std::size_t i, bool real) const { return improvement(i, real, o_.optimism); }
  double improvement(std::size_t i, bool real, double optimism) const {
    const std::vector<TimeEnergy>& front = real ? real_front_ : eff_front_;
    const TimeEnergy& ref = real ? ref_real_ : ref_eff_;
    const double p = real ? o_.static_power_w : 0.0;
    if (!o_.expected_improvement) {
      const double sd_e = real ? sd_real(i) : sd_eff(i);
      TimeEnergy q{mu_t(i) - optimism * sd_t(i), mu_eff(i) + p * mu_t(i) - optimism * sd_e};
      return improvement_over_pareto(front, q, ref);
    }
    double sum = 0;
    for (std::size_t a = 0; a < kNodes.size(); ++a) {
      const double t = mu_t(i) + kNodes[a] * sd_t(i);
      for (std::size_t b = 0; b < kNodes.size(); ++b) {
        const double e = mu_eff(i) + kNodes[b] * sd_eff(i) + p * t;
        sum += kWeights[a] * kWeights[b] * improvement_over_pareto(front, {t, e}, ref);
      }
    }
    return sum;
  }
  double hvi_real(std::size_t i) const { return improvement(i, true); }
  double hvi_eff(std::size_t i) const { return improvement(i, false); }
  // Whether the candidate's optimistic point at `plausible_sds` sds (a generous bound) would
  // improve either front.
  bool may_improve(std::size_t i) const {
    const double k = o_.plausible_sds;
    double sd_e = std::sqrt(std::max(0.0, var_e_(idx(i))));
    TimeEnergy real{mu_t(i) - k * sd_t(i), mu_real(i) - k * sd_real(i)};
    TimeEnergy eff{mu_t(i) - k * sd_t(i), mu_eff(i) - k * sd_e};
    return improvement_over_pareto(real_front_, real, ref_real_) > 0 || improvement_over_pareto(eff_front_, eff, ref_eff_) > 0;
  }
  // The better of the two improvements, each relative to its front's box, at `optimism` sds.
  double best_improvement(std::size_t i, double optimism) const {
    return std::max(improvement(i, true, optimism) / area_real_, improvement(i, false, optimism) / area_eff_);
  }
  double uncertainty(std::size_t i) const { return sd_t(i) / sd_time_ + sd_real(i) / sd_energy_; }
  // Uncertainty, ranking first the candidates that may still improve either front (Pareto active
  // learning's rule: uncertainty about the frontier, not about the whole grid).
  double frontier_uncertainty(std::size_t i) const { return may_improve(i) ? 1e6 + uncertainty(i) : uncertainty(i); }
  double observed_hv_real() const { return hv_real_ > 0 ? hv_real_ : area_real_; }

  void pick(std::size_t i, PickPass pass) {
    const Eigen::Index p = idx(i);
    Prediction pred;
    pred.time_s = time_.mean(p);
    pred.time_sd_s = std::sqrt(std::max(0.0, time_.variance(p)));
    pred.effective_energy_j = effective_.mean(p);
    pred.effective_energy_sd_j = std::sqrt(std::max(0.0, effective_.variance(p)));
    pred.energy_j = pred.effective_energy_j + o_.static_power_w * pred.time_s;
    pred.energy_sd_j = std::sqrt(std::max(0.0, effective_.variance(p) + o_.static_power_w * o_.static_power_w * time_.variance(p)));
    plan_.picks.push_back({i, pass, pred});
    taken_[i] = true;
    // Pretend the measurement came back `liar` sds worse than predicted (a pessimistic constant
    // liar): the lie joins the fronts, and conditioning the models on it takes the variance the
    // measurement will remove off every candidate and worsens the means of those strongly
    // correlated with this one (the same SMs and slot at a neighbouring clock), so that one batch
    // does not sweep a single unproven configuration across every clock.
    const double lie_t = mu_t(i) + o_.liar * sd_t(i);
    const double lie_e = mu_eff(i) + o_.liar * std::sqrt(std::max(0.0, var_e_(p)));
    real_front_.push_back({lie_t, lie_e + o_.static_power_w * lie_t});
    eff_front_.push_back({lie_t, lie_e});
    real_front_ = pareto_front(real_front_);
    eff_front_ = pareto_front(eff_front_);
    condition(time_, var_t_, mu_t_, cov_t_, den_t_, p, lie_t);
    condition(effective_, var_e_, mu_e_, cov_e_, den_e_, p, lie_e);
  }

 private:
  static Eigen::Index idx(std::size_t i) { return static_cast<Eigen::Index>(i); }

  // One rank-one update of the posterior: observe `value` at p.
  static void condition(const GpPrediction& pred, Eigen::VectorXd& var, Eigen::VectorXd& mean,
                        std::vector<Eigen::VectorXd>& covs, std::vector<double>& dens, Eigen::Index p, double value) {
    Eigen::VectorXd c = pred.covariance_with(p);
    for (std::size_t q = 0; q < covs.size(); ++q) c -= covs[q] * (covs[q](p) / dens[q]);
    double den = std::max(var(p), 0.0) + pred.noise_variance(p);
    if (!(den > 0)) return;
    mean += c * ((value - mean(p)) / den);
    var = (var.array() - c.array().square() / den).max(0.0).matrix();
    covs.push_back(std::move(c));
    dens.push_back(den);
  }

  const GpPrediction& time_;
  const GpPrediction& effective_;
  const BatchOptions& o_;
  std::size_t n_;
  Eigen::VectorXd var_t_, var_e_, mu_t_, mu_e_;
  std::vector<Eigen::VectorXd> cov_t_, cov_e_;
  std::vector<double> den_t_, den_e_;
  std::vector<bool> taken_;
  std::vector<TimeEnergy> real_front_, eff_front_;
  TimeEnergy ref_real_, ref_eff_;
  double area_real_ = 1, area_eff_ = 1, hv_real_ = 0;
  double sd_time_ = 1, sd_energy_ = 1;
  BatchPlan plan_;
};

// Greedy pass: `count` picks, each the untaken candidate with the highest positive score (ties to
// the lower index), among the new ones only unless `with_again`. Returns how many places it could
// not fill.
template <typename Score>
std::size_t greedy(BatchState& s, std::size_t count, PickPass pass, Score score, bool need_positive,
                   const std::vector<bool>& again, bool with_again) {
  for (std::size_t k = 0; k < count; ++k) {
    if (s.full()) return 0;
    double best = -1;
    std::size_t best_i = s.size();
    for (std::size_t i = 0; i < s.size(); ++i) {
      if (s.taken(i) || (!with_again && !again.empty() && again[i])) continue;
      double v = score(i);
      if (best_i == s.size() || v > best) best = v, best_i = i;
    }
    if (best_i == s.size() || (need_positive && !(best > 0))) return count - k;
    s.pick(best_i, pass);
  }
  return 0;
}

}  // namespace

BatchPlan plan_batch(std::span<const Observed> observed, const GpPrediction& time, const GpPrediction& effective,
                     const BatchOptions& options, const std::vector<bool>& again) {
  BatchState s(observed, time, effective, options);
  KAREUS_CHECK(again.empty() || again.size() == s.size(), "one again flag per candidate");
  if (s.size() == 0 || options.batch_size == 0) return {};
  double best_start = 0;
  for (std::size_t i = 0; i < s.size(); ++i) best_start = std::max(best_start, s.hvi_real(i));
  s.plan().predicted_improvement = best_start / s.observed_hv_real();

  const auto counts = pass_counts(options.batch_size, options.shares);
  auto pass = [&](std::size_t count, PickPass name, auto score, bool need_positive, bool with_again) {
    return greedy(s, count, name, score, need_positive, again, with_again);
  };
  std::size_t shortfall = 0;
  shortfall += pass(counts[0], PickPass::kHvReal, [&](std::size_t i) { return s.hvi_real(i); }, true, true);
  shortfall += pass(counts[1], PickPass::kHvEffective, [&](std::size_t i) { return s.hvi_eff(i); }, true, true);
  // Fastest predicted: the largest expected gain on the fastest time known. (The lowest mean is
  // no help when many knobs share a time floor, a collective's time at its bandwidth limit: the
  // pass would fill with knobs no faster than one already measured.)
  // When no candidate has a chance (the gain underflows to 0), the lowest mean.
  shortfall += pass(counts[2], PickPass::kFastest, [&](std::size_t i) {
    const double gain = s.expected_speedup(i);
    return gain > 0 ? gain : -s.mu_t(i);
  }, false, false);
  // Most uncertain among the candidates that may still improve either front; among all when too
  // few may.
  shortfall += pass(counts[3], PickPass::kUncertain, [&](std::size_t i) { return s.frontier_uncertainty(i); }, false, false);
  // Back-fill by the better improvement, at growing optimism while no candidate improves: a
  // candidate one or two sds of luck away from the front is a better bet than the most uncertain
  // knob of the grid, typically a slow corner no front will ever reach.
  std::size_t left = shortfall;
  for (double optimism : {options.optimism, 1.0, 2.0, 3.0}) {
    if (optimism < options.optimism) continue;
    left = pass(left, PickPass::kBackfill, [&](std::size_t i) { return s.best_improvement(i, optimism); }, true, true);
  }
  pass(left, PickPass::kBackfill, [&](std::size_t i) { return s.frontier_uncertainty(i); }, false, false);
  return std::move(s.plan());
}

}  // namespace kareus::search
