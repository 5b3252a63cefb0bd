// Tests of the multi-objective helpers: Pareto filtering and hypervolume against brute-force
// references, the iso-time / iso-energy comparisons on hand-computed examples, and sample_evenly.
#include "kareus/core/pareto.hpp"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <ostream>
#include <vector>

#include "kareus/core/error.hpp"

namespace kareus {

// Shows points in rapidcheck's counterexamples.
void showValue(const TimeEnergy& p, std::ostream& os) { os << "(" << p.time_s << ", " << p.energy_j << ")"; }

namespace {

// Points on a small integer grid, so that ties and duplicates are common.
rc::Gen<TimeEnergy> grid_point(int max) {
  return rc::gen::map(rc::gen::pair(rc::gen::inRange(0, max + 1), rc::gen::inRange(0, max + 1)),
                      [](const std::pair<int, int>& p) {
                        return TimeEnergy{static_cast<double>(p.first), static_cast<double>(p.second)};
                      });
}

rc::Gen<std::vector<TimeEnergy>> grid_points(int max) { return rc::gen::container<std::vector<TimeEnergy>>(grid_point(max)); }

// Points with arbitrary positive real coordinates.
rc::Gen<TimeEnergy> real_point() {
  return rc::gen::map(rc::gen::pair(rc::gen::inRange(1, 1'000'000), rc::gen::inRange(1, 1'000'000)),
                      [](const std::pair<int, int>& p) {
                        return TimeEnergy{p.first * 1e-4, p.second * 3.7e-3};
                      });
}

// O(n^2) reference: a point survives iff nothing dominates it and no earlier point equals it;
// ordered by time ascending.
std::vector<std::size_t> reference_pareto_indices(const std::vector<TimeEnergy>& points) {
  std::vector<std::size_t> kept;
  for (std::size_t i = 0; i < points.size(); ++i) {
    bool keep = true;
    for (std::size_t j = 0; j < points.size() && keep; ++j) {
      if (j == i) continue;
      const TimeEnergy& a = points[j];
      const TimeEnergy& b = points[i];
      bool dominated = a.time_s <= b.time_s && a.energy_j <= b.energy_j &&
                       (a.time_s < b.time_s || a.energy_j < b.energy_j);
      bool earlier_duplicate = j < i && a.time_s == b.time_s && a.energy_j == b.energy_j;
      if (dominated || earlier_duplicate) keep = false;
    }
    if (keep) kept.push_back(i);
  }
  std::sort(kept.begin(), kept.end(),
            [&](std::size_t a, std::size_t b) { return points[a].time_s < points[b].time_s; });
  return kept;
}

// Number of unit cells [x, x+1) x [y, y+1) inside [0, ref) that some point weakly dominates; equal
// to the dominated area when every coordinate is a non-negative integer.
double reference_hypervolume(const std::vector<TimeEnergy>& points, const TimeEnergy& ref) {
  long cells = 0;
  for (long x = 0; x < static_cast<long>(ref.time_s); ++x) {
    for (long y = 0; y < static_cast<long>(ref.energy_j); ++y) {
      for (const TimeEnergy& p : points) {
        if (p.time_s <= static_cast<double>(x) && p.energy_j <= static_cast<double>(y)) {
          ++cells;
          break;
        }
      }
    }
  }
  return static_cast<double>(cells);
}

// ---------------------------------------------------------------------------------------------
// dominates / pareto_indices / pareto_front

TEST(Dominates, Basics) {
  EXPECT_TRUE(dominates({1, 1}, {2, 2}));
  EXPECT_TRUE(dominates({1, 2}, {1, 3}));
  EXPECT_TRUE(dominates({1, 3}, {2, 3}));
  EXPECT_FALSE(dominates({1, 1}, {1, 1}));
  EXPECT_FALSE(dominates({1, 3}, {2, 2}));
  EXPECT_FALSE(dominates({2, 2}, {1, 1}));
}

TEST(Pareto, HandExample) {
  std::vector<TimeEnergy> points = {{3, 5}, {1, 9}, {2, 7}, {2, 8}, {4, 5}, {1, 9}, {5, 1}, {3, 6}};
  EXPECT_EQ(pareto_indices(points), (std::vector<std::size_t>{1, 2, 0, 6}));
  EXPECT_EQ(pareto_front(points), (std::vector<TimeEnergy>{{1, 9}, {2, 7}, {3, 5}, {5, 1}}));
  EXPECT_TRUE(pareto_indices(std::vector<TimeEnergy>{}).empty());
  EXPECT_EQ(pareto_indices(std::vector<TimeEnergy>{{4, 4}}), (std::vector<std::size_t>{0}));
}

RC_GTEST_PROP(ParetoProperty, IndicesMatchBruteForce, ()) {
  auto points = *grid_points(8);
  RC_ASSERT(pareto_indices(points) == reference_pareto_indices(points));
}

RC_GTEST_PROP(ParetoProperty, IndicesMatchBruteForceOnRealPoints, ()) {
  auto points = *rc::gen::container<std::vector<TimeEnergy>>(real_point());
  RC_ASSERT(pareto_indices(points) == reference_pareto_indices(points));
}

RC_GTEST_PROP(ParetoProperty, FrontIsSortedStaircaseOfInputPoints, ()) {
  auto points = *grid_points(10);
  auto front = pareto_front(points);
  auto indices = pareto_indices(points);
  RC_ASSERT(front.size() == indices.size());
  for (std::size_t k = 0; k < front.size(); ++k) {
    RC_ASSERT(front[k] == points[indices[k]]);
    if (k > 0) {
      RC_ASSERT(front[k - 1].time_s < front[k].time_s);
      RC_ASSERT(front[k - 1].energy_j > front[k].energy_j);
    }
  }
  // Every input point is dominated by, or equal to, a front point.
  for (const TimeEnergy& p : points) {
    bool covered = std::any_of(front.begin(), front.end(), [&](const TimeEnergy& f) {
      return f == p || dominates(f, p);
    });
    RC_ASSERT(covered);
  }
  RC_ASSERT(points.empty() == front.empty());
}

RC_GTEST_PROP(ParetoProperty, FirstOfDuplicatesIsKept, ()) {
  auto points = *grid_points(4);
  RC_PRE(!points.empty());
  // Append copies of every point; the originals (lower indices) must be the ones kept.
  const std::size_t n = points.size();
  std::vector<TimeEnergy> doubled = points;
  doubled.insert(doubled.end(), points.begin(), points.end());
  auto indices = pareto_indices(doubled);
  for (std::size_t i : indices) RC_ASSERT(i < n);
  RC_ASSERT(pareto_front(doubled) == pareto_front(points));
}

// Offered points the set weakly dominates can be let go as they come: the Pareto set of the set
// and the offered points together is the same, point for point, with them or without them.
RC_GTEST_PROP(WeaklyDominatedProperty, LettingThemGoKeepsTheParetoSetOfAll, ()) {
  std::vector<TimeEnergy> front = *grid_points(8);
  std::ranges::sort(front, {}, &TimeEnergy::time_s);  // time ascending, energies in any order
  const auto offered = *grid_points(8);
  const WeaklyDominated dominated(front);
  std::vector<TimeEnergy> all = front, kept = front;
  all.insert(all.end(), offered.begin(), offered.end());
  for (const TimeEnergy& p : offered) {
    const bool brute = std::any_of(front.begin(), front.end(), [&](const TimeEnergy& f) {
      return f.time_s <= p.time_s && f.energy_j <= p.energy_j;
    });
    RC_ASSERT(dominated(p) == brute);
    if (!dominated(p)) kept.push_back(p);
  }
  RC_ASSERT(pareto_front(kept) == pareto_front(all));
  // And the same points of the set survive (the set comes first in both, so their indices agree).
  auto of_the_set = [&](const std::vector<std::size_t>& indices) {
    std::vector<std::size_t> out;
    for (std::size_t i : indices) {
      if (i < front.size()) out.push_back(i);
    }
    return out;
  };
  RC_ASSERT(of_the_set(pareto_indices(kept)) == of_the_set(pareto_indices(all)));
}

// ---------------------------------------------------------------------------------------------
// hypervolume_2d

TEST(Hypervolume, HandExample) {
  // Staircase (1,3), (2,1) under reference (4,4); (3,3) is dominated. Area by horizontal slices:
  // [1,4)x[3,4) = 3 plus [2,4)x[1,3) = 4.
  std::vector<TimeEnergy> points = {{2, 1}, {1, 3}, {3, 3}};
  EXPECT_DOUBLE_EQ(hypervolume_2d(points, {4, 4}), 7.0);
  EXPECT_DOUBLE_EQ(hypervolume_2d(std::vector<TimeEnergy>{}, {4, 4}), 0.0);
  // Points on or beyond the reference contribute nothing.
  EXPECT_DOUBLE_EQ(hypervolume_2d(std::vector<TimeEnergy>{{4, 1}, {1, 4}, {5, 5}}, {4, 4}), 0.0);
  // A point beyond the reference in energy does not hide a point inside it.
  EXPECT_DOUBLE_EQ(hypervolume_2d(std::vector<TimeEnergy>{{0, 9}, {3, 2}}, {4, 4}), 2.0);
}

RC_GTEST_PROP(HypervolumeProperty, MatchesCellCount, ()) {
  auto points = *grid_points(10);
  int ref_t = *rc::gen::inRange(0, 12);
  int ref_e = *rc::gen::inRange(0, 12);
  TimeEnergy ref{static_cast<double>(ref_t), static_cast<double>(ref_e)};
  RC_ASSERT(hypervolume_2d(points, ref) == reference_hypervolume(points, ref));
}

RC_GTEST_PROP(HypervolumeProperty, AddingAPointNeverDecreases, ()) {
  auto points = *rc::gen::container<std::vector<TimeEnergy>>(real_point());
  TimeEnergy extra = *real_point();
  TimeEnergy ref{*rc::gen::inRange(1, 120) * 1.0, *rc::gen::inRange(1, 4000) * 1.0};
  double before = hypervolume_2d(points, ref);
  points.push_back(extra);
  double after = hypervolume_2d(points, ref);
  RC_ASSERT(before >= 0.0);
  RC_ASSERT(after >= before * (1 - 1e-12));
  // A point that a present point dominates changes nothing.
  TimeEnergy worse{extra.time_s + 1, extra.energy_j + 1};
  points.push_back(worse);
  RC_ASSERT(std::abs(hypervolume_2d(points, ref) - after) <= 1e-12 * std::max(1.0, after));
}

RC_GTEST_PROP(HypervolumeProperty, IndependentOfOrder, ()) {
  auto points = *grid_points(10);
  // Reorder by random keys (stable, so equal keys keep their order).
  auto keys = *rc::gen::container<std::vector<int>>(points.size(), rc::gen::inRange(0, 1000));
  std::vector<std::size_t> order(points.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return keys[a] < keys[b]; });
  std::vector<TimeEnergy> shuffled;
  for (std::size_t i : order) shuffled.push_back(points[i]);
  TimeEnergy ref{11, 11};
  RC_ASSERT(hypervolume_2d(points, ref) == hypervolume_2d(shuffled, ref));
}

// ---------------------------------------------------------------------------------------------
// min_energy_within_time / min_time_within_energy

RC_GTEST_PROP(BudgetProperty, MatchesBruteForce, ()) {
  auto points = *grid_points(10);
  double limit = *rc::gen::inRange(-1, 12);
  std::optional<double> energy, time;
  for (const TimeEnergy& p : points) {
    if (p.time_s <= limit && (!energy || p.energy_j < *energy)) energy = p.energy_j;
    if (p.energy_j <= limit && (!time || p.time_s < *time)) time = p.time_s;
  }
  RC_ASSERT(min_energy_within_time(points, limit) == energy);
  RC_ASSERT(min_time_within_energy(points, limit) == time);
}

TEST(Budget, HandExamplesAndRelativeSlack) {
  std::vector<TimeEnergy> points = {{1.0, 10.0}, {2.0, 6.0}, {3.0, 4.0}};
  EXPECT_EQ(min_energy_within_time(points, 0.5), std::nullopt);
  EXPECT_EQ(min_energy_within_time(points, 1.0), 10.0);
  EXPECT_EQ(min_energy_within_time(points, 2.5), 6.0);
  EXPECT_EQ(min_energy_within_time(points, 100), 4.0);
  EXPECT_EQ(min_time_within_energy(points, 3.9), std::nullopt);
  EXPECT_EQ(min_time_within_energy(points, 6.0), 2.0);
  EXPECT_EQ(min_time_within_energy(points, 1e9), 1.0);
  EXPECT_EQ(min_energy_within_time(std::vector<TimeEnergy>{}, 1.0), std::nullopt);
  // Within a relative 1e-12 counts as within; well beyond it does not.
  EXPECT_EQ(min_energy_within_time(points, 2.0 * (1 - 1e-13)), 6.0);
  EXPECT_EQ(min_energy_within_time(points, 2.0 * (1 - 1e-9)), 10.0);
  EXPECT_EQ(min_time_within_energy(points, 6.0 * (1 - 1e-13)), 2.0);
  EXPECT_EQ(min_time_within_energy(points, 6.0 * (1 - 1e-9)), 3.0);
}

// ---------------------------------------------------------------------------------------------
// iso-time / iso-energy

TEST(IsoComparison, HandExamples) {
  std::vector<TimeEnergy> reference = {{10, 100}, {12, 80}, {15, 60}};
  std::vector<TimeEnergy> method = {{9, 95}, {10, 70}, {14, 50}};
  // Iso-time: the reference's fastest is (10, 100); the method's least energy at time <= 10 is 70.
  auto iso_time = iso_time_energy_reduction_pct(method, reference);
  ASSERT_TRUE(iso_time.has_value());
  EXPECT_DOUBLE_EQ(*iso_time, 30.0);
  // Iso-energy: the reference's most frugal is (15, 60); the method's fastest at energy <= 60 is 14.
  auto iso_energy = iso_energy_time_reduction_pct(method, reference);
  ASSERT_TRUE(iso_energy.has_value());
  EXPECT_DOUBLE_EQ(*iso_energy, 100.0 / 15.0);
}

TEST(IsoComparison, NegativeWhenMethodIsWorse) {
  std::vector<TimeEnergy> reference = {{10, 100}, {20, 50}};
  std::vector<TimeEnergy> method = {{10, 120}, {25, 50}};
  EXPECT_DOUBLE_EQ(*iso_time_energy_reduction_pct(method, reference), -20.0);
  EXPECT_DOUBLE_EQ(*iso_energy_time_reduction_pct(method, reference), -25.0);
}

TEST(IsoComparison, EmptyWhenMethodHasNoPlanFastOrFrugalEnough) {
  std::vector<TimeEnergy> reference = {{10, 100}, {20, 50}};
  std::vector<TimeEnergy> slow = {{11, 10}};
  EXPECT_EQ(iso_time_energy_reduction_pct(slow, reference), std::nullopt);
  std::vector<TimeEnergy> hungry = {{1, 51}};
  EXPECT_EQ(iso_energy_time_reduction_pct(hungry, reference), std::nullopt);
  // ... while the other comparison exists for each.
  EXPECT_TRUE(iso_energy_time_reduction_pct(slow, reference).has_value());
  EXPECT_TRUE(iso_time_energy_reduction_pct(hungry, reference).has_value());
  EXPECT_EQ(iso_time_energy_reduction_pct(std::vector<TimeEnergy>{}, reference), std::nullopt);
}

TEST(IsoComparison, ReferenceTiesPickTheBetterPlan) {
  // Two reference plans at the fastest time: the lower energy one is the reference point.
  std::vector<TimeEnergy> reference = {{10, 100}, {10, 90}, {30, 40}, {20, 40}};
  EXPECT_DOUBLE_EQ(*iso_time_energy_reduction_pct(std::vector<TimeEnergy>{{10, 81}}, reference), 10.0);
  // Two at the lowest energy: the faster one.
  EXPECT_DOUBLE_EQ(*iso_energy_time_reduction_pct(std::vector<TimeEnergy>{{18, 40}}, reference), 10.0);
}

TEST(IsoComparison, EmptyReferenceIsABug) {
  std::vector<TimeEnergy> method = {{1, 1}};
  EXPECT_THROW((void)iso_time_energy_reduction_pct(method, std::vector<TimeEnergy>{}), InternalError);
  EXPECT_THROW((void)iso_energy_time_reduction_pct(method, std::vector<TimeEnergy>{}), InternalError);
}

RC_GTEST_PROP(IsoComparisonProperty, ZeroAgainstItself, ()) {
  auto points = *rc::gen::nonEmpty(rc::gen::container<std::vector<TimeEnergy>>(real_point()));
  auto iso_time = iso_time_energy_reduction_pct(points, points);
  auto iso_energy = iso_energy_time_reduction_pct(points, points);
  RC_ASSERT(iso_time.has_value());
  RC_ASSERT(iso_energy.has_value());
  RC_ASSERT(*iso_time == 0.0);
  RC_ASSERT(*iso_energy == 0.0);
}

RC_GTEST_PROP(IsoComparisonProperty, DominatingMethodNeverLoses, ()) {
  // A method containing every reference point, each improved, never has a negative reduction.
  auto reference = *rc::gen::nonEmpty(rc::gen::container<std::vector<TimeEnergy>>(real_point()));
  std::vector<TimeEnergy> method;
  for (const TimeEnergy& p : reference) method.push_back({p.time_s * 0.9, p.energy_j * 0.95});
  auto iso_time = iso_time_energy_reduction_pct(method, reference);
  auto iso_energy = iso_energy_time_reduction_pct(method, reference);
  RC_ASSERT(iso_time.has_value());
  RC_ASSERT(iso_energy.has_value());
  RC_ASSERT(*iso_time >= 5.0 - 1e-9);
  RC_ASSERT(*iso_energy >= 10.0 - 1e-9);
}

// ---------------------------------------------------------------------------------------------
// sample_evenly

std::vector<TimeEnergy> staircase(std::size_t n) {
  std::vector<TimeEnergy> out;
  for (std::size_t i = 0; i < n; ++i) {
    out.push_back({static_cast<double>(i + 1), static_cast<double>(2 * n - i)});
  }
  return out;
}

TEST(SampleEvenly, HandExamples) {
  auto frontier = staircase(5);
  EXPECT_EQ(sample_evenly(frontier, 3),
            (std::vector<TimeEnergy>{frontier[0], frontier[2], frontier[4]}));
  EXPECT_EQ(sample_evenly(frontier, 2), (std::vector<TimeEnergy>{frontier[0], frontier[4]}));
  EXPECT_EQ(sample_evenly(frontier, 1), (std::vector<TimeEnergy>{frontier[0]}));
  // 6 points, 4 samples: targets 0, 5/3, 10/3, 5 round to 0, 2, 3, 5.
  auto six = staircase(6);
  EXPECT_EQ(sample_evenly(six, 4), (std::vector<TimeEnergy>{six[0], six[2], six[3], six[5]}));
  EXPECT_EQ(sample_evenly(frontier, 5), frontier);
  EXPECT_EQ(sample_evenly(frontier, 50), frontier);
  EXPECT_TRUE(sample_evenly(frontier, 0).empty());
  EXPECT_TRUE(sample_evenly(std::vector<TimeEnergy>{}, 4).empty());
}

RC_GTEST_PROP(SampleEvenlyProperty, EndsCountOrderAndSpacing, ()) {
  const auto n = static_cast<std::size_t>(*rc::gen::inRange(0, 60));
  const auto count = static_cast<std::size_t>(*rc::gen::inRange(0, 70));
  auto frontier = staircase(n);
  auto sample = sample_evenly(frontier, count);
  RC_ASSERT(sample.size() == std::min(n, count));
  if (sample.empty()) return;
  // Every sample is a frontier point; recover its index (times are 1..n).
  std::vector<std::size_t> index;
  for (const TimeEnergy& p : sample) {
    auto i = static_cast<std::size_t>(p.time_s) - 1;
    RC_ASSERT(i < n);
    RC_ASSERT(frontier[i] == p);
    index.push_back(i);
  }
  RC_ASSERT(index.front() == 0u);
  if (count >= 2) RC_ASSERT(index.back() == n - 1);
  for (std::size_t k = 1; k < index.size(); ++k) RC_ASSERT(index[k] > index[k - 1]);
  // Evenly: the k-th sample is the index nearest to k·(n−1)/(count−1) ...
  if (index.size() >= 2) {
    const long span = static_cast<long>(n) - 1, steps = static_cast<long>(index.size()) - 1;
    for (std::size_t k = 0; k < index.size(); ++k) {
      long twice_error = 2 * (static_cast<long>(index[k]) * steps - static_cast<long>(k) * span);
      RC_ASSERT(std::abs(twice_error) <= steps);
    }
  }
  // ... so consecutive gaps differ by at most one.
  if (index.size() >= 3) {
    std::size_t lo = std::numeric_limits<std::size_t>::max(), hi = 0;
    for (std::size_t k = 1; k < index.size(); ++k) {
      lo = std::min(lo, index[k] - index[k - 1]);
      hi = std::max(hi, index[k] - index[k - 1]);
    }
    RC_ASSERT(hi - lo <= 1u);
  }
}

}  // namespace
}  // namespace kareus
