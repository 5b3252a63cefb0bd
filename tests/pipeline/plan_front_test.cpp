// The front of a solve's plans (plan_front.hpp): an online Pareto set with a same-time tolerance.
#include "kareus/pipeline/plan_front.hpp"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <vector>

#include "kareus/core/pareto.hpp"

namespace kareus::pipeline {
namespace {

FrontierPoint plan_at(double time_s, double energy_j) {
  FrontierPoint p;
  p.time_s = time_s;
  p.energy_j = energy_j;
  return p;
}

// Far apart in time and energy, the tolerances never matter: the front is the offered points'
// Pareto set, whatever the order they come in, and a point enters exactly when no earlier one
// dominates it.
RC_GTEST_PROP(PlanFront, IsTheParetoSetOfWellSeparatedPlans, ()) {
  const auto count = *rc::gen::inRange<std::size_t>(1, 60);
  std::vector<TimeEnergy> offered;
  PlanFront<int> front;
  for (std::size_t k = 0; k < count; ++k) {
    const TimeEnergy p{*rc::gen::inRange(1, 200) * 1e-3, *rc::gen::inRange(100, 300) * 1.0};
    const bool dominated_before =
        std::ranges::any_of(offered, [&](const TimeEnergy& q) { return q.time_s <= p.time_s && q.energy_j <= p.energy_j; });
    RC_ASSERT(front.offer(plan_at(p.time_s, p.energy_j), static_cast<int>(k)) == !dominated_before);
    offered.push_back(p);
  }
  std::vector<TimeEnergy> kept;
  for (const auto& [time_s, plan] : front.plans()) kept.push_back(plan.point.time_energy());
  std::vector<TimeEnergy> expected = pareto_front(offered);
  std::ranges::sort(expected, {}, &TimeEnergy::time_s);
  RC_ASSERT(kept.size() == expected.size());
  for (std::size_t i = 0; i < kept.size(); ++i) {
    RC_ASSERT(kept[i].time_s == expected[i].time_s);
    RC_ASSERT(kept[i].energy_j == expected[i].energy_j);
  }
  RC_ASSERT(front.offered() == static_cast<long>(count));
}

// Plans a few nanoseconds apart (as the local search finds them): the kept energies strictly fall
// as time grows, and every plan offered keeps one in the front no slower than its time plus twice
// the tolerance (a refused plan's dominator may itself give way to one within the tolerance of
// its anchor) and no costlier beyond the energy tolerance.
RC_GTEST_PROP(PlanFront, KeepsAPlanNearEveryPlanOfferedAmongNearTies, ()) {
  const auto count = *rc::gen::inRange<std::size_t>(1, 80);
  std::vector<TimeEnergy> offered;
  PlanFront<int> front;
  for (std::size_t k = 0; k < count; ++k) {
    const double time_s = 1.0 + *rc::gen::inRange(0, 40) * 4e-9;
    const double energy_j = 1000.0 + *rc::gen::inRange(0, 40) * 1e-6;
    front.offer(plan_at(time_s, energy_j));
    offered.push_back({time_s, energy_j});
  }
  const auto& plans = front.plans();
  RC_ASSERT(!plans.empty());
  for (auto it = std::next(plans.begin()); it != plans.end(); ++it) {
    RC_ASSERT(it->second.point.energy_j < std::prev(it)->second.point.energy_j);
  }
  for (const TimeEnergy& p : offered) {
    const bool covered = std::ranges::any_of(plans, [&](const auto& kept) {
      return kept.second.point.time_s <= p.time_s + 2 * PlanFront<int>::same_time_s(p.time_s) * (1 + 1e-12) &&
             kept.second.point.energy_j <= p.energy_j * (1 + 1e-9 * static_cast<double>(count));
    });
    RC_ASSERT(covered);
  }
}

}  // namespace
}  // namespace kareus::pipeline
