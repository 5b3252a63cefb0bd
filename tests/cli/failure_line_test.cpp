// The failure line is one line whatever the message quotes: a flag's value or a file's field may
// hold a newline or another control character (a fuzz finding: `--clocks $'90\n'`).
#include <gtest/gtest.h>

#include <stdexcept>

#include "kareus/cli/commands.hpp"
#include "kareus/core/error.hpp"

namespace kareus::cli {
namespace {

TEST(FailureLine, WritesControlCharactersOfTheMessageAsEscapes) {
  EXPECT_EQ(failure_line(InputError({"", 0, 0, "--clocks"}, "expected LO:HI:STEP, got '90\n'")),
            "kareus: error: field '--clocks': expected LO:HI:STEP, got '90\\n'\n");
  EXPECT_EQ(failure_line(InputError("a\r\x01\x7f\tb\xc3\xa9")), "kareus: error: a\\r\\x01\\x7f\\tb\xc3\xa9\n");
  EXPECT_EQ(failure_line(std::runtime_error("x\ny")),
            "kareus: error: x\\ny (a bug in kareus: please report it with the command that gave it)\n");
}

}  // namespace
}  // namespace kareus::cli
