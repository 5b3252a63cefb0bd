#include "kareus/plan/select.hpp"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "kareus/core/error.hpp"

namespace kareus::plan {
namespace {

const std::vector<TimeEnergy> kFrontier = {{2.0, 900}, {2.5, 800}, {3.0, 750}, {4.0, 720}};

TEST(SelectPlan, EachTargetPicksItsPlan) {
  EXPECT_EQ(select_plan(kFrontier, parse_target("max-throughput")), 0u);
  EXPECT_EQ(select_plan(kFrontier, parse_target("min-energy")), 3u);
  EXPECT_EQ(select_plan(kFrontier, parse_target("deadline:2.9")), 1u);
  EXPECT_EQ(select_plan(kFrontier, parse_target("deadline:3.0")), 2u);
  EXPECT_EQ(select_plan(kFrontier, parse_target("energy:760")), 2u);
  EXPECT_EQ(select_plan(kFrontier, parse_target("energy:10000")), 0u);
}

TEST(SelectPlan, UnreachableTargetsStateTheRange) {
  try {
    select_plan(kFrontier, parse_target("deadline:1.5"));
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("2.0000 s to 4.0000 s"), std::string::npos) << e.what();
  }
  try {
    select_plan(kFrontier, parse_target("energy:700"));
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("720.0 J to 900.0 J"), std::string::npos) << e.what();
  }
}

TEST(SelectPlan, BadTargetsAreInputErrors) {
  for (const char* bad : {"fast", "deadline:", "deadline:-1", "energy:abc", "deadline:nan", ""}) {
    EXPECT_THROW(parse_target(bad), InputError) << bad;
  }
}

RC_GTEST_PROP(SelectPlan, DeadlinePickIsTheLeastEnergyWithinTheDeadline, ()) {
  auto raw = *rc::gen::nonEmpty(rc::gen::container<std::vector<std::pair<int, int>>>(
      rc::gen::pair(rc::gen::inRange(1, 100), rc::gen::inRange(1, 100))));
  std::vector<TimeEnergy> points;
  for (auto [t, e] : raw) points.push_back({t / 10.0, e * 10.0});
  double deadline = *rc::gen::inRange(1, 120) / 10.0;
  double fastest = points[0].time_s;
  for (const auto& p : points) fastest = std::min(fastest, p.time_s);
  if (deadline < fastest) {
    RC_ASSERT_THROWS_AS(select_plan(points, {Target::Kind::kDeadline, deadline}), InputError);
    return;
  }
  std::size_t i = select_plan(points, {Target::Kind::kDeadline, deadline});
  RC_ASSERT(points[i].time_s <= deadline);
  for (const auto& p : points) {
    if (p.time_s <= deadline) RC_ASSERT(points[i].energy_j <= p.energy_j);
  }
}

}  // namespace
}  // namespace kareus::plan

namespace kareus::plan {
namespace {

TEST(PlanSets, EvenlySpacedPlansKeepBothEndsAndNeverRepeat) {
  EXPECT_EQ(evenly_spaced_plans(10, std::nullopt), (std::vector<std::size_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  EXPECT_EQ(evenly_spaced_plans(10, 3), (std::vector<std::size_t>{0, 5, 9}));
  EXPECT_EQ(evenly_spaced_plans(10, 1), (std::vector<std::size_t>{0}));
  EXPECT_TRUE(evenly_spaced_plans(10, 0).empty());
  EXPECT_EQ(evenly_spaced_plans(3, 200), (std::vector<std::size_t>{0, 1, 2}));
  for (std::size_t points = 1; points < 60; ++points) {
    for (std::size_t count = 2; count < 70; ++count) {
      const auto picked = evenly_spaced_plans(points, count);
      ASSERT_EQ(picked.size(), std::min(points, count)) << points << " " << count;
      EXPECT_EQ(picked.front(), 0u);
      EXPECT_EQ(picked.back(), points - 1);
      EXPECT_TRUE(std::is_sorted(picked.begin(), picked.end()));
      EXPECT_EQ(std::adjacent_find(picked.begin(), picked.end()), picked.end());
    }
  }
}

TEST(PlanSets, PlanCountsAreAllOrANumber) {
  EXPECT_EQ(parse_plan_count("all", "--plans"), std::nullopt);
  EXPECT_EQ(parse_plan_count("20", "--plans"), std::optional<std::size_t>(20));
  for (const char* bad : {"", "-1", "2x", "many"}) {
    try {
      parse_plan_count(bad, "--plans");
      ADD_FAILURE() << bad;
    } catch (const InputError& e) {
      EXPECT_EQ(e.location().field, "--plans");
    }
  }
}

}  // namespace
}  // namespace kareus::plan
