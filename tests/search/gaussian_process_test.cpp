// The GP surrogate: interpolation and shrinking variance at training points, maximum likelihood
// improving on its start, the analytic likelihood gradient against finite differences, and the
// additive term carrying a configuration's offset across clocks, the group term against its
// definition.
#include "kareus/search/gaussian_process.hpp"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <array>
#include <cmath>
#include <vector>

#include "kareus/core/error.hpp"
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

// Random ARD hyperparameters for three features, away from the bounds.
GpHyperparameters random_hyperparameters(Rng& rng) {
  GpHyperparameters h;
  h.length_scales = Eigen::Vector3d(0.2 + rng.uniform(), 0.2 + rng.uniform(), 0.2 + 2 * rng.uniform());
  h.signal_variance = 0.5 + rng.uniform();
  h.noise_variance = 1e-3 + 0.1 * rng.uniform();
  return h;
}

// The first `count` entries of the analytic gradient at h (log length scales, log signal variance,
// log noise variance, then the additive term's log length scale and log variance) against central
// differences in log space.
void check_gradient(const GaussianProcess& gp, const GpHyperparameters& h, const Eigen::VectorXd& grad, int count) {
  const double eps = 1e-5;
  for (int k = 0; k < count; ++k) {
    GpHyperparameters lo = h, hi = h;
    auto bump = [&](GpHyperparameters& g, double factor) {
      if (k < 3) g.length_scales(k) *= factor;
      if (k == 3) g.signal_variance *= factor;
      if (k == 4) g.noise_variance *= factor;
      if (k == 5) g.additive_length_scale *= factor;
      if (k == 6) g.additive_variance *= factor;
    };
    bump(hi, std::exp(eps));
    bump(lo, std::exp(-eps));
    double numeric = (gp.log_marginal_likelihood(hi) - gp.log_marginal_likelihood(lo)) / (2 * eps);
    RC_ASSERT(std::abs(numeric - grad(k)) <= 1e-4 * std::max(1.0, std::abs(numeric)));
  }
}

RC_GTEST_PROP(GaussianProcess, LikelihoodGradientMatchesFiniteDifferences, ()) {
  const auto seed = *rc::gen::inRange<std::uint64_t>(0, 1'000'000);
  Rng rng(seed);
  Data d = sample(12, seed);
  GaussianProcess gp = GaussianProcess::fit(d.x, d.y);
  GpHyperparameters h = random_hyperparameters(rng);
  Eigen::VectorXd grad;
  gp.log_marginal_likelihood(h, &grad);
  check_gradient(gp, h, grad, 5);
}

RC_GTEST_PROP(GaussianProcess, LikelihoodGradientWithAnAdditiveTermMatchesFiniteDifferences, ()) {
  const auto seed = *rc::gen::inRange<std::uint64_t>(0, 1'000'000);
  Rng rng(seed);
  Data d = sample(12, seed);
  GpFitOptions o;
  o.additive_feature = 0;
  o.optimise = false;
  GaussianProcess gp = GaussianProcess::fit(d.x, d.y, o);
  GpHyperparameters h = random_hyperparameters(rng);
  h.additive_length_scale = 0.1 + rng.uniform();
  h.additive_variance = 0.2 + rng.uniform();
  Eigen::VectorXd grad;
  gp.log_marginal_likelihood(h, &grad);
  RC_ASSERT(grad.size() == 7);
  check_gradient(gp, h, grad, 7);
}

// Knobs of the search in miniature: a clock curve every configuration shares plus a per-
// configuration offset. Configurations 0 and 1 are measured at every clock, configuration 2 at
// one clock only; the additive clock term carries its offset to the other clocks.
TEST(GaussianProcess, AnAdditiveClockTermCarriesAConfigurationAcrossClocks) {
  auto curve = [](double clock) { return 3 * std::exp(-2 * clock) + std::sin(5 * clock); };
  const std::array<double, 3> offset{0.0, 0.4, -0.6};
  std::vector<Eigen::RowVectorXd> rows;
  std::vector<double> ys;
  auto add = [&](double clock, int config) {
    Eigen::RowVectorXd r = Eigen::RowVectorXd::Zero(4);
    r(0) = clock;
    r(1 + config) = 1.0;  // one-hot configuration
    rows.push_back(r);
    ys.push_back(curve(clock) + offset[static_cast<std::size_t>(config)]);
  };
  for (int i = 0; i <= 12; ++i) add(i / 12.0, 0), add(i / 12.0, 1);
  add(0.5, 2);
  Eigen::MatrixXd x(static_cast<Eigen::Index>(rows.size()), 4);
  for (std::size_t i = 0; i < rows.size(); ++i) x.row(static_cast<Eigen::Index>(i)) = rows[i];
  Eigen::VectorXd y = Eigen::Map<Eigen::VectorXd>(ys.data(), static_cast<Eigen::Index>(ys.size()));

  Eigen::MatrixXd probe(4, 4);
  probe << 0.0, 0, 0, 1, 0.25, 0, 0, 1, 0.75, 0, 0, 1, 1.0, 0, 0, 1;
  auto error = [&](const GpFitOptions& o) {
    GpPrediction p = GaussianProcess::fit(x, y, o).predict(probe);
    double worst = 0;
    for (Eigen::Index i = 0; i < probe.rows(); ++i) worst = std::max(worst, std::abs(p.mean(i) - (curve(probe(i, 0)) + offset[2])));
    return worst;
  };
  GpFitOptions additive;
  additive.additive_feature = 0;
  const double with = error(additive), without = error({});
  EXPECT_LT(with, 0.1);
  EXPECT_LT(with, 0.5 * without);
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

// A known measurement noise bounds the fitted noise from below, in the target's units, whatever
// the targets' scale; exact data alone would fit almost none. The floor is what keeps the posterior
// mean from interpolating a noisy measurement.
RC_GTEST_PROP(GaussianProcess, AKnownNoiseFloorsTheFittedNoise, ()) {
  const double scale = std::pow(10.0, *rc::gen::inRange(-3, 4));
  const double sigma = 0.002 * *rc::gen::inRange(1, 50);
  Data d = sample(20, *rc::gen::inRange<std::uint64_t>(1, 1000));
  d.y *= scale;
  GpFitOptions o;
  o.noise_floor = std::pow(sigma * scale, 2);
  const GaussianProcess exact = GaussianProcess::fit(d.x, d.y);
  const GaussianProcess noisy = GaussianProcess::fit(d.x, d.y, o);
  const GpPrediction at_exact = exact.predict(d.x), at_noisy = noisy.predict(d.x);
  RC_ASSERT(at_noisy.noise_variance(0) >= o.noise_floor * (1 - 1e-9));
  RC_ASSERT(at_exact.noise_variance(0) < o.noise_floor);
  // Smoothing: the noisy model's mean no longer passes through every measurement.
  RC_ASSERT((at_noisy.mean() - d.y).norm() > (at_exact.mean() - d.y).norm());
}

// The group term against its definition, written out here: with fixed hyperparameters the
// posterior is the Gaussian conditioned on the data under k(a, b) = s²σ²·M(‖a − b‖/ℓ) + g·[a and b
// share a group] + s²σ_n²·[a = b], s the targets' spread (the model standardises them). A point of
// a group with no data keeps at least the group's variance, whatever its neighbours say.
RC_GTEST_PROP(GaussianProcess, AGroupTermIsTheKernelItDefines, ()) {
  const auto seed = *rc::gen::inRange<std::uint64_t>(0, 1'000'000);
  Rng rng(seed);
  auto draw = [&](int n) {
    Eigen::MatrixXd x(n, 3);
    for (int i = 0; i < n; ++i) x.row(i) << rng.uniform(), 0.5 * static_cast<double>(rng.below(3)), static_cast<double>(rng.below(2));
    return x;
  };
  const Eigen::MatrixXd x = draw(14), points = draw(6);
  Eigen::VectorXd y(x.rows());
  for (Eigen::Index i = 0; i < x.rows(); ++i) y(i) = 10 + 2 * truth(x.row(i)) + (x(i, 1) == 0.5 ? 0.7 : 0.0);
  GpFitOptions o;
  o.optimise = false;
  o.group_features = {1, 2};
  const double spread2 = (y.array() - y.mean()).square().mean();
  o.group_variance = (0.05 + rng.uniform()) * spread2;
  const GaussianProcess gp = GaussianProcess::fit(x, y, o);
  const GpHyperparameters& h = gp.hyperparameters();
  auto k = [&](const Eigen::MatrixXd& a, const Eigen::MatrixXd& b) {
    Eigen::MatrixXd out(a.rows(), b.rows());
    for (Eigen::Index i = 0; i < a.rows(); ++i) {
      for (Eigen::Index j = 0; j < b.rows(); ++j) {
        const double r = ((a.row(i) - b.row(j)).array() / h.length_scales.transpose().array()).matrix().norm();
        const bool same = a(i, 1) == b(j, 1) && a(i, 2) == b(j, 2);
        out(i, j) = spread2 * h.signal_variance * matern52(r) + (same ? o.group_variance : 0.0);
      }
    }
    return out;
  };
  Eigen::MatrixXd kn = k(x, x);
  kn.diagonal().array() += spread2 * h.noise_variance;
  const Eigen::LLT<Eigen::MatrixXd> llt(kn);
  const Eigen::MatrixXd cross = k(x, points);
  const Eigen::VectorXd mean = y.mean() + (cross.transpose() * llt.solve((y.array() - y.mean()).matrix())).array();
  const Eigen::MatrixXd cov = k(points, points) - cross.transpose() * llt.solve(cross);

  const GpPrediction p = gp.predict(points);
  const double tol = 1e-6 * spread2;
  for (Eigen::Index j = 0; j < points.rows(); ++j) {
    RC_ASSERT(std::abs(p.mean(j) - mean(j)) <= 1e-6 * std::sqrt(spread2));
    RC_ASSERT(std::abs(p.variance(j) - cov(j, j)) <= tol);
    const Eigen::VectorXd c = p.covariance_with(j);
    for (Eigen::Index i = 0; i < points.rows(); ++i) RC_ASSERT(std::abs(c(i) - cov(i, j)) <= tol);
    bool group_seen = false;
    for (Eigen::Index i = 0; i < x.rows(); ++i) group_seen |= x(i, 1) == points(j, 1) && x(i, 2) == points(j, 2);
    if (!group_seen) RC_ASSERT(p.variance(j) >= o.group_variance * (1 - 1e-9));
  }
}

TEST(GaussianProcess, ANegativeNoiseFloorIsAnInternalError) {
  Data d = sample(5, 3);
  GpFitOptions o;
  o.noise_floor = -1;
  EXPECT_THROW(GaussianProcess::fit(d.x, d.y, o), InternalError);
}

}  // namespace
}  // namespace kareus::search
