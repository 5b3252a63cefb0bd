// What `kareus` exits with: 2 for bad input, 3 for the device or the environment, 70 for a bug,
// each a single line on stderr; the mapping, and the real command's bad input.
#include <gtest/gtest.h>

#include <filesystem>
#include <stdexcept>

#include "cli/cli_fixture.hpp"
#include "kareus/cli/commands.hpp"
#include "kareus/core/error.hpp"

namespace kareus::cli {
namespace {

TEST(ExitCode, EachKindOfFailureHasItsOwn) {
  EXPECT_EQ(exit_code_for(InputError({"plan.json", 0, 0, "stages"}, "missing")), ExitCode::kBadInput);
  EXPECT_EQ(exit_code_for(DeviceError("nvmlInit failed")), ExitCode::kDeviceOrEnvironment);
  EXPECT_EQ(exit_code_for(std::filesystem::filesystem_error("cannot create", std::make_error_code(std::errc::permission_denied))),
            ExitCode::kDeviceOrEnvironment);
  EXPECT_EQ(exit_code_for(InternalError("an invariant")), ExitCode::kInternal);
  EXPECT_EQ(exit_code_for(std::out_of_range("vector::at")), ExitCode::kInternal);
  EXPECT_EQ(static_cast<int>(ExitCode::kInternal), 70);
  EXPECT_NE(failure_line(std::out_of_range("vector::at")).find("a bug in kareus"), std::string::npos);
  EXPECT_EQ(failure_line(InputError("bad")), "kareus: error: bad\n");
}

class ExitCodeCli : public testing::CliTest {};

// A GPU the machine lacks is 3: tests/profile/profile_cli_test.cpp, PlanOnTheGpuWithoutOneIsOneClearLine.
TEST_F(ExitCodeCli, BadInputIsTwo) {
  testing::expect_one_line_error(run("plan --tp 3"), "--tp");
  testing::expect_one_line_error(run("simulate --plan " + path("missing.json")), "missing.json");
}

// A value CLI11 cannot convert is quoted back: a newline in it stays an escape, the line one line.
TEST_F(ExitCodeCli, AFlagThatDoesNotParseIsOneLineWhateverItQuotes) {
  const testing::CliResult r = run("plan --tp 'x\ny'");
  EXPECT_EQ(r.exit_code, 2);
  testing::expect_one_line_error(r, "--tp");
  EXPECT_NE(r.err.find("x\\ny"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace kareus::cli
