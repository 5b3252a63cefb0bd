// The `kareus frontier` command end to end: outputs, and bad input as one line on stderr, exit 2,
// no output files.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace {

const std::string kData = std::string(KAREUS_DATA_DIR) + "/perseus-sosp24/stage_profile/";

struct Result {
  int exit_code = -1;
  std::string out, err;
};

Result run(const std::string& args) {
  static int counter = 0;
  auto dir = std::filesystem::temp_directory_path() / ("kareus-cli-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto out_path = dir / ("out" + std::to_string(counter));
  auto err_path = dir / ("err" + std::to_string(counter++));
  std::string command = std::string(KAREUS_BINARY) + " " + args + " >" + out_path.string() + " 2>" + err_path.string();
  int status = std::system(command.c_str());
  auto slurp = [](const std::filesystem::path& p) {
    std::ifstream in(p);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  };
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(out_path), slurp(err_path)};
}

class FrontierCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("kareus-cli-out-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path write(const std::string& name, const std::string& content) {
    std::filesystem::create_directories(dir_ / "in");
    std::ofstream(dir_ / "in" / name) << content;
    return dir_ / "in" / name;
  }
  std::filesystem::path dir_;
};

TEST_F(FrontierCli, CsvPrintsTheFrontierOnly) {
  Result r = run("frontier --profile " + kData + "gpt3-175b+a100_sxm_bf16.csv --stages 8 --microbatches 4 "
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
  Result r = run("frontier --profile " + kData + "bloom+a100_sxm_bf16.csv --stages 8 --microbatches 4 "
                 "--p-blocking 83.64 --schedule gpipe --plans 3 --out " + (dir_ / "out").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(std::filesystem::exists(dir_ / "out" / "frontier.csv"));
  EXPECT_TRUE(std::filesystem::exists(dir_ / "out" / "plans.json"));
  std::ifstream plans(dir_ / "out" / "plans.json");
  std::stringstream text;
  text << plans.rdbuf();
  EXPECT_NE(text.str().find("\"format\": \"kareus-plan\""), std::string::npos);
  EXPECT_NE(text.str().find("\"schedule\": \"gpipe\""), std::string::npos);
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
    return "--profile " + write(name, body).string();
  };
  const std::string rest = " --microbatches 4 --p-blocking 80 --out " + (dir_ / "out").string();
  std::vector<Bad> cases = {
      {"--profile /nonexistent.csv --stages 1" + rest, "no such file"},
      {profile("a.csv", header + "0,forward,1410,x,20\n0,backward,1410,0.1,40\n") + " --stages 1" + rest, ":2:"},
      {profile("b.csv", header + "0,forward,1410,0.05,20\n") + " --stages 1" + rest, "no backward options"},
      {profile("c.csv", header + "3,forward,1410,0.05,20\n") + " --stages 2" + rest, "outside 0..1"},
      {profile("d.csv", "") + " --stages 1" + rest, "empty"},
      {profile("e.csv", header + "0,forward,1410,0.05,20\n0,backward,1410,0.1,40\n") + " --stages 0" + rest, "--stages"},
      {profile("f.csv", header + "0,forward,1410,0.05,20\n0,backward,1410,0.1,40\n") +
           " --stages 1 --microbatches 0 --p-blocking 80 --out " + (dir_ / "out").string(), "--microbatches"},
      {profile("g.csv", header + "0,forward,1410,0.05,2\n0,backward,1410,0.1,4\n") + " --stages 1" + rest,
       "P_blocking"},
      {profile("h.csv", header + "0,forward,1410,0.05,20\n0,backward,1410,0.1,40\n") + " --stages 1" + rest +
           " --schedule zigzag", "--schedule"},
  };
  for (const Bad& c : cases) {
    Result r = run("frontier " + c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << c.args << "\n" << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_FALSE(std::filesystem::exists(dir_ / "out")) << c.args;
  }
}

}  // namespace
