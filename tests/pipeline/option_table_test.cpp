#include "kareus/pipeline/option_table.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "kareus/core/error.hpp"

namespace kareus::pipeline {
namespace {

class OptionTableFile : public ::testing::Test {
 protected:
  std::filesystem::path write(const std::string& content) {
    std::filesystem::path path = std::filesystem::temp_directory_path() /
                                 ("kareus-option-table-" + std::to_string(::getpid()) + ".csv");
    std::ofstream(path) << content;
    paths_.push_back(path);
    return path;
  }
  void TearDown() override {
    for (auto& p : paths_) std::filesystem::remove(p);
  }
  // The message of the InputError that reading `content` for `stages` stages raises.
  std::string error_of(const std::string& content, int stages = 1) {
    try {
      read_option_table(write(content), stages);
    } catch (const InputError& e) {
      return e.what();
    }
    return "no error";
  }
  std::vector<std::filesystem::path> paths_;
};

const std::string kHeader = "stage,instruction,frequency,time,energy\n";
const std::string kGood = kHeader + "0,forward,1410,0.05,20\n0,backward,1410,0.1,40\n";

TEST_F(OptionTableFile, ReadsOptionsAndCarriesExtraColumnsAsKnob) {
  auto table = read_option_table(
      write("stage,instruction,frequency,time,energy,sms,slot\n0,forward,1410,0.05,20,12,linear_1\n"
            "0,backward,1200,0.1,40,6,none\n"),
      1);
  ASSERT_EQ(table.at(0, schedule::InstructionType::kForward).size(), 1u);
  const StageOption& o = table.at(0, schedule::InstructionType::kForward)[0];
  EXPECT_EQ(o.freq_mhz, 1410);
  EXPECT_EQ((*o.knob)["sms"], "12");
  EXPECT_EQ((*o.knob)["slot"], "linear_1");
}

TEST_F(OptionTableFile, BadInputNamesFileLineAndField) {
  EXPECT_NE(error_of(kHeader + "0,forward,1410,abc,20\n0,backward,1410,0.1,40\n").find(":2:"), std::string::npos);
  EXPECT_NE(error_of(kHeader + "0,forward,1410,abc,20\n0,backward,1410,0.1,40\n").find("field 'time'"), std::string::npos);
  EXPECT_NE(error_of(kHeader + "0,forward,1410,nan,20\n0,backward,1410,0.1,40\n").find("not finite"), std::string::npos);
  EXPECT_NE(error_of(kHeader + "0,forward,1410,inf,20\n0,backward,1410,0.1,40\n").find("not finite"), std::string::npos);
  EXPECT_NE(error_of(kHeader + "0,forward,1410,0.05,-2\n0,backward,1410,0.1,40\n").find("field 'energy'"), std::string::npos);
  EXPECT_NE(error_of(kHeader + "0,forward,1410,0,20\n0,backward,1410,0.1,40\n").find("must be positive"), std::string::npos);
  EXPECT_NE(error_of(kHeader + "0,forward,1410,0.05,20\n1,backward,1410,0.1,40\n").find("outside 0..0"), std::string::npos);
  EXPECT_NE(error_of(kHeader + "0,sideways,1410,0.05,20\n").find("field 'instruction'"), std::string::npos);
  EXPECT_NE(error_of(kHeader + "0,forward,1410,0.05,20\n").find("no backward options"), std::string::npos);
  EXPECT_NE(error_of(kGood, 2).find("stage 1 has no forward options"), std::string::npos);
  EXPECT_NE(error_of("stage,instruction,frequency,time\n0,forward,1410,0.05\n").find("field 'energy'"), std::string::npos);
  EXPECT_NE(error_of("").find("empty"), std::string::npos);
  EXPECT_NE(error_of(kHeader).find("no data rows"), std::string::npos);
  EXPECT_NE(error_of(kHeader + "0,forward,1410,0.05\n").find("expected 5 fields"), std::string::npos);
  EXPECT_THROW(read_option_table("/nonexistent/profile.csv", 1), InputError);
  EXPECT_EQ(error_of(kGood), "no error");
}

// A profile may carry B and W rows of its own: they fill the zero-bubble slots, one without the
// other is an error, and a forward/backward profile has neither.
TEST_F(OptionTableFile, BackwardInputAndWeightRowsFillTheirSlots) {
  const OptionTable plain = read_option_table(write(kGood), 1);
  EXPECT_FALSE(plain.splits_backward());
  const OptionTable split = read_option_table(
      write(kGood + "0,backward_input,1410,0.06,25\n0,backward_weight,1410,0.04,15\n0,backward_weight,1200,0.05,13\n"), 1);
  EXPECT_TRUE(split.splits_backward());
  ASSERT_EQ(split.at(0, schedule::OptionSlot::kBackwardInput).size(), 1u);
  ASSERT_EQ(split.at(0, schedule::OptionSlot::kBackwardWeight).size(), 2u);
  EXPECT_EQ(split.at(0, schedule::OptionSlot::kBackwardWeight)[1].freq_mhz, 1200);
  EXPECT_EQ(split.at(0, schedule::OptionSlot::kBackwardInput)[0].time_s, 0.06);
  EXPECT_NE(error_of(kGood + "0,backward_input,1410,0.06,25\n").find("no backward_weight"), std::string::npos);
  for (schedule::OptionSlot slot : schedule::kAllOptionSlots) EXPECT_EQ(schedule::parse_option_slot(to_string(slot)), slot);
}

}  // namespace
}  // namespace kareus::pipeline
