// Batch filling: the hypervolume improvement against a brute-force reference, the passes' shares,
// exclusion of earlier picks, back-filling, and determinism.
#include "kareus/search/batch.hpp"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <map>
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

TEST(Batch, TheFastestPassTakesTheFastestPredictedNotYetPicked) {
  Scenario s = scenario(7);
  // Without optimism or a pessimistic lie, picks leave the means as predicted.
  BatchOptions o = batch_options(10, 0.5, 0.0);
  o.liar = 0;
  BatchPlan plan = plan_batch(s.observed, s.time, s.energy, o);
  std::set<std::size_t> before;
  std::vector<std::size_t> fastest;
  for (const BatchPick& p : plan.picks) {
    if (p.pass == PickPass::kFastest) fastest.push_back(p.candidate);
    else if (fastest.empty()) before.insert(p.candidate);
  }
  std::vector<std::size_t> order(s.candidates);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return s.time.mean(static_cast<Eigen::Index>(a)) < s.time.mean(static_cast<Eigen::Index>(b));
  });
  std::vector<std::size_t> expected;
  for (std::size_t i : order) {
    if (expected.size() < fastest.size() && !before.count(i)) expected.push_back(i);
  }
  EXPECT_EQ(fastest, expected);
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
