// The knob grid: enumeration and lookup, features, the baselines' knobs, and the Latin hypercube
// initial design (level coverage, distinctness, determinism).
#include "kareus/search/knob_space.hpp"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <limits>
#include <map>
#include <set>

#include "kareus/core/error.hpp"

namespace kareus::search {
namespace {

KnobSpace small_space() { return KnobSpace::make({900, 1000, 1100}, {4, 8}, {"norm_0", "linear_0"}, 20); }

TEST(KnobSpace, EnumeratesClockMajorWithTheSequentialKnobFirst) {
  KnobSpace s = small_space();
  ASSERT_EQ(s.size(), 3u * (1 + 2 * 2));
  EXPECT_EQ(s.knob(0), (Knob{900, 20, "none"}));
  EXPECT_EQ(s.knob(1), (Knob{900, 4, "norm_0"}));
  EXPECT_EQ(s.knob(2), (Knob{900, 8, "norm_0"}));
  EXPECT_EQ(s.knob(3), (Knob{900, 4, "linear_0"}));
  EXPECT_EQ(s.knob(5), (Knob{1000, 20, "none"}));
  for (std::size_t i = 0; i < s.size(); ++i) EXPECT_EQ(s.index_of(s.knob(i)), i);
  EXPECT_FALSE(s.index_of(Knob{950, 4, "norm_0"}));
  EXPECT_FALSE(s.index_of(Knob{900, 5, "norm_0"}));
  EXPECT_FALSE(s.index_of(Knob{900, 4, "attn_0"}));
  EXPECT_FALSE(s.index_of(Knob{900, 4, "none"}));  // the sequential knob has the sequential SMs
}

TEST(KnobSpace, FeaturesAreScaledClockLogSmsAndOneHotSlot) {
  KnobSpace s = small_space();
  const Eigen::MatrixXd& f = s.features();
  ASSERT_EQ(f.rows(), 15);
  ASSERT_EQ(f.cols(), 2 + 3);
  EXPECT_EQ(f.row(0), (Eigen::RowVectorXd(5) << 0, 1, 0, 0, 1).finished());  // none, 20 SMs clamped
  EXPECT_EQ(f.row(4), (Eigen::RowVectorXd(5) << 0, 1, 0, 1, 0).finished());  // 900, 8, linear_0
  EXPECT_EQ(f.row(11), (Eigen::RowVectorXd(5) << 1, 0, 1, 0, 0).finished());  // 1100, 4, norm_0
  EXPECT_TRUE((f.array() >= 0).all() && (f.array() <= 1).all());
  // SMs on a log scale: 4 lies halfway between 2 and 8; the sequential knob's 0 SMs clamp to 0.
  KnobSpace three = KnobSpace::make({900}, {2, 4, 8}, {"norm_0"}, 0);
  EXPECT_DOUBLE_EQ(three.features()(2, 1), 0.5);
  EXPECT_EQ(three.features()(0, 1), 0.0);
}

TEST(KnobSpace, WithoutALaunchSlotOneKnobPerClock) {
  KnobSpace s = KnobSpace::make({900, 1410}, {3, 6}, {}, 0);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s.knob(1), (Knob{1410, 0, "none"}));
  EXPECT_EQ(KnobSpace::make({900, 1410}, {3, 6}, {}, 20).knob(0), (Knob{900, 20, "none"}));
  EXPECT_EQ(s.features().cols(), 1);
  EXPECT_EQ(s.nanobatching_knob(900), s.sequential_knob(900));
  EXPECT_EQ(s.baseline_knobs().size(), 2u);
}

TEST(KnobSpace, BaselineKnobsAreSequentialAndNanobatchingAtEveryClock) {
  KnobSpace s = KnobSpace::make({900, 1000}, {3, 6, 18, 23, 27}, {"norm_0", "linear_0"}, 20);
  std::vector<std::size_t> b = s.baseline_knobs();
  ASSERT_EQ(b.size(), 4u);
  EXPECT_EQ(s.knob(b[0]), (Knob{900, 20, "none"}));
  EXPECT_EQ(s.knob(b[1]), (Knob{900, 23, "norm_0"}));  // nearest level to NCCL's 24
  EXPECT_EQ(s.knob(b[3]), (Knob{1000, 23, "norm_0"}));
  EXPECT_EQ(s.knob(s.nanobatching_knob(1000, 5)), (Knob{1000, 6, "norm_0"}));
  EXPECT_THROW(s.sequential_knob(950), InputError);
}

TEST(KnobSpace, RejectsBadGrids) {
  EXPECT_THROW(KnobSpace::make({}, {3}, {"a"}, 20), InputError);
  EXPECT_THROW(KnobSpace::make({1000, 900}, {3}, {"a"}, 20), InputError);
  EXPECT_THROW(KnobSpace::make({900}, {}, {"a"}, 20), InputError);
  EXPECT_THROW(KnobSpace::make({900}, {0, 3}, {"a"}, 20), InputError);
  EXPECT_THROW(KnobSpace::make({900}, {3}, {"a", "a"}, 20), InputError);
  EXPECT_THROW(KnobSpace::make({900}, {3}, {"none"}, 20), InputError);
}

TEST(KnobSpace, InitialDesignStartsWithTheBaselinesAndIsDeterministic) {
  KnobSpace s = KnobSpace::make({900, 930, 960, 990}, {3, 6, 9}, {"a", "b", "c"}, 20);
  InitialDesignOptions o;
  o.include_baseline_knobs = true;
  o.cover_configurations = false;
  o.latin_hypercube_points = 10;
  o.seed = 42;
  std::vector<std::size_t> d = s.initial_design(o);
  std::vector<std::size_t> b = s.baseline_knobs();
  ASSERT_EQ(d.size(), b.size() + 10);
  EXPECT_EQ(s.initial_design_size(o), d.size());
  EXPECT_TRUE(std::equal(b.begin(), b.end(), d.begin()));
  EXPECT_EQ(d, s.initial_design(o));
  o.seed = 43;
  EXPECT_NE(d, s.initial_design(o));
  o.include_baseline_knobs = false;
  EXPECT_EQ(s.initial_design(o).size(), 10u);
  o.latin_hypercube_points = 1000;  // capped by the grid
  EXPECT_EQ(s.initial_design(o).size(), s.size());
}

// A grid of `clocks` clocks 30 MHz apart, SM levels 3, 6, ... and slots slot_0, slot_1, ...
KnobSpace regular_grid(int clocks, int sms, int slots) {
  std::vector<double> f;
  for (int i = 0; i < clocks; ++i) f.push_back(900 + 30 * i);
  std::vector<int> m;
  for (int i = 0; i < sms; ++i) m.push_back(3 * (i + 1));
  std::vector<std::string> names;
  for (int i = 0; i < slots; ++i) names.push_back("slot_" + std::to_string(i));
  return KnobSpace::make(f, m, names, 20);
}

RC_GTEST_PROP(KnobSpace, LatinHypercubeCoversEachDimensionsLevels, ()) {
  const int clocks = *rc::gen::inRange(1, 20);
  const int sms = *rc::gen::inRange(1, 12);
  const int slots = *rc::gen::inRange(1, 8);
  const auto seed = *rc::gen::inRange<std::uint64_t>(0, 1'000'000);
  const bool baselines = *rc::gen::arbitrary<bool>();
  KnobSpace s = regular_grid(clocks, sms, slots);
  const std::size_t levels = static_cast<std::size_t>(std::max({clocks, sms, slots + 1}));
  const std::size_t n = std::min(s.size() / 2, levels + *rc::gen::inRange<std::size_t>(0, 3 * levels));
  RC_PRE(n >= levels);
  InitialDesignOptions o;
  o.latin_hypercube_points = n;
  o.seed = seed;
  o.include_baseline_knobs = baselines;
  o.cover_configurations = false;
  std::vector<std::size_t> d = s.initial_design(o);
  std::set<std::size_t> distinct(d.begin(), d.end());
  RC_ASSERT(distinct.size() == d.size());
  const std::size_t skip = baselines ? s.baseline_knobs().size() : 0;
  RC_ASSERT(d.size() == skip + std::min(n, s.size() - skip));
  std::set<double> seen_f;
  std::set<std::string> seen_slot;
  std::set<int> seen_sms;
  for (std::size_t k = 0; k < d.size(); ++k) {
    const Knob& knob = s.knob(d[k]);
    seen_f.insert(knob.freq_mhz);
    seen_slot.insert(knob.slot);
    if (k >= skip && !knob.sequential()) seen_sms.insert(knob.sms);
  }
  RC_ASSERT(seen_f.size() == static_cast<std::size_t>(clocks));
  RC_ASSERT(seen_slot.size() == static_cast<std::size_t>(slots + 1));
  // SM levels are spread over the points that overlap (at least n − ⌈n/(slots+1)⌉ of them): each
  // level appears when there are as many of those as levels.
  const std::size_t sequential_points = (n + static_cast<std::size_t>(slots)) / static_cast<std::size_t>(slots + 1);
  if (!baselines && n - sequential_points >= static_cast<std::size_t>(sms)) {
    RC_ASSERT(seen_sms.size() == static_cast<std::size_t>(sms));
  }
}

// The baselines measure the sequential knob at every clock, so the hypercube then spends every
// point on overlapped knobs with SM levels spread over the grid. (It used to aim some points at
// the measured sequential knob; they fell back to the fewest SMs, the worst knobs there are.) On
// the Kareus grid of a TP partition with two slots, 8 points over 10 SM levels.
TEST(KnobSpace, WithBaselinesTheHypercubeSpreadsOverSmLevels) {
  std::vector<double> clocks;
  for (double f = 900; f <= 1410; f += 30) clocks.push_back(f);
  KnobSpace s = KnobSpace::make(clocks, {3, 6, 9, 12, 15, 18, 21, 24, 27, 30}, {"norm_0", "linear_0"}, 20);
  std::size_t fewest_sms_points = 0;
  for (std::uint64_t seed = 0; seed < 50; ++seed) {
    InitialDesignOptions o;
    o.include_baseline_knobs = true;
    o.cover_configurations = false;
    o.latin_hypercube_points = 8;
    o.seed = seed;
    const std::vector<std::size_t> d = s.initial_design(o);
    std::set<int> levels;
    for (std::size_t k = s.baseline_knobs().size(); k < d.size(); ++k) {
      levels.insert(s.knob(d[k]).sms);
      fewest_sms_points += s.knob(d[k]).sms == 3;
    }
    EXPECT_GE(levels.size(), 7u) << "seed " << seed;  // 8 points over 10 levels: nearly all distinct
  }
  // An even spread puts 8/10 of a point per design on each level.
  EXPECT_LE(fewest_sms_points, 50u);
}

// The default design: one knob of every configuration (each slot with each SM level, and the
// sequential knob), the clocks evenly spread; with the baselines, only the configurations they
// leave out. Then the hypercube's points, all distinct.
RC_GTEST_PROP(KnobSpace, CoveringDesignHasOneKnobPerConfigurationOnSpreadClocks, ()) {
  const int clocks = *rc::gen::inRange(1, 20);
  const int sms = *rc::gen::inRange(1, 12);
  const int slots = *rc::gen::inRange(0, 4);
  const bool baselines = *rc::gen::arbitrary<bool>();
  KnobSpace s = regular_grid(clocks, sms, slots);
  InitialDesignOptions o;
  o.seed = *rc::gen::inRange<std::uint64_t>(0, 1'000'000);
  o.include_baseline_knobs = baselines;
  o.latin_hypercube_points = *rc::gen::inRange<std::size_t>(0, 10);
  const std::vector<std::size_t> d = s.initial_design(o);
  RC_ASSERT(std::set<std::size_t>(d.begin(), d.end()).size() == d.size());
  RC_ASSERT(d == s.initial_design(o));
  RC_ASSERT(d.size() == s.initial_design_size(o));

  const std::vector<std::size_t> baseline_knobs = s.baseline_knobs();
  const std::size_t skip = baselines ? std::set<std::size_t>(baseline_knobs.begin(), baseline_knobs.end()).size() : 0;
  const std::size_t covering = s.configurations() - (baselines ? (s.has_collective() ? 2 : 1) : 0);
  std::map<std::pair<std::string, int>, int> per_configuration;  // (slot, SMs) → knobs
  std::map<double, int> covering_clocks;
  for (std::size_t k = 0; k < d.size(); ++k) {
    const Knob& knob = s.knob(d[k]);
    ++per_configuration[{knob.slot, knob.sms}];
    if (k >= skip && k < skip + covering) covering_clocks[knob.freq_mhz] += 1;
  }
  // Every configuration is there; the covering part adds exactly those the baselines leave out.
  RC_ASSERT(per_configuration.size() == s.configurations());
  RC_ASSERT(d.size() == std::min(s.size(), skip + covering + o.latin_hypercube_points));
  for (std::size_t k = skip; k < skip + covering; ++k) {
    const Knob& knob = s.knob(d[k]);
    for (std::size_t j = skip; j < k; ++j) {
      RC_ASSERT(!(s.knob(d[j]).slot == knob.slot && s.knob(d[j]).sms == knob.sms));
    }
  }
  // Clocks evenly spread over the covering knobs: counts differ by at most one.
  if (covering >= static_cast<std::size_t>(clocks)) RC_ASSERT(covering_clocks.size() == static_cast<std::size_t>(clocks));
  int lo = std::numeric_limits<int>::max(), hi = 0;
  for (const auto& [clock, count] : covering_clocks) lo = std::min(lo, count), hi = std::max(hi, count);
  if (covering >= static_cast<std::size_t>(clocks)) RC_ASSERT(hi - lo <= 1);
}

// A space restricted to a table's knobs: the design holds only available knobs, one of every
// configuration that has any, and as many hypercube points as fit; nothing else is counted.
RC_GTEST_PROP(KnobSpace, ARestrictedSpaceDesignsOnlyAvailableKnobs, ()) {
  const int clocks = *rc::gen::inRange(1, 12);
  const int sms = *rc::gen::inRange(1, 8);
  const int slots = *rc::gen::inRange(0, 4);
  const KnobSpace grid = regular_grid(clocks, sms, slots);
  std::vector<Knob> known;
  std::set<std::size_t> expected;
  for (std::size_t i = 0; i < grid.size(); ++i) {
    if (*rc::gen::inRange(0, 3) == 0) known.push_back(grid.knob(i)), expected.insert(i);
  }
  known.push_back({12345, 3, "nowhere_0"});  // off the grid: ignored
  const KnobSpace s = grid.restricted_to(known);
  RC_ASSERT(s.restricted());
  RC_ASSERT(s.size() == grid.size());
  RC_ASSERT(s.available_count() == expected.size());
  for (std::size_t i = 0; i < s.size(); ++i) RC_ASSERT(s.available(i) == expected.contains(i));

  InitialDesignOptions o;
  o.seed = *rc::gen::inRange<std::uint64_t>(0, 1'000'000);
  o.include_baseline_knobs = *rc::gen::arbitrary<bool>();
  o.cover_configurations = *rc::gen::arbitrary<bool>();
  o.latin_hypercube_points = *rc::gen::inRange<std::size_t>(0, 30);
  const std::vector<std::size_t> d = s.initial_design(o);
  RC_ASSERT(std::set<std::size_t>(d.begin(), d.end()).size() == d.size());
  for (std::size_t i : d) RC_ASSERT(expected.contains(i));
  std::set<std::pair<std::string, int>> available_configs, designed_configs;
  for (std::size_t i : expected) available_configs.insert({grid.knob(i).slot, grid.knob(i).sms});
  for (std::size_t i : d) designed_configs.insert({grid.knob(i).slot, grid.knob(i).sms});
  if (o.cover_configurations) RC_ASSERT(designed_configs == available_configs);
  std::size_t before_hypercube = 0;
  {
    InitialDesignOptions part = o;
    part.latin_hypercube_points = 0;
    before_hypercube = s.initial_design_size(part);
  }
  RC_ASSERT(d.size() == std::min(expected.size(), before_hypercube + o.latin_hypercube_points));
}

TEST(KnobSpace, RestrictingAPartitionWithoutSlotsGoesByClock) {
  const KnobSpace s = KnobSpace::make({900, 1000, 1100}, {}, {}, 20);
  // A table answers such a partition by clock, whatever SMs its sample names.
  const KnobSpace r = s.restricted_to({{1000, 0, "none"}, {1100, 7, "none"}, {1100, 7, "linear_0"}});
  EXPECT_FALSE(r.available(0));
  EXPECT_TRUE(r.available(1));
  EXPECT_TRUE(r.available(2));
  EXPECT_EQ(r.available_count(), 2u);
  EXPECT_EQ(s.available_count(), 3u);
  EXPECT_FALSE(s.restricted());
}

}  // namespace
}  // namespace kareus::search
