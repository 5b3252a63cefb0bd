#include "kareus/search/gaussian_process.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlopt.hpp>
#include <numbers>

#include "kareus/core/error.hpp"

namespace kareus::search {
namespace {

const double kSqrt5 = std::sqrt(5.0);

// Matérn-5/2 kernel matrix between the rows of two length-scale-scaled matrices.
Eigen::MatrixXd kernel(const Eigen::MatrixXd& a, const Eigen::MatrixXd& b, double signal_variance) {
  Eigen::MatrixXd k(a.rows(), b.rows());
  for (Eigen::Index j = 0; j < b.rows(); ++j) {
    for (Eigen::Index i = 0; i < a.rows(); ++i) {
      k(i, j) = signal_variance * matern52((a.row(i) - b.row(j)).norm());
    }
  }
  return k;
}

// Whether row i of a and row j of b agree on every column of `columns`.
bool same_group(const Eigen::MatrixXd& a, Eigen::Index i, const Eigen::MatrixXd& b, Eigen::Index j,
                const std::vector<Eigen::Index>& columns) {
  return std::all_of(columns.begin(), columns.end(), [&](Eigen::Index c) { return a(i, c) == b(j, c); });
}

Eigen::MatrixXd scale_columns(const Eigen::MatrixXd& x, const Eigen::VectorXd& length_scales) {
  return x * length_scales.cwiseInverse().asDiagonal();
}

// Parameter vector of the optimiser: log length scales, log signal variance, log noise variance,
// then (with an additive term) its log length scale and log variance.
std::vector<double> to_log_params(const GpHyperparameters& h, bool additive) {
  std::vector<double> p;
  for (Eigen::Index d = 0; d < h.length_scales.size(); ++d) p.push_back(std::log(h.length_scales(d)));
  p.push_back(std::log(h.signal_variance));
  p.push_back(std::log(h.noise_variance));
  if (additive) {
    p.push_back(std::log(h.additive_length_scale));
    p.push_back(std::log(h.additive_variance));
  }
  return p;
}

GpHyperparameters from_log_params(const std::vector<double>& p, bool additive) {
  GpHyperparameters h;
  const std::size_t extra = additive ? 2 : 0;
  auto d = static_cast<Eigen::Index>(p.size() - 2 - extra);
  h.length_scales.resize(d);
  for (Eigen::Index i = 0; i < d; ++i) h.length_scales(i) = std::exp(p[static_cast<std::size_t>(i)]);
  const auto n = static_cast<std::size_t>(d);
  h.signal_variance = std::exp(p[n]);
  h.noise_variance = std::exp(p[n + 1]);
  if (additive) {
    h.additive_length_scale = std::exp(p[n + 2]);
    h.additive_variance = std::exp(p[n + 3]);
  }
  return h;
}

GpHyperparameters clamped(GpHyperparameters h, const GpFitOptions& o) {
  for (Eigen::Index d = 0; d < h.length_scales.size(); ++d) {
    h.length_scales(d) = std::clamp(h.length_scales(d), o.min_length_scale, o.max_length_scale);
  }
  h.signal_variance = std::clamp(h.signal_variance, 1e-3, 1e3);
  h.noise_variance = std::clamp(h.noise_variance, o.min_noise_variance, o.max_noise_variance);
  h.additive_length_scale = std::clamp(h.additive_length_scale, o.min_length_scale, o.max_length_scale);
  h.additive_variance = o.additive_feature ? std::clamp(h.additive_variance, 1e-3, 1e3) : 0.0;
  return h;
}

struct Objective {
  const GaussianProcess* gp;
  bool additive = false;
  double best = -std::numeric_limits<double>::infinity();
  std::vector<double> best_params;
};

double objective(const std::vector<double>& p, std::vector<double>& grad, void* data) {
  auto* o = static_cast<Objective*>(data);
  Eigen::VectorXd g;
  double value = o->gp->log_marginal_likelihood(from_log_params(p, o->additive), grad.empty() ? nullptr : &g);
  if (!std::isfinite(value)) {
    // A failed factorisation: steer the optimiser away without a gradient to follow.
    std::fill(grad.begin(), grad.end(), 0.0);
    return -1e300;
  }
  for (std::size_t i = 0; i < grad.size(); ++i) grad[i] = g(static_cast<Eigen::Index>(i));
  if (value > o->best) {
    o->best = value;
    o->best_params = p;
  }
  return value;
}

}  // namespace

double matern52(double r) {
  double s = kSqrt5 * r;
  return (1.0 + s + s * s / 3.0) * std::exp(-s);
}

Eigen::VectorXd GpPrediction::covariance_with(Eigen::Index j) const {
  Eigen::VectorXd prior(points_.rows());
  for (Eigen::Index i = 0; i < points_.rows(); ++i) {
    prior(i) = signal_variance_ * matern52((points_.row(i) - points_.row(j)).norm());
    if (additive_.size() > 0) prior(i) += additive_variance_ * matern52(std::abs(additive_(i) - additive_(j)));
    if (groups_.cols() > 0 && groups_.row(i) == groups_.row(j)) prior(i) += group_variance_;
  }
  Eigen::VectorXd c = prior - v_.transpose() * v_.col(j);
  if (scale_.size() == 0) return c;
  return (c.array() * scale_.array() * scale_(j)).matrix();
}

double GpPrediction::noise_variance(Eigen::Index j) const {
  return scale_.size() == 0 ? noise_variance_ : noise_variance_ * scale_(j) * scale_(j);
}

GpPrediction GpPrediction::exponentiated() const {
  KAREUS_CHECK(scale_.size() == 0, "a prediction exponentiated twice");
  GpPrediction p = *this;
  p.scale_ = mean_.array().exp().matrix();
  p.mean_ = p.scale_;
  p.variance_ = (variance_.array() * p.scale_.array().square()).matrix();
  return p;
}

GaussianProcess::GaussianProcess(Eigen::MatrixXd x, Eigen::VectorXd y, std::optional<Eigen::Index> additive_feature,
                                 std::vector<Eigen::Index> group_features)
    : x_(std::move(x)), additive_feature_(additive_feature), group_features_(std::move(group_features)) {
  KAREUS_CHECK(!additive_feature_ || (*additive_feature_ >= 0 && *additive_feature_ < x_.cols()),
               "the GP's additive feature is not one of its features");
  KAREUS_CHECK(std::all_of(group_features_.begin(), group_features_.end(),
                           [&](Eigen::Index c) { return c >= 0 && c < x_.cols(); }),
               "the GP's group features are not among its features");
  KAREUS_CHECK(x_.rows() == y.size() && x_.rows() >= 1, "GP needs one target per training row");
  KAREUS_CHECK(x_.allFinite() && y.allFinite(), "GP training data must be finite");
  y_mean_ = y.mean();
  double var = (y.array() - y_mean_).square().mean();
  y_scale_ = var > 0 ? std::sqrt(var) : 1.0;
  if (y_scale_ < 1e-12 * std::max(1.0, std::abs(y_mean_))) y_scale_ = 1.0;
  y_ = (y.array() - y_mean_) / y_scale_;
}

GpHyperparameters GaussianProcess::default_hyperparameters(Eigen::Index features) {
  GpHyperparameters h;
  h.length_scales = Eigen::VectorXd::Constant(features, 0.5);
  h.signal_variance = 1.0;
  h.noise_variance = 1e-4;
  return h;
}

void GaussianProcess::add_additive_and_group_covariance(Eigen::MatrixXd& k, const Eigen::MatrixXd& points,
                                              const GpHyperparameters& h) const {
  if (group_variance_ > 0) {
    for (Eigen::Index j = 0; j < points.rows(); ++j) {
      for (Eigen::Index i = 0; i < x_.rows(); ++i) {
        if (same_group(x_, i, points, j, group_features_)) k(i, j) += group_variance_;
      }
    }
  }
  if (!additive_feature_) return;
  const Eigen::Index f = *additive_feature_;
  for (Eigen::Index j = 0; j < points.rows(); ++j) {
    for (Eigen::Index i = 0; i < x_.rows(); ++i) {
      k(i, j) += h.additive_variance * matern52(std::abs(x_(i, f) - points(j, f)) / h.additive_length_scale);
    }
  }
}

double GaussianProcess::log_marginal_likelihood(const GpHyperparameters& h, Eigen::VectorXd* gradient) const {
  const Eigen::Index n = x_.rows();
  const Eigen::Index d = x_.cols();
  Eigen::MatrixXd xs = scale_columns(x_, h.length_scales);
  Eigen::MatrixXd k_ard = kernel(xs, xs, h.signal_variance);
  Eigen::MatrixXd k = k_ard;
  add_additive_and_group_covariance(k, x_, h);
  k.diagonal().array() += h.noise_variance;
  Eigen::LLT<Eigen::MatrixXd> chol(k);
  if (chol.info() != Eigen::Success) return -std::numeric_limits<double>::infinity();
  Eigen::VectorXd alpha = chol.solve(y_);
  double log_det = 2.0 * chol.matrixLLT().diagonal().array().log().sum();
  double value = -0.5 * y_.dot(alpha) - 0.5 * log_det - 0.5 * static_cast<double>(n) * std::log(2 * std::numbers::pi);
  if (!gradient) return value;

  // d/dθ = ½ tr((ααᵀ − K⁻¹) ∂K/∂θ), θ the log parameters.
  Eigen::MatrixXd w = alpha * alpha.transpose() - chol.solve(Eigen::MatrixXd::Identity(n, n));
  gradient->setZero(d + 2 + (additive_feature_ ? 2 : 0));
  for (Eigen::Index j = 0; j < n; ++j) {
    for (Eigen::Index i = j + 1; i < n; ++i) {
      Eigen::ArrayXd diff2 = (xs.row(i) - xs.row(j)).array().square().transpose();
      double r = std::sqrt(diff2.sum());
      double s = kSqrt5 * r;
      // ∂k/∂log ℓ_d = σ² (5/3)(1 + √5 r) e^{−√5 r} (Δ_d/ℓ_d)²; counted twice for (i, j) and (j, i).
      double common = 2.0 * w(i, j) * h.signal_variance * (5.0 / 3.0) * (1.0 + s) * std::exp(-s);
      gradient->head(d).array() += common * diff2;
    }
  }
  gradient->head(d) *= 0.5;
  (*gradient)(d) = 0.5 * (w.array() * k_ard.array()).sum();  // ∂K/∂log σ² = the ARD part
  (*gradient)(d + 1) = 0.5 * h.noise_variance * w.trace();
  if (additive_feature_) {
    const Eigen::Index f = *additive_feature_;
    double g_length = 0, g_variance = 0;
    for (Eigen::Index j = 0; j < n; ++j) {
      for (Eigen::Index i = 0; i < n; ++i) {
        const double r = std::abs(x_(i, f) - x_(j, f)) / h.additive_length_scale;
        const double s = kSqrt5 * r;
        g_variance += w(i, j) * h.additive_variance * matern52(r);
        g_length += w(i, j) * h.additive_variance * (5.0 / 3.0) * (1.0 + s) * std::exp(-s) * r * r;
      }
    }
    (*gradient)(d + 2) = 0.5 * g_length;
    (*gradient)(d + 3) = 0.5 * g_variance;
  }
  return value;
}

void GaussianProcess::factorise() {
  x_scaled_ = scale_columns(x_, hyper_.length_scales);
  Eigen::MatrixXd k = kernel(x_scaled_, x_scaled_, hyper_.signal_variance);
  add_additive_and_group_covariance(k, x_, hyper_);
  double jitter = 0;
  for (int attempt = 0; attempt < 8; ++attempt) {
    Eigen::MatrixXd kn = k;
    kn.diagonal().array() += hyper_.noise_variance + jitter;
    chol_.compute(kn);
    if (chol_.info() == Eigen::Success) {
      hyper_.noise_variance += jitter;
      alpha_ = chol_.solve(y_);
      return;
    }
    jitter = jitter == 0 ? 1e-8 * (hyper_.signal_variance + hyper_.additive_variance + group_variance_) : jitter * 10;
  }
  throw InternalError("GP kernel matrix is not positive definite even with jitter");
}

GaussianProcess GaussianProcess::fit(const Eigen::MatrixXd& x, const Eigen::VectorXd& y, const GpFitOptions& given) {
  GaussianProcess gp(x, y, given.additive_feature, given.group_features);
  KAREUS_CHECK(std::isfinite(given.noise_floor) && given.noise_floor >= 0, "a GP noise floor must be finite and >= 0");
  KAREUS_CHECK(std::isfinite(given.group_variance) && given.group_variance >= 0,
               "a GP group variance must be finite and >= 0");
  if (!given.group_features.empty()) gp.group_variance_ = given.group_variance / (gp.y_scale_ * gp.y_scale_);
  GpFitOptions options = given;
  if (given.noise_floor > 0) {
    // The floor in the standardised target's units, where the bounds live.
    options.min_noise_variance = std::clamp(given.noise_floor / (gp.y_scale_ * gp.y_scale_), given.min_noise_variance,
                                            given.max_noise_variance);
  }
  const Eigen::Index d = x.cols();
  const bool additive = options.additive_feature.has_value();
  std::vector<GpHyperparameters> starts;
  if (options.warm_start && options.warm_start->length_scales.size() == d) {
    starts.push_back(clamped(*options.warm_start, options));
  }
  GpHyperparameters defaults = default_hyperparameters(d);
  if (additive) {
    // Start with the variance split evenly between the shared and the joint parts.
    defaults.signal_variance = defaults.additive_variance = 0.5;
  }
  if (!options.optimise) {
    gp.hyper_ = starts.empty() ? clamped(defaults, options) : starts.front();
    gp.factorise();
    return gp;
  }
  starts.push_back(defaults);
  if (!options.warm_start) {
    for (double scale : {0.15, 2.0}) {
      GpHyperparameters h = defaults;
      h.length_scales.setConstant(scale);
      starts.push_back(h);
    }
  }

  const auto params = static_cast<std::size_t>(d + 2 + (additive ? 2 : 0));
  std::vector<double> lower(params), upper(params);
  for (std::size_t i = 0; i < static_cast<std::size_t>(d); ++i) {
    lower[i] = std::log(options.min_length_scale);
    upper[i] = std::log(options.max_length_scale);
  }
  lower[static_cast<std::size_t>(d)] = std::log(1e-3);
  upper[static_cast<std::size_t>(d)] = std::log(1e3);
  lower[static_cast<std::size_t>(d + 1)] = std::log(options.min_noise_variance);
  upper[static_cast<std::size_t>(d + 1)] = std::log(options.max_noise_variance);
  if (additive) {
    lower[static_cast<std::size_t>(d + 2)] = std::log(options.min_length_scale);
    upper[static_cast<std::size_t>(d + 2)] = std::log(options.max_length_scale);
    lower[static_cast<std::size_t>(d + 3)] = std::log(1e-3);
    upper[static_cast<std::size_t>(d + 3)] = std::log(1e3);
  }

  Objective best{&gp, additive, -std::numeric_limits<double>::infinity(), {}};
  for (const GpHyperparameters& start : starts) {
    Objective run{&gp, additive, -std::numeric_limits<double>::infinity(), {}};
    nlopt::opt opt(nlopt::LD_LBFGS, static_cast<unsigned>(params));
    opt.set_lower_bounds(lower);
    opt.set_upper_bounds(upper);
    opt.set_max_objective(objective, &run);
    opt.set_maxeval(options.max_evaluations);
    opt.set_ftol_rel(1e-7);
    std::vector<double> p = to_log_params(clamped(start, options), additive);
    double value = 0;
    try {
      opt.optimize(p, value);
    } catch (const std::exception&) {
      // Round-off limits and the like: keep the best point the objective saw.
    }
    if (run.best > best.best) {
      best.best = run.best;
      best.best_params = run.best_params;
    }
  }
  gp.hyper_ = best.best_params.empty() ? clamped(defaults, options) : from_log_params(best.best_params, additive);
  gp.factorise();
  return gp;
}

GpPrediction GaussianProcess::predict(const Eigen::MatrixXd& points) const {
  KAREUS_CHECK(points.cols() == x_.cols(), "GP prediction points have the wrong number of features");
  GpPrediction p;
  p.points_ = scale_columns(points, hyper_.length_scales);
  Eigen::MatrixXd ks = kernel(x_scaled_, p.points_, hyper_.signal_variance);
  add_additive_and_group_covariance(ks, points, hyper_);
  p.mean_ = (ks.transpose() * alpha_).array() * y_scale_ + y_mean_;
  p.v_ = chol_.matrixL().solve(ks);
  const double scale2 = y_scale_ * y_scale_;
  p.variance_ = ((hyper_.signal_variance + hyper_.additive_variance + group_variance_ -
                  p.v_.colwise().squaredNorm().array()).max(0.0) * scale2).matrix();
  p.signal_variance_ = hyper_.signal_variance * scale2;
  if (additive_feature_) {
    p.additive_ = points.col(*additive_feature_) / hyper_.additive_length_scale;
    p.additive_variance_ = hyper_.additive_variance * scale2;
  }
  if (group_variance_ > 0) {
    p.groups_.resize(points.rows(), static_cast<Eigen::Index>(group_features_.size()));
    for (std::size_t c = 0; c < group_features_.size(); ++c) {
      p.groups_.col(static_cast<Eigen::Index>(c)) = points.col(group_features_[c]);
    }
    p.group_variance_ = group_variance_ * scale2;
  }
  p.noise_variance_ = hyper_.noise_variance * scale2;
  // covariance_with() works in the target's units: fold the scale into v.
  p.v_ *= y_scale_;
  return p;
}

}  // namespace kareus::search
