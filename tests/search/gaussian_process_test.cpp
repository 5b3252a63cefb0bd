// The GP surrogate: interpolation and shrinking variance at training points, maximum likelihood
// improving on its start, and the analytic likelihood gradient against finite differences.
#include "kareus/search/gaussian_process.hpp"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <cmath>

#include "kareus/search/random.hpp"

namespace kareus::search {
namespace {

double truth(const Eigen::RowVectorXd& x) { return std::sin(3 * x(0)) + 0.5 * x(1) * x(1) + 0.3 * x(2); }

struct Data {
  Eigen::MatrixXd x;
  Eigen::VectorXd y;
};

Data sample(int n, std::uint64_t seed) {
  Rng rng(seed);
  Data d{Eigen::MatrixXd(n, 3), Eigen::VectorXd(n)};
  for (int i = 0; i < n; ++i) {
    d.x(i, 0) = rng.uniform();
    d.x(i, 1) = rng.uniform();
    d.x(i, 2) = rng.below(2) == 0 ? 0.0 : 1.0;  // a one-hot-like feature
    d.y(i) = 10 + 2 * truth(d.x.row(i));
  }
  return d;
}

TEST(GaussianProcess, InterpolatesTrainingPointsAndItsVarianceShrinksThere) {
  Data d = sample(30, 11);
  GaussianProcess gp = GaussianProcess::fit(d.x, d.y);
  GpPrediction at_train = gp.predict(d.x);
  Eigen::MatrixXd far = Eigen::MatrixXd::Constant(1, 3, 3.0);  // well outside the data
  GpPrediction away = gp.predict(far);
  const double y_var = (d.y.array() - d.y.mean()).square().mean();
  for (Eigen::Index i = 0; i < d.x.rows(); ++i) {
    EXPECT_NEAR(at_train.mean(i), d.y(i), 0.02 * std::sqrt(y_var)) << "point " << i;
    EXPECT_LT(at_train.variance(i), 0.01 * y_var) << "point " << i;
    EXPECT_LT(at_train.variance(i), 0.05 * away.variance(0));
  }
}

TEST(GaussianProcess, PredictsHeldOutPoints) {
  Data train = sample(60, 3), test = sample(40, 4);
  GaussianProcess gp = GaussianProcess::fit(train.x, train.y);
  GpPrediction p = gp.predict(test.x);
  double err = (p.mean() - test.y).array().square().mean();
  double var = (test.y.array() - test.y.mean()).square().mean();
  EXPECT_LT(err, 0.05 * var);
}

TEST(GaussianProcess, MaximumLikelihoodImprovesOnItsStart) {
  Data d = sample(40, 5);
  GpFitOptions fixed;
  fixed.optimise = false;
  GaussianProcess start = GaussianProcess::fit(d.x, d.y, fixed);
  GaussianProcess fitted = GaussianProcess::fit(d.x, d.y);
  EXPECT_GT(fitted.log_marginal_likelihood(), start.log_marginal_likelihood() + 1.0);
  EXPECT_GE(fitted.log_marginal_likelihood(), fitted.log_marginal_likelihood(GaussianProcess::default_hyperparameters(3)));
}

RC_GTEST_PROP(GaussianProcess, LikelihoodGradientMatchesFiniteDifferences, ()) {
  const auto seed = *rc::gen::inRange<std::uint64_t>(0, 1'000'000);
  Rng rng(seed);
  Data d = sample(12, seed);
  GaussianProcess gp = GaussianProcess::fit(d.x, d.y);
  GpHyperparameters h;
  h.length_scales = Eigen::Vector3d(0.2 + rng.uniform(), 0.2 + rng.uniform(), 0.2 + 2 * rng.uniform());
  h.signal_variance = 0.5 + rng.uniform();
  h.noise_variance = 1e-3 + 0.1 * rng.uniform();
  Eigen::VectorXd grad;
  gp.log_marginal_likelihood(h, &grad);
  const double eps = 1e-5;
  for (int k = 0; k < 5; ++k) {
    GpHyperparameters lo = h, hi = h;
    auto bump = [&](GpHyperparameters& g, double factor) {
      if (k < 3) g.length_scales(k) *= factor;
      if (k == 3) g.signal_variance *= factor;
      if (k == 4) g.noise_variance *= factor;
    };
    bump(hi, std::exp(eps));
    bump(lo, std::exp(-eps));
    double numeric = (gp.log_marginal_likelihood(hi) - gp.log_marginal_likelihood(lo)) / (2 * eps);
    RC_ASSERT(std::abs(numeric - grad(k)) <= 1e-4 * std::max(1.0, std::abs(numeric)));
  }
}

TEST(GaussianProcess, CovarianceWithAPointIsItsVarianceThere) {
  Data d = sample(20, 8);
  GaussianProcess gp = GaussianProcess::fit(d.x, d.y);
  Data q = sample(15, 9);
  GpPrediction p = gp.predict(q.x);
  for (Eigen::Index j = 0; j < 15; ++j) {
    Eigen::VectorXd c = p.covariance_with(j);
    EXPECT_NEAR(c(j), p.variance(j), 1e-9 * (1 + p.variance(j)));
    for (Eigen::Index i = 0; i < 15; ++i) {
      EXPECT_LE(c(i) * c(i), p.variance(i) * p.variance(j) * (1 + 1e-6) + 1e-12);  // Cauchy–Schwarz
    }
  }
}

TEST(GaussianProcess, SameDataSameFit) {
  Data d = sample(25, 21);
  GaussianProcess a = GaussianProcess::fit(d.x, d.y), b = GaussianProcess::fit(d.x, d.y);
  EXPECT_EQ(a.hyperparameters().length_scales, b.hyperparameters().length_scales);
  EXPECT_EQ(a.predict(d.x).mean(), b.predict(d.x).mean());
}

}  // namespace
}  // namespace kareus::search
