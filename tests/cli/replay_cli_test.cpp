// The `kareus replay` command end to end: a plan from `kareus frontier` replays through the runtime
// on fake GPUs with exactly the plan's time and energy; a straggler replay of the real planner's
// frontier saves energy; bad input is one line, exit code 2.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <sstream>
#include <vector>

#include "cli_fixture.hpp"

namespace kareus::testing {
namespace {

class ReplayCli : public CliTest {
 protected:
  // One `kareus frontier` run for the whole suite; its plan set is what the tests replay.
  static void SetUpTestSuite() {
    suite_dir_ = std::filesystem::temp_directory_path() /
                 ("kareus-cli-" + std::to_string(::getpid()) + "-ReplayCli-suite");
    std::filesystem::remove_all(suite_dir_);
    std::filesystem::create_directories(suite_dir_);
    const std::string profile = std::string(KAREUS_DATA_DIR) +
                                "/perseus-sosp24/stage_profile/gpt3-175b+a100_sxm_bf16.csv";
    const CliResult r = run_kareus("frontier --profile " + profile +
                                       " --stages 8 --microbatches 4 --p-blocking 83.64 --plans 3"
                                       " --out " + (suite_dir_ / "frontier").string(),
                                   suite_dir_, "-frontier");
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  static void TearDownTestSuite() { std::filesystem::remove_all(suite_dir_); }

  static std::string plans() { return (suite_dir_ / "frontier" / "plans.json").string(); }
  static inline std::filesystem::path suite_dir_;
};

TEST_F(ReplayCli, EveryPlanOfASetReplaysExactly) {
  for (int index = 0; index < 3; ++index) {
    CliResult r = run("replay --plan " + plans() + " --index " + std::to_string(index) +
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
  const std::string plan = write("plan.json", set["plans"][1].dump());
  CliResult r = run("replay --plan " + plan + " --gpu fake --energy-log " + path("energy.csv"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("Measured time and energy match the plan"), std::string::npos) << r.out;
  std::string log = slurp(path("energy.csv"));
  EXPECT_EQ(log.rfind("start_time,window_name,elapsed_time,gpu0_energy,gpu1_energy,", 0), 0u)
      << log;
  EXPECT_NE(log.find(",iteration 0,"), std::string::npos) << log;
  // Deterministic: the same replay prints the same numbers.
  CliResult again = run("replay --plan " + plan);
  EXPECT_EQ(again.out, r.out.substr(0, r.out.find("Wrote the energy log")));
}

TEST_F(ReplayCli, BadInputIsOneLineAndExitCode2) {
  CliResult no_index = run("replay --plan " + plans());
  EXPECT_EQ(no_index.exit_code, 2);
  EXPECT_NE(no_index.err.find("holds 3 plans; choose one with --index 0..2"), std::string::npos)
      << no_index.err;
  EXPECT_EQ(std::count(no_index.err.begin(), no_index.err.end(), '\n'), 1);

  CliResult out_of_range = run("replay --plan " + plans() + " --index 9");
  EXPECT_EQ(out_of_range.exit_code, 2);
  EXPECT_NE(out_of_range.err.find("index 9 is out of range"), std::string::npos)
      << out_of_range.err;

  CliResult nvml = run("replay --plan " + plans() + " --index 0 --gpu nvml");
  EXPECT_EQ(nvml.exit_code, 2);

  CliResult missing = run("replay --plan " + path("missing.json"));
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("missing.json"), std::string::npos) << missing.err;
}

// The tokens of the table row of iteration `iteration` in a straggler replay's output.
std::vector<std::string> straggler_row(const std::string& out, int iteration) {
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    std::istringstream cells(line);
    std::vector<std::string> row;
    for (std::string cell; cells >> cell;) row.push_back(cell);
    if (row.size() == 7 && row[0] == std::to_string(iteration) && row[6].back() == '%') return row;
  }
  ADD_FAILURE() << "no row for iteration " << iteration << " in:\n" << out;
  return std::vector<std::string>(7, "0");
}

TEST_F(ReplayCli, AStragglersSlowdownLowersTheOtherPipelinesEnergy) {
  // The real planner's frontier (Llama 3.2 3B, TP 8, PP 2, four microbatches, simulated A100).
  const CliResult planned = run("plan --microbatches 4 --out " + path("plan"));
  ASSERT_EQ(planned.exit_code, 0) << planned.err;
  const auto set = nlohmann::json::parse(slurp(path("plan/plans.json")))["plans"];
  double fastest_s = 1e300, slowest_s = 0;
  for (const auto& p : set) {
    fastest_s = std::min(fastest_s, p["time_s"].get<double>());
    slowest_s = std::max(slowest_s, p["time_s"].get<double>());
  }
  double previous_energy_j = 1e300, previous_saved_j = -1;
  for (double slowdown : {1.05, 1.1, 1.2, 1.5}) {
    SCOPED_TRACE(slowdown);
    const CliResult r = run("replay --plan " + path("plan/plans.json") + " --straggler " +
                            fmt::format("{}@iteration:1", slowdown) + " --iterations 2");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(contains(r.out, "Measured energy matches the plans'")) << r.out;
    const auto before = straggler_row(r.out, 0), after = straggler_row(r.out, 1);
    EXPECT_EQ(before[6], "0.00%") << "iteration 0 runs the fastest plan, no straggler yet";
    const double plan_s = std::stod(after[2]), time_s = std::stod(after[3]);
    const double energy_j = std::stod(after[4]), stay_j = std::stod(after[5]);
    EXPECT_NEAR(time_s, slowdown * fastest_s, 1e-3) << "the iteration waits for the straggler";
    EXPECT_LE(plan_s, time_s + 1e-4) << "the plan switched to still meets the straggler's time";
    EXPECT_LT(energy_j, stay_j);
    // More slowdown, more saved, and the energy itself falls, while the frontier reaches that
    // far; past its slowest plan both pipelines idle at the same power, so the saving holds, to
    // the printed 0.1 J: each of the four energies compared is rounded by up to 0.05 J.
    if (slowdown * fastest_s <= slowest_s) {
      EXPECT_GT(stay_j - energy_j, previous_saved_j);
      EXPECT_LT(energy_j, previous_energy_j);
    } else {
      EXPECT_GE(stay_j - energy_j, previous_saved_j - 0.2 - 1e-9);
    }
    previous_energy_j = energy_j, previous_saved_j = stay_j - energy_j;
  }
  expect_one_line_error(run("replay --plan " + path("plan/plans.json") + " --straggler 1.2"),
                        "expected SLOWDOWN@iteration:N");
  expect_one_line_error(
      run("replay --plan " + path("plan/plans.json") + " --index 0 --straggler 1.2@iteration:1"),
      "drop --index");
  expect_one_line_error(run("replay --plan " + path("plan/plans.json") + " --straggler 0.5@iteration:1"),
                        "at least 1");
}

}  // namespace
}  // namespace kareus::testing
