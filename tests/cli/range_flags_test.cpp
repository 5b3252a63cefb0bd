// The range flags' parser (cli/range_flags.hpp): LO:HI:STEP and A,B,C, bounded so that a step too
// small to reach HI is bad input instead of a loop that never ends (a fuzz finding on --sms).
#include "kareus/cli/range_flags.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kareus/core/error.hpp"

namespace kareus::cli {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string refusal(const std::string& text) {
  try {
    parse_numbers(text, "--sms");
  } catch (const InputError& e) {
    return e.what();
  }
  return "accepted";
}

TEST(RangeFlags, ExpandsARangeAsTheCommandsDidAndReadsAList) {
  EXPECT_THAT(range_values(parse_range("3:12:3", "--sms")), ElementsAre(3, 6, 9, 12));
  EXPECT_EQ(range_values(parse_range("900:1410:30", "--clocks")).size(), 18u);
  EXPECT_THAT(range_values(parse_range("5:5:1", "--sms")), ElementsAre(5));
  EXPECT_THAT(parse_numbers("6,12,24", "--sms"), ElementsAre(6, 12, 24));
  EXPECT_THAT(parse_numbers("1:2:0.5", "--sms"), ElementsAre(1, 1.5, 2));
}

TEST(RangeFlags, ATinyStepIsBadInputNotAnEndlessLoop) {
  EXPECT_THAT(refusal("1:2:1e-300"), HasSubstr("field '--sms': '1:2:1e-300' gives more than 100000 values"));
  EXPECT_THAT(refusal("0:1e300:1"), HasSubstr("gives more than"));
  EXPECT_THAT(refusal("2:1:1"), HasSubstr("expected LO <= HI and STEP > 0"));
  EXPECT_THAT(refusal("1:2:0"), HasSubstr("expected LO <= HI and STEP > 0"));
  EXPECT_THAT(refusal("1:2:nan"), HasSubstr("expected LO:HI:STEP, got '1:2:nan'"));
  EXPECT_THAT(refusal("1:2"), HasSubstr("expected LO:HI:STEP"));
  EXPECT_THAT(refusal("6,,24"), HasSubstr("expected LO:HI:STEP or A,B,C"));
}

}  // namespace
}  // namespace kareus::cli
