// A Gaussian-process regressor with an ARD Matérn-5/2 kernel, the surrogate of the multi-objective
// search: one GP for time, one for effective energy. Hyperparameters (one length scale per feature,
// the signal variance and the noise variance) are fitted by maximum marginal likelihood with NLopt
// (L-BFGS on the analytic gradient, a few deterministic starts). Targets are standardised inside.
//
// Features should be scaled to about [0, 1] (the length-scale bounds assume it): the search uses
// normalised clock, normalised SM count and a one-hot launch slot.
//
// Thread-safety: a fitted GaussianProcess is immutable; predict() may run on several threads.
// Example:
//   GaussianProcess gp = GaussianProcess::fit(x, y);          // x: n × d, y: n
//   GpPrediction p = gp.predict(candidates);                   // p.mean(i), p.variance(i)
//   double sd = std::sqrt(p.variance(0));
#pragma once

#include <Eigen/Dense>
#include <optional>
#include <vector>

namespace kareus::search {

// Hyperparameters on their natural scale, for standardised targets.
struct GpHyperparameters {
  Eigen::VectorXd length_scales;  // one per feature
  double signal_variance = 1.0;
  double noise_variance = 1e-4;
  // The additive term (see GpFitOptions::additive_feature); its variance is 0 when there is none.
  double additive_length_scale = 0.5;
  double additive_variance = 0.0;
};

struct GpFitOptions {
  // Hyperparameters to start from besides the defaults (e.g. the previous batch's fit).
  std::optional<GpHyperparameters> warm_start;
  bool optimise = true;            // false: use the warm start (or defaults) as given
  int max_evaluations = 150;       // per start
  double min_length_scale = 0.03;  // features are ~[0, 1]
  double max_length_scale = 30.0;
  double min_noise_variance = 1e-8;  // of the standardised target
  double max_noise_variance = 0.5;
  // A known measurement noise variance, in the target's units²: the fitted noise does not go below
  // it (0: the data alone decide, down to min_noise_variance).
  double noise_floor = 0;
  // Adds to the ARD kernel a Matérn-5/2 term over this feature alone: the target becomes a shared
  // effect of that feature plus the joint ARD part, g(x_k) + h(x). The search uses it for the
  // clock, whose effect every knob shares, so that one measurement of a configuration (SMs, slot)
  // at one clock informs that configuration at the other clocks.
  std::optional<Eigen::Index> additive_feature;
  // Adds a term shared only by points equal on these features, a group (the search's: one
  // configuration, SMs and slot, at all its clocks), of this fixed prior variance in the target's
  // units²: each group may stand off the smooth model by an offset of its own, which only its own
  // points tell and its neighbours' do not explain away. No features or variance 0: none.
  std::vector<Eigen::Index> group_features;
  double group_variance = 0;
};

// Predictive mean and variance (of the latent function, in the target's units) at some points,
// plus what is needed for their posterior covariances (used to plan a batch: the variance a
// pending measurement will remove does not depend on its outcome).
class GpPrediction {
 public:
  const Eigen::VectorXd& mean() const { return mean_; }
  const Eigen::VectorXd& variance() const { return variance_; }
  double mean(Eigen::Index i) const { return mean_(i); }
  double variance(Eigen::Index i) const { return variance_(i); }
  // Posterior covariance between every predicted point and point j, in the target's units².
  Eigen::VectorXd covariance_with(Eigen::Index j) const;
  // Noise variance of a new measurement at point j, in the target's units².
  double noise_variance(Eigen::Index j) const;

  // For a GP fitted to log(y): the prediction of y by the delta method, mean exp(μ) (the median)
  // and standard deviation exp(μ)·σ, covariances scaled alike.
  GpPrediction exponentiated() const;

 private:
  friend class GaussianProcess;
  Eigen::VectorXd mean_;
  Eigen::VectorXd variance_;
  Eigen::MatrixXd points_;  // the predicted points (rows), scaled by the length scales
  Eigen::MatrixXd v_;       // L⁻¹ K(train, points)
  double signal_variance_ = 1;  // in the target's units²
  Eigen::VectorXd additive_;     // the additive feature of the predicted points over its length scale (empty = none)
  double additive_variance_ = 0;  // in the target's units²
  Eigen::MatrixXd groups_;        // the group features of the predicted points (no columns: no group term)
  double group_variance_ = 0;     // in the target's units²
  double noise_variance_ = 0;
  Eigen::VectorXd scale_;  // per-point factor on covariances (empty = 1), see exponentiated()
};

class GaussianProcess {
 public:
  // Fits to rows of `x` (n × d, n ≥ 1) and targets `y` (finite). Throws InternalError on a shape
  // mismatch or non-finite data.
  static GaussianProcess fit(const Eigen::MatrixXd& x, const Eigen::VectorXd& y,
                             const GpFitOptions& options = {});

  GpPrediction predict(const Eigen::MatrixXd& points) const;

  const GpHyperparameters& hyperparameters() const { return hyper_; }
  // Log marginal likelihood of the standardised training targets under `h` (and its gradient
  // with respect to log length scales, log signal variance, log noise variance when asked).
  double log_marginal_likelihood(const GpHyperparameters& h, Eigen::VectorXd* gradient = nullptr) const;
  // The fitted model's log marginal likelihood.
  double log_marginal_likelihood() const { return log_marginal_likelihood(hyper_); }
  // The hyperparameters fit() starts from when there is no warm start.
  static GpHyperparameters default_hyperparameters(Eigen::Index features);

 private:
  GaussianProcess(Eigen::MatrixXd x, Eigen::VectorXd y, std::optional<Eigen::Index> additive_feature,
                  std::vector<Eigen::Index> group_features);
  // Adds to k the additive and the group terms' prior covariances under h between rows of x_ and
  // of `points` (nothing without them); k already holds the ARD part.
  void add_additive_and_group_covariance(Eigen::MatrixXd& k, const Eigen::MatrixXd& points, const GpHyperparameters& h) const;
  void factorise();

  Eigen::MatrixXd x_;
  Eigen::VectorXd y_;  // standardised
  double y_mean_ = 0;
  double y_scale_ = 1;
  GpHyperparameters hyper_;
  std::optional<Eigen::Index> additive_feature_;
  std::vector<Eigen::Index> group_features_;
  double group_variance_ = 0;  // of the standardised target; fixed, not fitted
  Eigen::MatrixXd x_scaled_;  // x_ with each column divided by its length scale
  Eigen::LLT<Eigen::MatrixXd> chol_;
  Eigen::VectorXd alpha_;  // K⁻¹ y
};

// Matérn-5/2 correlation at scaled distance r: (1 + √5 r + 5r²/3) exp(−√5 r).
double matern52(double r);

}  // namespace kareus::search
