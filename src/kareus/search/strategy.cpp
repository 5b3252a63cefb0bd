#include "kareus/search/strategy.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "kareus/core/error.hpp"
#include "kareus/search/random.hpp"

namespace kareus::search {

std::string_view to_string(StopReason reason) {
  switch (reason) {
    case StopReason::kBudgetSpent:
      return "budget";
    case StopReason::kGridExhausted:
      return "grid";
    case StopReason::kNoPredictedImprovement:
      return "converged";
  }
  return "unknown";
}

SearchState::SearchState(const KnobSpace& space, double static_power_w, int max_failures)
    : space_(&space),
      static_power_w_(static_power_w),
      max_failures_(std::max(1, max_failures)),
      ok_(space.size()),
      observations_(space.size()),
      failures_(space.size(), 0),
      failed_this_run_(space.size(), false) {}

void SearchState::add(const Measurement& m) {
  ++count_;
  next_batch_ = std::max(next_batch_, m.batch + 1);
  std::optional<std::size_t> i = space_->index_of(m.knob);
  if (!i) return;
  if (m.ok) {
    Measurement copy = m;
    copy.effective_energy_j = m.energy_j - static_power_w_ * m.time_s;
    observations_[*i].push_back(copy);
    if (!ok_[*i]) {
      ok_[*i] = std::move(copy);
    } else {
      average_in(*ok_[*i], copy, successes(*i));
    }
  } else {
    ++failures_[*i];
    if (run_started_) failed_this_run_[*i] = true;
  }
}

std::vector<std::size_t> SearchState::measured() const {
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < ok_.size(); ++i) {
    if (ok_[i]) out.push_back(i);
  }
  return out;
}

bool SearchState::is_eligible(std::size_t i) const {
  return space_->available(i) && !ok_[i] && failures_[i] < max_failures_ && !failed_this_run_[i];
}

bool SearchState::may_measure_again(std::size_t i) const {
  return space_->available(i) && ok_[i].has_value() && !failed_this_run_[i];
}

std::size_t SearchState::eligible_count() const {
  std::size_t n = 0;
  for (std::size_t i = 0; i < ok_.size(); ++i) n += is_eligible(i) ? 1 : 0;
  return n;
}

std::vector<TimeEnergy> SearchState::real_points() const {
  std::vector<TimeEnergy> out;
  for (std::size_t i : measured()) out.push_back({ok_[i]->time_s, ok_[i]->energy_j});
  return out;
}

std::vector<TimeEnergy> SearchState::effective_points() const {
  std::vector<TimeEnergy> out;
  for (std::size_t i : measured()) out.push_back({ok_[i]->time_s, ok_[i]->effective_energy_j});
  return out;
}

std::vector<Measurement> successful(const KnobSpace& space, const std::vector<Measurement>& measurements) {
  std::vector<std::optional<std::size_t>> row_of(space.size());
  std::vector<int> count;
  std::vector<Measurement> out;
  for (const Measurement& m : measurements) {
    if (!m.ok) continue;
    auto i = space.index_of(m.knob);
    if (!i) continue;
    if (!row_of[*i]) {
      row_of[*i] = out.size();
      out.push_back(m);
      out.back().repeat = 0;
      count.push_back(1);
    } else {
      average_in(out[*row_of[*i]], m, ++count[*row_of[*i]]);
    }
  }
  return out;
}

ProposalBatch ExhaustiveStrategy::propose(const SearchState& state, std::size_t max_count) {
  ProposalBatch out;
  const std::size_t limit = std::min(max_count, std::max<std::size_t>(1, batch_size_));
  const int batch = state.next_batch();
  for (std::size_t i = 0; i < state.space().size() && out.proposals.size() < limit; ++i) {
    if (state.is_eligible(i)) out.proposals.push_back({i, PickPass::kExhaustive, std::nullopt, batch});
  }
  if (out.proposals.empty()) out.stop = StopReason::kGridExhausted;
  return out;
}

ProposalBatch RandomStrategy::propose(const SearchState& state, std::size_t max_count) {
  if (order_.size() != state.space().size()) {
    order_.resize(state.space().size());
    std::iota(order_.begin(), order_.end(), std::size_t{0});
    Rng rng(seed_);
    rng.shuffle(order_);
  }
  ProposalBatch out;
  const std::size_t limit = std::min(max_count, std::max<std::size_t>(1, batch_size_));
  const int batch = state.next_batch();
  for (std::size_t i : order_) {
    if (out.proposals.size() >= limit) break;
    if (state.is_eligible(i)) out.proposals.push_back({i, PickPass::kRandom, std::nullopt, batch});
  }
  if (out.proposals.empty()) out.stop = StopReason::kGridExhausted;
  return out;
}

namespace {

// The surrogates' fit: the clock's additive term where there is a collective (otherwise the clock
// is the only feature), and the measurement noise as a floor on the fitted noise. `relative_sd`
// is each training target's relative standard deviation (empty: no known noise).
GpFitOptions surrogate_fit_options(const MoboOptions& options, const KnobSpace& space, const Eigen::VectorXd& y,
                                   const Eigen::VectorXd& relative_sd, bool log_scale) {
  GpFitOptions fit = options.gp;
  if (options.additive_clock && space.has_collective()) fit.additive_feature = 0;
  // A relative sd s is s² in log units; on the linear scale, (s · y)². The GP's noise is one
  // variance for all points: their mean.
  if (relative_sd.size() > 0) {
    fit.noise_floor = log_scale ? relative_sd.array().square().mean() : (relative_sd.array() * y.array()).square().mean();
    if (space.has_collective() && options.configuration_offset > 0) {
      // Every feature but the clock (column 0) names the configuration.
      for (Eigen::Index c = 1; c < space.features().cols(); ++c) fit.group_features.push_back(c);
      fit.group_variance = options.configuration_offset * options.configuration_offset * fit.noise_floor;
    }
  }
  return fit;
}

Eigen::VectorXd on_scale(const Eigen::VectorXd& y, bool log_scale) { return log_scale ? Eigen::VectorXd(y.array().log()) : y; }

// The surrogates' training set: each measured knob's features, its time and effective energy, and
// whether each target is fitted on the log scale (where asked and every value is positive).
struct TrainingSet {
  Eigen::MatrixXd x;
  Eigen::VectorXd time, energy;
  bool log_time = false, log_energy = false;
  Eigen::VectorXd time_sd, energy_sd;  // relative; empty without measurement noise
};
// `row_of(r)` gives row r's knob index in `space` and its measurement; `sigma` is the relative
// measurement noise (0: none known).
template <typename RowOf>
TrainingSet training_set(const KnobSpace& space, std::size_t rows, bool log_targets, double sigma,
                         double static_power_w, RowOf row_of) {
  const Eigen::MatrixXd& features = space.features();
  const auto n = static_cast<Eigen::Index>(rows);
  TrainingSet set;
  set.x.resize(n, features.cols());
  set.time.resize(n);
  set.energy.resize(n);
  for (std::size_t r = 0; r < rows; ++r) {
    const auto row = static_cast<Eigen::Index>(r);
    const auto [knob, measurement] = row_of(r);
    set.x.row(row) = features.row(static_cast<Eigen::Index>(knob));
    set.time(row) = measurement.time_s;
    set.energy(row) = measurement.effective_energy_j;
  }
  if (sigma > 0) {
    set.time_sd = Eigen::VectorXd::Constant(n, sigma);
    set.energy_sd.resize(n);
    // Capped at 1 (a measurement that says nothing): an effective energy near 0 has no relative sd.
    for (Eigen::Index r = 0; r < n; ++r) {
      set.energy_sd(r) = std::min(1.0, effective_energy_relative_sd(sigma, set.time(r), set.energy(r), static_power_w));
    }
  }
  set.log_time = log_targets && (set.time.array() > 0).all();
  set.log_energy = log_targets && (set.energy.array() > 0).all();
  return set;
}

// The rows of `features` at `knobs`, in that order.
Eigen::MatrixXd rows_of(const Eigen::MatrixXd& features, const std::vector<std::size_t>& knobs) {
  Eigen::MatrixXd out(static_cast<Eigen::Index>(knobs.size()), features.cols());
  for (std::size_t r = 0; r < knobs.size(); ++r) out.row(static_cast<Eigen::Index>(r)) = features.row(static_cast<Eigen::Index>(knobs[r]));
  return out;
}

// Predictions in the target's own units, whatever scale the model was fitted on.
GpPrediction predict_on_scale(const GaussianProcess& gp, const Eigen::MatrixXd& points, bool log_scale) {
  GpPrediction p = gp.predict(points);
  return log_scale ? p.exponentiated() : p;
}

}  // namespace

std::vector<Measurement> posterior_estimates(const KnobSpace& space, const std::vector<Measurement>& observations,
                                             double static_power_w, const MoboOptions& options) {
  std::vector<Measurement> estimated = successful(space, observations);
  if (estimated.empty() || !(options.measurement_noise > 0)) return estimated;
  std::vector<const Measurement*> rows;
  for (const Measurement& m : observations) {
    if (m.ok && space.index_of(m.knob)) rows.push_back(&m);
  }
  const TrainingSet set = training_set(space, rows.size(), options.log_targets, options.measurement_noise,
                                       static_power_w, [&](std::size_t r) {
    return std::pair<std::size_t, const Measurement&>(*space.index_of(rows[r]->knob), *rows[r]);
  });
  const GaussianProcess time = GaussianProcess::fit(set.x, on_scale(set.time, set.log_time),
                                                    surrogate_fit_options(options, space, set.time, set.time_sd, set.log_time));
  const GaussianProcess energy = GaussianProcess::fit(set.x, on_scale(set.energy, set.log_energy),
                                                      surrogate_fit_options(options, space, set.energy, set.energy_sd, set.log_energy));
  std::vector<std::size_t> knobs;
  for (const Measurement& m : estimated) knobs.push_back(*space.index_of(m.knob));
  const Eigen::MatrixXd at = rows_of(space.features(), knobs);
  const GpPrediction time_at = predict_on_scale(time, at, set.log_time);
  const GpPrediction energy_at = predict_on_scale(energy, at, set.log_energy);
  for (std::size_t r = 0; r < estimated.size(); ++r) {
    const auto row = static_cast<Eigen::Index>(r);
    estimated[r].time_s = time_at.mean(row);
    estimated[r].effective_energy_j = energy_at.mean(row);
    estimated[r].energy_j = estimated[r].effective_energy_j + static_power_w * estimated[r].time_s;
  }
  return estimated;
}

MoboStrategy::MoboStrategy(MoboOptions options) : options_(std::move(options)) {
  if (options_.batch_size < 1) throw InputError({"", 0, 0, "--batch"}, "the batch size must be at least 1");
  if (!(options_.measurement_noise >= 0 && options_.measurement_noise < 0.5)) {
    throw InputError({"", 0, 0, "--measurement-noise"},
                     "the measurement noise must be a relative standard deviation in [0, 0.5)");
  }
  if (options_.max_measurements_per_knob < 1) {
    throw InputError({"", 0, 0, "--remeasure"}, "a knob is measured at least once");
  }
  if (!(options_.configuration_offset >= 0 && std::isfinite(options_.configuration_offset))) {
    throw InputError({"", 0, 0, "--offset"}, "a configuration offset is a finite number of measurement sds, at least 0");
  }
}

ProposalBatch MoboStrategy::propose(const SearchState& state, std::size_t max_count) {
  ProposalBatch out;
  const KnobSpace& space = state.space();
  if (state.eligible_count() == 0) {
    out.stop = StopReason::kGridExhausted;
    return out;
  }

  // The initial design first, all of it in one batch (it needs no model).
  std::vector<std::size_t> design = space.initial_design(options_.initial);
  std::vector<std::size_t> baselines;
  if (options_.initial.include_baseline_knobs) baselines = space.baseline_knobs(options_.initial.nanobatching_sms);
  for (std::size_t i : design) {
    if (out.proposals.size() >= max_count) break;
    if (!state.is_eligible(i)) continue;
    bool baseline = std::find(baselines.begin(), baselines.end(), i) != baselines.end();
    out.proposals.push_back({i, baseline ? PickPass::kBaseline : PickPass::kInitial, std::nullopt, 0});
  }
  if (!out.proposals.empty()) return out;

  const std::vector<std::size_t> measured = state.measured();
  std::vector<std::size_t> candidates;
  for (std::size_t i = 0; i < space.size(); ++i) {
    if (state.is_eligible(i)) candidates.push_back(i);
  }
  const int batch = std::max(1, state.next_batch());
  if (measured.empty()) {
    // Nothing succeeded yet (everything failed): no model to ask; take the grid in order.
    const std::size_t count = std::min({max_count, options_.batch_size, candidates.size()});
    for (std::size_t k = 0; k < count; ++k) out.proposals.push_back({candidates[k], PickPass::kUncertain, std::nullopt, batch});
    return out;
  }
  const double sigma = options_.measurement_noise;

  // Fit the two surrogates (ascending index: order-independent): under noise on every
  // measurement, a knob measured again once per measurement; else on each knob's mean.
  std::vector<const Measurement*> rows;
  for (std::size_t i : measured) {
    if (sigma > 0) {
      for (const Measurement& m : state.observations(i)) rows.push_back(&m);
    } else {
      rows.push_back(&state.measurement(i));
    }
  }
  const TrainingSet set = training_set(space, rows.size(), options_.log_targets, sigma, state.static_power_w(),
                                       [&](std::size_t r) {
    return std::pair<std::size_t, const Measurement&>(*space.index_of(rows[r]->knob), *rows[r]);
  });
  const Eigen::MatrixXd& x = set.x;
  const bool log_time = set.log_time, log_energy = set.log_energy;
  GpFitOptions time_fit = surrogate_fit_options(options_, space, set.time, set.time_sd, log_time);
  GpFitOptions energy_fit = surrogate_fit_options(options_, space, set.energy, set.energy_sd, log_energy);
  // Each batch starts from the last one's fit, unless the model switched scale (a non-positive
  // observation appeared).
  if (time_model_ && log_time == time_log_) time_fit.warm_start = time_model_->hyperparameters();
  if (energy_model_ && log_energy == energy_log_) energy_fit.warm_start = energy_model_->hyperparameters();
  time_log_ = log_time;
  energy_log_ = log_energy;
  time_model_ = GaussianProcess::fit(x, on_scale(set.time, log_time), time_fit);
  energy_model_ = GaussianProcess::fit(x, on_scale(set.energy, log_energy), energy_fit);

  std::vector<Observed> observed;
  if (sigma > 0) {
    const Eigen::MatrixXd xm = rows_of(space.features(), measured);
    const GpPrediction time_at = predict_on_scale(*time_model_, xm, log_time);
    const GpPrediction energy_at = predict_on_scale(*energy_model_, xm, log_energy);
    for (Eigen::Index r = 0; r < xm.rows(); ++r) observed.push_back({time_at.mean(r), energy_at.mean(r)});
  } else {
    for (std::size_t i : measured) {
      observed.push_back({state.measurement(i).time_s, state.measurement(i).effective_energy_j});
    }
  }
  // The knobs on the posterior fronts may be measured again (after the new ones): where a
  // measurement's scatter decides what the front holds.
  std::vector<bool> again(candidates.size(), false);
  if (sigma > 0 && options_.max_measurements_per_knob > 1) {
    std::vector<TimeEnergy> real, effective;
    for (const Observed& o : observed) {
      real.push_back({o.time_s, o.effective_energy_j + state.static_power_w() * o.time_s});
      effective.push_back({o.time_s, o.effective_energy_j});
    }
    std::vector<bool> on_front(measured.size(), false);
    for (std::size_t r : pareto_indices(real)) on_front[r] = true;
    for (std::size_t r : pareto_indices(effective)) on_front[r] = true;
    for (std::size_t r = 0; r < measured.size(); ++r) {
      const std::size_t i = measured[r];
      if (on_front[r] && state.successes(i) < options_.max_measurements_per_knob && state.may_measure_again(i)) {
        candidates.push_back(i);
        again.push_back(true);
      }
    }
  }
  const std::size_t count = std::min({max_count, options_.batch_size, candidates.size()});
  const Eigen::MatrixXd xc = rows_of(space.features(), candidates);
  const GpPrediction time_pred = predict_on_scale(*time_model_, xc, log_time);
  const GpPrediction energy_pred = predict_on_scale(*energy_model_, xc, log_energy);
  BatchOptions batch_options;
  batch_options.batch_size = count;
  batch_options.shares = options_.shares;
  batch_options.static_power_w = state.static_power_w();
  batch_options.expected_improvement = options_.expected_improvement;
  batch_options.optimism = options_.optimism;
  batch_options.liar = options_.liar;
  batch_options.reference_margin = options_.reference_margin;
  BatchPlan plan = plan_batch(observed, time_pred, energy_pred, batch_options, again);

  if (options_.stop_threshold) {
    low_improvement_batches_ = plan.predicted_improvement < *options_.stop_threshold ? low_improvement_batches_ + 1 : 0;
    if (low_improvement_batches_ >= 2) {
      out.stop = StopReason::kNoPredictedImprovement;
      return out;
    }
  }
  for (const BatchPick& p : plan.picks) out.proposals.push_back({candidates[p.candidate], p.pass, p.predicted, batch});
  if (out.proposals.empty()) out.stop = StopReason::kGridExhausted;
  return out;
}

}  // namespace kareus::search
