// Tests of the shared, immutable JSON value a plan's knobs are kept in: copies share a tree,
// equality is by value, and a pool gives equal values (and only those) one tree.
#include "kareus/core/shared_json.hpp"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <string>
#include <vector>

namespace kareus {
namespace {

using nlohmann::json;

TEST(SharedJson, NullUntilGivenAValueAndCopiesShareTheTree) {
  const SharedJson none;
  EXPECT_TRUE(none.is_null());
  EXPECT_TRUE(none->is_null());
  EXPECT_EQ(none, SharedJson(nullptr));
  EXPECT_TRUE(SharedJson(json()).is_null()) << "a JSON null is the null knob";

  const SharedJson knob(json{{"partitions", {{{"key", "fwd_mlp"}, {"sms", 12}, {"slot", "act_0"}}}}});
  const SharedJson copy = knob;  // NOLINT(performance-unnecessary-copy-initialization): the copy is the point
  EXPECT_EQ(&*copy, &*knob);
  EXPECT_EQ((*copy)["partitions"][0]["sms"], 12);
  EXPECT_NE(knob, none);
}

TEST(SharedJson, EqualByValueNotByTree) {
  const json value = {{"sm_clock", "1410"}, {"mode", "fast"}};
  const SharedJson a(value), b(value);
  EXPECT_NE(&*a, &*b);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, SharedJson(json{{"sm_clock", "1395"}, {"mode", "fast"}}));
}

// Values drawn from a handful of shapes so that equal ones recur.
json small_value(int shape, int number) {
  switch (shape % 4) {
    case 0: return json{{"sms", number}};
    case 1: return json{{"partitions", {{{"key", "fwd_attn"}, {"sms", number}}}}};
    case 2: return json::array({number, number + 1});
    default: return json(std::to_string(number));
  }
}

RC_GTEST_PROP(SharedJsonPool, EqualValuesShareOneTreeAndDistinctOnesNever, ()) {
  const auto draws = *rc::gen::container<std::vector<std::pair<int, int>>>(
      rc::gen::pair(rc::gen::inRange(0, 4), rc::gen::inRange(0, 3)));
  SharedJsonPool pool;
  std::vector<json> values;
  std::vector<SharedJson> interned;
  for (const auto& [shape, number] : draws) {
    values.push_back(small_value(shape, number));
    interned.push_back(pool.intern(values.back()));
  }
  for (std::size_t i = 0; i < values.size(); ++i) {
    RC_ASSERT(*interned[i] == values[i]);
    for (std::size_t j = 0; j < i; ++j) {
      RC_ASSERT((values[i] == values[j]) == (&*interned[i] == &*interned[j]));
    }
  }
  RC_ASSERT(pool.intern(json()).is_null());
}

}  // namespace
}  // namespace kareus
