// Where each rank sits among the TP and CP groups, against a reference that enumerates the groups
// the way Megatron builds them: global rank = block·tp·cp + cp_index·tp + tp_index.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <map>
#include <set>

#include "kareus/core/error.hpp"
#include "kareus/profile/group.hpp"

namespace kareus::profile {
namespace {

using workload::ParallelGroup;

RC_GTEST_PROP(GroupPlace, MatchesMegatronsEnumeration, ()) {
  const int tp = *rc::gen::element(1, 2, 4, 8);
  const int cp = *rc::gen::element(1, 2, 4);
  const int blocks = *rc::gen::inRange(1, 4);
  const int world = tp * cp * blocks;
  // Reference: the member lists of every group.
  std::set<std::vector<int>> tp_groups, cp_groups;
  for (int b = 0; b < blocks; ++b) {
    for (int c = 0; c < cp; ++c) {
      std::vector<int> g;
      for (int t = 0; t < tp; ++t) g.push_back(b * tp * cp + c * tp + t);
      tp_groups.insert(g);
    }
    for (int t = 0; t < tp; ++t) {
      std::vector<int> g;
      for (int c = 0; c < cp; ++c) g.push_back(b * tp * cp + c * tp + t);
      cp_groups.insert(g);
    }
  }
  for (auto [kind, reference] : {std::pair{ParallelGroup::kTensor, &tp_groups}, std::pair{ParallelGroup::kContext, &cp_groups}}) {
    std::map<int, std::map<int, int>> members;  // color -> key -> rank
    for (int r = 0; r < world; ++r) {
      GroupPlace place = group_place(r, world, tp, cp, kind);
      RC_ASSERT(members[place.color].emplace(place.key, r).second);  // keys distinct in a group
    }
    std::set<std::vector<int>> got;
    for (const auto& [color, by_key] : members) {
      std::vector<int> g;
      int expected_key = 0;
      for (const auto& [key, rank] : by_key) {
        RC_ASSERT(key == expected_key++);  // keys 0..n-1
        g.push_back(rank);
      }
      got.insert(g);
    }
    RC_ASSERT(got == *reference);
  }
}

TEST(GroupPlace, AWorldThatHoldsNoWholeGroupsIsAnInputError) {
  EXPECT_THROW(group_place(0, 6, 4, 1, ParallelGroup::kTensor), InputError);
  EXPECT_THROW(group_place(0, 4, 4, 2, ParallelGroup::kContext), InputError);
}

TEST(LocalGroup, IsOneRankThatKeepsItsData) {
  LocalGroup g;
  std::string data = "knob";
  g.broadcast(data);
  EXPECT_EQ(data, "knob");
  EXPECT_EQ(g.gather({1.5, 2.5}), (std::vector<double>{1.5, 2.5}));
  EXPECT_EQ(g.min_max(7), std::make_pair(std::int64_t{7}, std::int64_t{7}));
  EXPECT_EQ(g.split(3, 0)->size(), 1);
}

}  // namespace
}  // namespace kareus::profile
