// Whole-job energy and the straggler's extrinsic bloat against a brute force over the frontier.
#include "kareus/planner/cluster.hpp"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>

#include "kareus/core/error.hpp"

namespace kareus::planner {
namespace {

RC_GTEST_PROP(Cluster, OthersFollowTheFrontierToTheCheapestWaitThereIs, ()) {
  // A random frontier, time ascending, energy descending, as a pipeline's frontier is: each plan's
  // energy charges its stages' idle time at P_blocking, so a slower plan of the front saves more
  // than its 8 stages would draw blocked for the extra time (85 W each).
  const int n = *rc::gen::inRange(1, 30);
  std::vector<TimeEnergy> front;
  double t = 1.0, e = 50000.0;
  for (int k = 0; k < n; ++k) {
    front.push_back({t, e});
    const double dt = *rc::gen::inRange(1, 100) * 1e-3;
    t += dt;
    e -= 85.0 * 8 * dt + *rc::gen::inRange(1, 100) * 1.0;
  }
  const ClusterShape shape{.pipelines = *rc::gen::inRange(1, 200), .gpus_per_stage = 8, .stages = 8, .p_blocking_w = 85};
  double last_saving_j = 0;
  for (double slowdown : {1.0, 1.05, 1.1, 1.2, 1.5}) {
    const StragglerIteration it = straggler_iteration(front, shape, slowdown);
    const double deadline = slowdown * front.front().time_s;
    // Brute force: each other pipeline waits for the straggler on whichever plan meets it cheapest.
    double best = 1e300;
    for (const TimeEnergy& p : front) {
      // Meeting the deadline as select_plan's deadline target does: no later than it, exactly.
      if (p.time_s <= deadline) best = std::min(best, p.energy_j + 85.0 * 8 * (deadline - p.time_s));
    }
    const double straggler = slowdown * front.front().energy_j * 8;
    RC_ASSERT(std::abs(it.cluster_energy_j - (straggler + (shape.pipelines - 1) * 8 * best)) <= 1e-6 * it.cluster_energy_j);
    RC_ASSERT(it.cluster_energy_j <= it.cluster_energy_blocking_j + 1e-9);
    const double saving_j = it.cluster_energy_blocking_j - it.cluster_energy_j;
    // A later straggler leaves more to save (the same, past the slowest plan: up to rounding).
    RC_ASSERT(saving_j >= last_saving_j * (1 - 1e-12) - 1e-9);
    last_saving_j = saving_j;
    if (slowdown == 1.0) RC_ASSERT(saving_j == 0.0);
  }
}

TEST(Cluster, EnergyCoversEveryGpu) {
  const ClusterShape shape{.pipelines = 16, .gpus_per_stage = 8, .stages = 8, .p_blocking_w = 85};
  EXPECT_EQ(shape.gpus(), 1024);
  EXPECT_DOUBLE_EQ(cluster_energy_j({2.0, 1000.0}, shape), 1000.0 * 8 * 16);
  const std::vector<TimeEnergy> one = {{2.0, 1000.0}};
  EXPECT_THROW(straggler_iteration(one, shape, 0.9), InputError);
  // A single plan: the others can only block.
  EXPECT_DOUBLE_EQ(straggler_iteration(one, shape, 1.5).saving_pct(), 0.0);
}

}  // namespace
}  // namespace kareus::planner
