#include "kareus/pipeline/operation_cost.hpp"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kareus/core/error.hpp"
#include "test_tables.hpp"

namespace kareus::pipeline {
namespace {

RC_GTEST_PROP(OperationCost, HullIsConvexAndExactOnItsVertices, ()) {
  auto options = testing::dvfs_options(0.05 * *rc::gen::inRange(50, 200) / 100.0, *rc::gen::inRange(1, 12),
                                       *rc::gen::inRange(0, 3));
  const double p = *rc::gen::inRange(0, 80);
  OperationCost cost(options, p, 1e-3, CostModelKind::kHull, "op");
  for (long d = cost.min_units() + 1; d < cost.max_units(); ++d) {
    // Non-increasing cost with non-increasing savings: convex.
    RC_ASSERT(cost.shortening_cost_j(d) >= -1e-9);
    RC_ASSERT(cost.shortening_cost_j(d) + 1e-9 >= cost.lengthening_saving_j(d));
  }
  for (long d = cost.min_units(); d <= cost.max_units(); ++d) {
    // Never above the best option that fits: the hull is a lower envelope.
    const Candidate& fits = cost.options()[cost.frugal_for(d)];
    RC_ASSERT(cost.model_cost_j(d) <= fits.effective_energy_j + 1e-9);
  }
  // The ends are options themselves.
  RC_ASSERT(std::abs(cost.model_cost_j(cost.min_units()) -
                     cost.options()[cost.frugal_for(cost.min_units())].effective_energy_j) < 1e-9);
}

TEST(OperationCost, OptionsAreTheEffectiveEnergyParetoSet) {
  std::vector<StageOption> options = {
      {1410, 0.050, 24.0, nullptr}, {1200, 0.055, 20.0, nullptr},
      {1000, 0.060, 21.0, nullptr},  // E − 80·t = 16.2 > 15.6 at 1200 MHz: dominated
      {900, 0.070, 20.5, nullptr}};  // 14.9: kept, though its real energy is above 1200 MHz's
  OperationCost cost(options, 80.0, 1e-3, CostModelKind::kHull, "op");
  ASSERT_EQ(cost.options().size(), 3u);  // 1000 MHz is dominated by 1200 MHz
  EXPECT_EQ(cost.options()[0].option, 0u);
  EXPECT_EQ(cost.options()[1].option, 1u);
  EXPECT_EQ(cost.options()[2].option, 3u);
  // The model stops at the least real energy (1200 MHz, 20 J); 900 MHz is only for slack.
  EXPECT_EQ(cost.max_units(), 55);
  EXPECT_EQ(cost.min_units(), 50);
}

TEST(OperationCost, ADurationOfMoreUnitsThanFitInMemoryIsBadInput) {
  // 6.7e15 s in 1 ms units: a profile's time not in seconds (found by fuzzing Perseus profiles:
  // the per-unit tables' resize threw std::length_error, exit 70).
  const std::vector<StageOption> options = {{1410, 0.05, 24.0, nullptr}, {990, 6.7e15, 17.0, nullptr}};
  try {
    OperationCost(options, 60.0, 1e-3, CostModelKind::kHull, "stage 0 forward");
    FAIL() << "accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("stage 0 forward: an option's time 6.7e+15 s is 6.7e+18 units of 0.001 s"),
              std::string::npos)
        << e.what();
  }
  // A long but real one (50 s in 1 ms units) is an operation like any other.
  const std::vector<StageOption> real = {{1410, 0.05, 24.0, nullptr}, {990, 50.0, 17000.0, nullptr}};
  EXPECT_NO_THROW(OperationCost(real, 60.0, 1e-3, CostModelKind::kHull, "stage 0 forward"));
}

TEST(OperationCost, ExponentialFitRecoversTheGeneratingCurve) {
  std::vector<double> x, y;
  for (int i = 0; i < 12; ++i) {
    x.push_back(50 + 3 * i);
    y.push_back(40.0 * std::exp(-0.05 * x.back()) + 7.0);
  }
  auto [a, b, c] = fit_exponential(x, y);
  for (std::size_t i = 0; i < x.size(); ++i) {
    EXPECT_NEAR(a * std::exp(b * x[i]) + c, y[i], 1e-6 * y[i]);
  }
  EXPECT_NEAR(b, -0.05, 1e-4);
}

TEST(OperationCost, NegativeEffectiveEnergyEverywhereIsAnInputError) {
  std::vector<StageOption> options = {{1410, 0.05, 10.0, nullptr}, {1000, 0.07, 11.0, nullptr}};
  try {
    OperationCost cost(options, 500.0, 1e-3, CostModelKind::kHull, "stage 3 forward");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("stage 3 forward"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("200.00 W"), std::string::npos);
  }
}

}  // namespace
}  // namespace kareus::pipeline
