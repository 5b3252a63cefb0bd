// The `kareus replay` command end to end: a plan from `kareus frontier` replays through the runtime
// on fake GPUs with exactly the plan's time and energy; bad input is one line, exit code 2.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace {

namespace fs = std::filesystem;

struct Result {
  int exit_code = -1;
  std::string out, err;
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class ReplayCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("kareus-replay-cli-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    Result r = run("frontier --profile " + std::string(KAREUS_DATA_DIR) +
                   "/perseus-sosp24/stage_profile/gpt3-175b+a100_sxm_bf16.csv --stages 8 "
                   "--microbatches 4 --p-blocking 83.64 --plans 3 --out " +
                   (dir_ / "frontier").string());
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  static Result run(const std::string& args) {
    static int counter = 0;
    auto out_path = dir_ / ("out" + std::to_string(counter));
    auto err_path = dir_ / ("err" + std::to_string(counter++));
    std::string command = std::string(KAREUS_BINARY) + " " + args + " >" + out_path.string() +
                          " 2>" + err_path.string();
    int status = std::system(command.c_str());
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(out_path), slurp(err_path)};
  }
  static fs::path plans() { return dir_ / "frontier" / "plans.json"; }
  static inline fs::path dir_;
};

TEST_F(ReplayCli, EveryPlanOfASetReplaysExactly) {
  for (int index = 0; index < 3; ++index) {
    Result r = run("replay --plan " + plans().string() + " --index " + std::to_string(index) +
                   " --iterations 2");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("on 8 fake GPUs, one per stage (simulated"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("Energy: one GPU per pipeline stage (8 GPUs)"), std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("Measured time and energy match the plan"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("\n  stage "), std::string::npos) << r.out;
  }
}

TEST_F(ReplayCli, ASinglePlanFileAndItsEnergyLog) {
  nlohmann::json set = nlohmann::json::parse(slurp(plans()));
  std::ofstream(dir_ / "plan.json") << set["plans"][1].dump();
  Result r = run("replay --plan " + (dir_ / "plan.json").string() + " --gpu fake --energy-log " +
                 (dir_ / "energy.csv").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("Measured time and energy match the plan"), std::string::npos) << r.out;
  std::string log = slurp(dir_ / "energy.csv");
  EXPECT_EQ(log.rfind("start_time,window_name,elapsed_time,gpu0_energy,gpu1_energy,", 0), 0u)
      << log;
  EXPECT_NE(log.find(",iteration 0,"), std::string::npos) << log;
  // Deterministic: the same replay prints the same numbers.
  Result again = run("replay --plan " + (dir_ / "plan.json").string());
  EXPECT_EQ(again.out, r.out.substr(0, r.out.find("Wrote the energy log")));
}

TEST_F(ReplayCli, BadInputIsOneLineAndExitCode2) {
  Result no_index = run("replay --plan " + plans().string());
  EXPECT_EQ(no_index.exit_code, 2);
  EXPECT_NE(no_index.err.find("holds 3 plans; choose one with --index 0..2"), std::string::npos)
      << no_index.err;
  EXPECT_EQ(std::count(no_index.err.begin(), no_index.err.end(), '\n'), 1);

  Result out_of_range = run("replay --plan " + plans().string() + " --index 9");
  EXPECT_EQ(out_of_range.exit_code, 2);
  EXPECT_NE(out_of_range.err.find("index 9 is out of range"), std::string::npos)
      << out_of_range.err;

  Result nvml = run("replay --plan " + plans().string() + " --index 0 --gpu nvml");
  EXPECT_EQ(nvml.exit_code, 2);

  Result missing = run("replay --plan " + (dir_ / "missing.json").string());
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("missing.json"), std::string::npos) << missing.err;
}

}  // namespace
