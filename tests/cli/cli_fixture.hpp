// Running the built `kareus` binary from a test: each test gets its own scratch directory, and each
// run's exit code, stdout and stderr come back as strings.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace kareus::testing {

struct CliResult {
  int exit_code = -1;
  std::string out, err;
};

inline std::string slurp(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

inline bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// A failure is one line on stderr, "kareus: error: ...", with its exit code: 2 for bad input (the
// default here), 3 for the device or the environment (kareus::cli::ExitCode).
inline void expect_one_line_error(const CliResult& r, const std::string& fragment, int exit_code = 2) {
  EXPECT_EQ(r.exit_code, exit_code) << r.err;
  EXPECT_EQ(r.err.rfind("kareus: error: ", 0), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_TRUE(contains(r.err, fragment)) << "expected '" << fragment << "' in: " << r.err;
}

// Runs `kareus <args>` in the shell (args are not quoted for you), with stdout and stderr going to
// `dir`/stdout<tag> and `dir`/stderr<tag>. For runs outside a CliTest, e.g. in SetUpTestSuite.
inline CliResult run_kareus(const std::string& args, const std::filesystem::path& dir,
                            const std::string& tag) {
  const auto out = dir / ("stdout" + tag);
  const auto err = dir / ("stderr" + tag);
  const std::string command = std::string(KAREUS_BINARY) + " " + args + " >" + out.string() + " 2>" + err.string();
  const int status = std::system(command.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(out), slurp(err)};
}

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::temp_directory_path() /
           ("kareus-cli-" + std::to_string(::getpid()) + "-" + info->test_suite_name() + "-" + info->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Runs `kareus <args>` in the shell (args are not quoted for you).
  CliResult run(const std::string& args) { return run_kareus(args, dir_, std::to_string(runs_++)); }

  // Writes `content` to a file in the scratch directory and returns its path.
  std::string write(const std::string& name, const std::string& content) {
    std::ofstream(dir_ / name, std::ios::binary) << content;
    return (dir_ / name).string();
  }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  std::filesystem::path dir_;
  int runs_ = 0;
};

}  // namespace kareus::testing
