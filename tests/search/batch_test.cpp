// Batch filling: the hypervolume improvement against a brute-force reference, the passes' shares,
// exclusion of earlier picks, back-filling, and determinism.
#include "kareus/search/batch.hpp"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <cmath>
#include <map>
#include <numbers>
#include <numeric>
#include <set>

#include "kareus/search/random.hpp"

namespace kareus::search {
namespace {

rc::Gen<TimeEnergy> grid_point() {
  return rc::gen::map(rc::gen::pair(rc::gen::inRange(1, 30), rc::gen::inRange(1, 30)), [](const std::pair<int, int>& p) {
    return TimeEnergy{static_cast<double>(p.first), static_cast<double>(p.second)};
  });
}

RC_GTEST_PROP(Batch, HypervolumeImprovementIsTheHypervolumeAdded, ()) {
  auto front = *rc::gen::container<std::vector<TimeEnergy>>(grid_point());
  TimeEnergy q = *grid_point();
  TimeEnergy ref{25, 25};
  std::vector<TimeEnergy> with = front;
  with.push_back(q);
  double expected = hypervolume_2d(with, ref) - hypervolume_2d(front, ref);
  RC_ASSERT(std::abs(hypervolume_improvement(front, q, ref) - expected) < 1e-9);
}

TEST(Batch, ReferencePointPushesTheNadirOut) {
  std::vector<TimeEnergy> pts{{1, 10}, {2, 6}, {4, 5}, {5, 9}};
  TimeEnergy r = reference_point(pts, 0.1);
  EXPECT_DOUBLE_EQ(r.time_s, 4 + 0.3);
  EXPECT_DOUBLE_EQ(r.energy_j, 10 + 0.5);
  TimeEnergy single = reference_point(std::vector<TimeEnergy>{{2, 4}}, 0.5);
  EXPECT_DOUBLE_EQ(single.time_s, 3);
  EXPECT_DOUBLE_EQ(single.energy_j, 6);
}

TEST(Batch, PassCountsFollowTheSharesAndSumToTheBatch) {
  using C = std::array<std::size_t, 4>;
  EXPECT_EQ(pass_counts(1, {}), (C{1, 0, 0, 0}));
  EXPECT_EQ(pass_counts(2, {}), (C{1, 1, 0, 0}));
  EXPECT_EQ(pass_counts(5, {}), (C{2, 1, 1, 1}));
  EXPECT_EQ(pass_counts(10, {}), (C{4, 2, 2, 2}));
  EXPECT_EQ(pass_counts(16, {}), (C{7, 3, 3, 3}));
  EXPECT_EQ(pass_counts(32, {}), (C{13, 7, 6, 6}));
  for (std::size_t b = 0; b < 100; ++b) {
    C c = pass_counts(b, {});
    EXPECT_EQ(c[0] + c[1] + c[2] + c[3], b);
    EXPECT_LE(std::abs(static_cast<double>(c[0]) - 0.4 * static_cast<double>(b)), 1.0);
  }
}

BatchOptions batch_options(std::size_t batch_size, double static_power_w = 0, double optimism = 1.0) {
  BatchOptions o;
  o.batch_size = batch_size;
  o.static_power_w = static_power_w;
  o.optimism = optimism;
  return o;
}

// Predictions for a 1-D family of candidates with a time–energy trade-off, from a GP fitted to a
// few of them: enough structure for every pass to have something to pick.
struct Scenario {
  std::vector<Observed> observed;
  GpPrediction time, energy;
  std::size_t candidates = 0;
};

Scenario scenario(std::uint64_t seed, std::size_t n = 80) {
  Rng rng(seed);
  auto f_time = [](double x, double y) { return 1.0 / (0.3 + x) + 0.2 * y; };
  auto f_energy = [](double x, double y) { return 2.0 + 3.0 * x * x + 0.5 * (1 - y); };
  Eigen::MatrixXd train(12, 2);
  Eigen::VectorXd yt(12), ye(12);
  Scenario s;
  for (Eigen::Index i = 0; i < 12; ++i) {
    train(i, 0) = rng.uniform();
    train(i, 1) = rng.uniform();
    yt(i) = f_time(train(i, 0), train(i, 1));
    ye(i) = f_energy(train(i, 0), train(i, 1));
    s.observed.push_back({yt(i), ye(i)});
  }
  Eigen::MatrixXd cand(static_cast<Eigen::Index>(n), 2);
  for (Eigen::Index i = 0; i < cand.rows(); ++i) cand(i, 0) = rng.uniform(), cand(i, 1) = rng.uniform();
  s.time = GaussianProcess::fit(train, yt).predict(cand);
  s.energy = GaussianProcess::fit(train, ye).predict(cand);
  s.candidates = n;
  return s;
}

TEST(Batch, PassesRespectTheirSharesAndExcludeEarlierPicks) {
  for (std::uint64_t seed = 1; seed <= 5; ++seed) {
    Scenario s = scenario(seed);
    BatchOptions o = batch_options(10, 0.5);
    BatchPlan plan = plan_batch(s.observed, s.time, s.energy, o);
    ASSERT_EQ(plan.picks.size(), 10u) << "seed " << seed;
    std::set<std::size_t> distinct;
    std::map<PickPass, std::size_t> per_pass;
    for (const BatchPick& p : plan.picks) {
      distinct.insert(p.candidate);
      ++per_pass[p.pass];
    }
    EXPECT_EQ(distinct.size(), 10u) << "seed " << seed;
    // Short improvement passes hand their places to the back-fill; the others are exact.
    EXPECT_EQ(per_pass[PickPass::kHvReal] + per_pass[PickPass::kHvEffective] + per_pass[PickPass::kBackfill], 6u);
    EXPECT_LE(per_pass[PickPass::kHvReal], 4u);
    EXPECT_LE(per_pass[PickPass::kHvEffective], 2u);
    EXPECT_EQ(per_pass[PickPass::kFastest], 2u);
    EXPECT_EQ(per_pass[PickPass::kUncertain], 2u);
    EXPECT_GT(per_pass[PickPass::kHvReal], 0u);
    // Passes come in order.
    for (std::size_t k = 1; k < plan.picks.size(); ++k) {
      auto rank = [](PickPass p) {
        switch (p) {
          case PickPass::kHvReal: return 0;
          case PickPass::kHvEffective: return 1;
          case PickPass::kFastest: return 2;
          case PickPass::kUncertain: return 3;
          default: return 4;
        }
      };
      EXPECT_LE(rank(plan.picks[k - 1].pass), rank(plan.picks[k].pass));
    }
    EXPECT_GT(plan.predicted_improvement, 0);
  }
}

// E[max(0, t0 − T)] for T ~ N(mean, sd²), by Simpson's rule over ±10 sds: a reference for the
// fastest pass's closed form.
double expected_speedup(double t0, double mean, double sd) {
  const int n = 4000;
  const double lo = mean - 10 * sd, h = 20 * sd / n;
  double sum = 0;
  for (int k = 0; k <= n; ++k) {
    const double t = lo + k * h, z = (t - mean) / sd;
    const double f = std::max(0.0, t0 - t) * std::exp(-0.5 * z * z) / (sd * std::sqrt(2 * std::numbers::pi));
    sum += f * (k == 0 || k == n ? 1 : k % 2 ? 4 : 2);
  }
  return sum * h / 3;
}

TEST(Batch, TheFastestPassTakesTheLargestExpectedGainOnTheFastestTime) {
  for (std::uint64_t seed = 1; seed <= 30; ++seed) {
    Scenario s = scenario(seed);
    BatchOptions o = batch_options(1, 0.5);
    o.shares = {0, 0, 1.0};
    BatchPlan plan = plan_batch(s.observed, s.time, s.energy, o);
    ASSERT_EQ(plan.picks.size(), 1u);
    ASSERT_EQ(plan.picks[0].pass, PickPass::kFastest);
    double t0 = s.observed.front().time_s;
    for (const Observed& ob : s.observed) t0 = std::min(t0, ob.time_s);
    std::vector<double> gain(s.candidates);
    for (std::size_t i = 0; i < s.candidates; ++i) {
      const auto r = static_cast<Eigen::Index>(i);
      gain[i] = expected_speedup(t0, s.time.mean(r), std::sqrt(s.time.variance(r)));
    }
    const std::size_t best = static_cast<std::size_t>(std::max_element(gain.begin(), gain.end()) - gain.begin());
    EXPECT_NEAR(gain[plan.picks[0].candidate], gain[best], 1e-9 * std::abs(gain[best])) << "seed " << seed;
  }
}

// A collective at its bandwidth limit gives many knobs the same time: the model predicts them all
// at the fastest time measured, with little doubt. Picking the lowest mean would measure that time
// again; the pass takes the knob that may actually be faster.
TEST(Batch, AFloorOfEqualTimesDoesNotCaptureTheFastestPass) {
  Eigen::MatrixXd train(7, 1);
  train << 0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 1.0;
  Eigen::VectorXd yt(7), ye(7);
  yt << 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.2;
  ye << 2.0, 2.1, 2.2, 2.3, 2.4, 2.5, 2.0;
  Eigen::MatrixXd cand(5, 1);
  cand << 0.05, 0.15, 0.25, 0.35, 0.75;
  // Short length scales: the model knows the floor and little about the gap before x = 1.
  GpFitOptions fixed;
  fixed.optimise = false;
  fixed.warm_start = GaussianProcess::default_hyperparameters(1);
  fixed.warm_start->length_scales(0) = 0.1;
  GpPrediction t = GaussianProcess::fit(train, yt, fixed).predict(cand);
  GpPrediction e = GaussianProcess::fit(train, ye, fixed).predict(cand);
  std::vector<Observed> obs;
  for (Eigen::Index i = 0; i < yt.size(); ++i) obs.push_back({yt(i), ye(i)});
  Eigen::Index lowest_mean = 0;
  t.mean().minCoeff(&lowest_mean);
  ASSERT_LT(lowest_mean, 4) << "the scenario needs the floor to hold the lowest mean";
  BatchOptions o = batch_options(1);
  o.shares = {0, 0, 1.0};
  BatchPlan plan = plan_batch(obs, t, e, o);
  ASSERT_EQ(plan.picks.size(), 1u);
  EXPECT_EQ(plan.picks[0].candidate, 4u);
}

TEST(Batch, DeterministicForTheSameInputs) {
  Scenario a = scenario(3), b = scenario(3);
  BatchOptions o = batch_options(12, 1.0);
  BatchPlan pa = plan_batch(a.observed, a.time, a.energy, o), pb = plan_batch(b.observed, b.time, b.energy, o);
  ASSERT_EQ(pa.picks.size(), pb.picks.size());
  for (std::size_t k = 0; k < pa.picks.size(); ++k) {
    EXPECT_EQ(pa.picks[k].candidate, pb.picks[k].candidate);
    EXPECT_EQ(pa.picks[k].pass, pb.picks[k].pass);
  }
}

TEST(Batch, FewerCandidatesThanTheBatchTakesThemAll) {
  Scenario s = scenario(4, 5);
  BatchPlan plan = plan_batch(s.observed, s.time, s.energy, batch_options(16));
  std::set<std::size_t> got;
  for (const BatchPick& p : plan.picks) got.insert(p.candidate);
  EXPECT_EQ(got, (std::set<std::size_t>{0, 1, 2, 3, 4}));
}

// When nothing improves a front at the passes' optimism, a knob a sd of luck away from the front
// is a better bet than the most uncertain one, which here lies far behind it.
TEST(Batch, BackFillPrefersAKnobNearTheFrontToTheMostUncertain) {
  Eigen::MatrixXd train(4, 1);
  train << 0.0, 0.1, 0.2, 1.0;
  Eigen::VectorXd y(4);
  y << 1.05, 1.05, 1.05, 3.0;
  GpFitOptions fixed;
  fixed.optimise = false;
  fixed.warm_start = GaussianProcess::default_hyperparameters(1);
  fixed.warm_start->length_scales(0) = 0.1;
  Eigen::MatrixXd cand(2, 1);
  cand << 0.3, 0.65;  // near the measured 1.05s; far from everything
  GpPrediction t = GaussianProcess::fit(train, y, fixed).predict(cand);
  GpPrediction e = GaussianProcess::fit(train, y, fixed).predict(cand);
  ASSERT_GT(t.variance(1), t.variance(0));
  std::vector<Observed> obs{{1.0, 1.0}};
  BatchOptions o = batch_options(1, 0.0, 0.0);
  o.shares = {1.0, 0, 0};
  BatchPlan plan = plan_batch(obs, t, e, o);
  ASSERT_EQ(plan.picks.size(), 1u);
  EXPECT_EQ(plan.picks[0].pass, PickPass::kBackfill);
  EXPECT_EQ(plan.picks[0].candidate, 0u);
}

TEST(Batch, NoImprovementLeftIsBackFilledByUncertainty) {
  // Every candidate predicted (with certainty) far behind the observed front: the improvement
  // passes find nothing and their places go to the back-fill.
  Eigen::MatrixXd train(3, 1);
  train << 0.0, 0.5, 1.0;
  Eigen::VectorXd yt(3), ye(3);
  yt << 1.0, 2.0, 3.0;
  ye << 3.0, 2.0, 1.0;
  GpFitOptions fixed;
  fixed.optimise = false;
  Eigen::MatrixXd cand(6, 1);
  cand << 0.0, 0.1, 0.4, 0.5, 0.9, 1.0;
  GpPrediction t = GaussianProcess::fit(train, yt, fixed).predict(cand);
  GpPrediction e = GaussianProcess::fit(train, ye, fixed).predict(cand);
  std::vector<Observed> obs{{0.1, 0.1}};  // dominates every prediction by far
  BatchPlan plan = plan_batch(obs, t, e, batch_options(5, 0.0, 0.0));
  ASSERT_EQ(plan.picks.size(), 5u);
  std::size_t backfill = 0;
  for (const BatchPick& p : plan.picks) backfill += p.pass == PickPass::kBackfill ? 1 : 0;
  EXPECT_EQ(backfill, 3u);  // the two improvement passes' 2 + 1 places
  EXPECT_EQ(plan.predicted_improvement, 0.0);
}

}  // namespace
}  // namespace kareus::search
