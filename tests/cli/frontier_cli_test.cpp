// The `kareus frontier` command end to end: outputs, and bad input as one line on stderr, exit 2,
// no output files.
#include <vector>

#include "cli_fixture.hpp"

namespace kareus::testing {
namespace {

const std::string kData = std::string(KAREUS_DATA_DIR) + "/perseus-sosp24/stage_profile/";

using FrontierCli = CliTest;

TEST_F(FrontierCli, CsvPrintsTheFrontierOnly) {
  CliResult r = run("frontier --profile " + kData + "gpt3-175b+a100_sxm_bf16.csv --stages 8 --microbatches 4 "
                    "--p-blocking 83.64 --csv");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(r.out.rfind("time_s,energy_j", 0), 0u);
  std::istringstream lines(r.out);
  std::string line;
  std::getline(lines, line);
  double last_time = 0, last_energy = 1e300;
  int rows = 0;
  while (std::getline(lines, line)) {
    double t = std::stod(line.substr(0, line.find(',')));
    double e = std::stod(line.substr(line.find(',') + 1));
    EXPECT_GT(t, last_time);
    EXPECT_LT(e, last_energy);
    last_time = t, last_energy = e;
    ++rows;
  }
  EXPECT_GT(rows, 10);
}

TEST_F(FrontierCli, OutWritesFrontierPlansAndPlot) {
  CliResult r = run("frontier --profile " + kData + "bloom+a100_sxm_bf16.csv --stages 8 --microbatches 4 "
                    "--p-blocking 83.64 --schedule gpipe --plans 3 --out " + path("out"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(std::filesystem::exists(dir_ / "out" / "frontier.csv"));
  EXPECT_TRUE(std::filesystem::exists(dir_ / "out" / "plans.json"));
  const std::string plans = slurp(dir_ / "out" / "plans.json");
  EXPECT_TRUE(contains(plans, "\"format\": \"kareus-plan\""));
  EXPECT_TRUE(contains(plans, "\"schedule\": \"gpipe\""));
  for (auto& entry : std::filesystem::directory_iterator(dir_ / "out")) {
    EXPECT_EQ(entry.path().filename().string().find(".tmp"), std::string::npos);
  }
}

TEST_F(FrontierCli, BadInputIsOneLineExitTwoAndNoOutput) {
  const std::string header = "stage,instruction,frequency,time,energy\n";
  struct Bad {
    std::string args, expect;
  };
  auto profile = [&](const std::string& name, const std::string& body) {
    return "--profile " + write(name, body);
  };
  const std::string rest = " --microbatches 4 --p-blocking 80 --out " + path("out");
  std::vector<Bad> cases = {
      {"--profile /nonexistent.csv --stages 1" + rest, "no such file"},
      {profile("a.csv", header + "0,forward,1410,x,20\n0,backward,1410,0.1,40\n") + " --stages 1" + rest, ":2:"},
      {profile("b.csv", header + "0,forward,1410,0.05,20\n") + " --stages 1" + rest, "no backward options"},
      {profile("c.csv", header + "3,forward,1410,0.05,20\n") + " --stages 2" + rest, "outside 0..1"},
      {profile("d.csv", "") + " --stages 1" + rest, "empty"},
      {profile("e.csv", header + "0,forward,1410,0.05,20\n0,backward,1410,0.1,40\n") + " --stages 0" + rest, "--stages"},
      {profile("f.csv", header + "0,forward,1410,0.05,20\n0,backward,1410,0.1,40\n") +
           " --stages 1 --microbatches 0 --p-blocking 80 --out " + path("out"), "--microbatches"},
      {profile("g.csv", header + "0,forward,1410,0.05,2\n0,backward,1410,0.1,4\n") + " --stages 1" + rest,
       "g.csv: stage 0 forward: P_blocking"},
      {profile("h.csv", header + "0,forward,1410,0.05,20\n0,backward,1410,0.1,40\n") + " --stages 1" + rest +
           " --schedule zigzag", "--schedule"},
      {profile("i.csv", header + "0,forward,1410,0.05,20\n0,backward,1410,0.1,40\n") + " --stages 1" + rest +
           " --local-search-rounds -1", "--local-search-rounds"},
  };
  for (const Bad& c : cases) {
    CliResult r = run("frontier " + c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args << "\n" << r.err;
    EXPECT_TRUE(contains(r.err, c.expect)) << c.args << "\n" << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_FALSE(std::filesystem::exists(dir_ / "out")) << c.args;
  }
}

}  // namespace
}  // namespace kareus::testing
