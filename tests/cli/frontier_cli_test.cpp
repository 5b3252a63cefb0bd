// The `kareus frontier` command end to end: outputs, and bad input as one line on stderr, exit 2,
// no output files.
#include <algorithm>
#include <cstdio>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

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
  const nlohmann::json plans = nlohmann::json::parse(slurp(dir_ / "out" / "plans.json"));
  EXPECT_EQ(plans.at("format"), "kareus-plan-set");
  ASSERT_EQ(plans.at("plans").size(), 3u);
  for (const nlohmann::json& plan : plans["plans"]) {
    EXPECT_EQ(plan.at("format"), "kareus-plan");
    EXPECT_EQ(plan.at("schedule"), "gpipe");
  }
  for (auto& entry : std::filesystem::directory_iterator(dir_ / "out")) {
    EXPECT_EQ(entry.path().filename().string().find(".tmp"), std::string::npos);
  }
}

// The summary says which limit stopped the local search: its rounds, its budget, or neither.
TEST_F(FrontierCli, TheSummarySaysWhatStoppedTheLocalSearch) {
  const std::string args =
      "frontier --profile " + kData + "gpt3-175b+a100_sxm_bf16.csv --stages 8 --microbatches 12 --p-blocking 83.64";
  const CliResult rounds = run(args + " --local-search-rounds 1");
  ASSERT_EQ(rounds.exit_code, 0) << rounds.err;
  EXPECT_TRUE(contains(rounds.out, "stopped after its 1 rounds (--local-search-rounds")) << rounds.out;
  const CliResult budget = run(args + " --local-search-budget 1e6");
  ASSERT_EQ(budget.exit_code, 0) << budget.err;
  EXPECT_TRUE(contains(budget.out, "stopped by its budget after 2 rounds (--local-search-budget; ")) << budget.out;
  const CliResult none = run(args + " --local-search-rounds 0");
  EXPECT_TRUE(contains(none.out, "no local search")) << none.out;
}

// --bound: the CSV gains a bound_j column no plan is below, and the summary the worst plan's gap to it.
TEST_F(FrontierCli, BoundAddsTheRelaxationsBoundToTheCsvAndTheSummary) {
  const std::string args =
      "frontier --profile " + kData + "gpt3-175b+a100_sxm_bf16.csv --stages 8 --microbatches 12 --p-blocking 83.64 --bound";
  const CliResult csv = run(args + " --csv");
  ASSERT_EQ(csv.exit_code, 0) << csv.err;
  std::istringstream lines(csv.out);
  std::string line;
  std::getline(lines, line);
  EXPECT_EQ(line, "time_s,energy_j,planned_time_s,model_energy_j,bound_j");
  int rows = 0;
  double worst = 0;
  while (std::getline(lines, line)) {
    double time_s = 0, energy_j = 0, planned = 0, model = 0, bound_j = 0;
    ASSERT_EQ(std::sscanf(line.c_str(), "%lf,%lf,%lf,%lf,%lf", &time_s, &energy_j, &planned, &model, &bound_j), 5) << line;
    EXPECT_LE(bound_j, energy_j * (1 + 1e-8)) << line;
    worst = std::max(worst, energy_j / bound_j - 1);
    ++rows;
  }
  EXPECT_GT(rows, 100);
  EXPECT_LT(worst, 0.01);
  const CliResult summary = run(args + " --out " + path("out"));
  ASSERT_EQ(summary.exit_code, 0) << summary.err;
  EXPECT_TRUE(contains(summary.out, "Every plan within ")) << summary.out;
  EXPECT_TRUE(contains(summary.out, "of the least energy any plan of its time can spend")) << summary.out;
  // --out's frontier.csv is stdout's, and the plot draws the bound beside the front (with gnuplot).
  EXPECT_EQ(slurp(path("out") + "/frontier.csv"), csv.out);
  if (std::filesystem::exists(path("out") + "/frontier.svg")) {
    EXPECT_TRUE(contains(slurp(path("out") + "/frontier.svg"), "least energy any plan of its time can spend"));
  }
}

// The summary says which unit the solver walked and why: chosen from the table (refined from 1 ms
// while its options share units, as far as the walk's budget allows), or given.
TEST_F(FrontierCli, TheSummarySaysWhichUnitAndWhy) {
  const std::string args = "frontier --profile " + kData + "gpt3-175b+a100_sxm_bf16.csv --stages 8 --p-blocking 83.64";
  const CliResult small = run(args + " --microbatches 12 --local-search-rounds 0");
  ASSERT_EQ(small.exit_code, 0) << small.err;
  EXPECT_TRUE(contains(small.out, "unit 0.0002 s (chosen: 4.5% of adjacent options share a unit, 28.3% at 1 ms)"))
      << small.out;
  const CliResult big = run(args + " --microbatches 48 --local-search-rounds 0");
  ASSERT_EQ(big.exit_code, 0) << big.err;
  EXPECT_TRUE(contains(big.out, "unit 0.001 s (chosen: 28.3% of adjacent options share a unit; 0.0005 s would walk"))
      << big.out;
  const CliResult given = run(args + " --microbatches 12 --local-search-rounds 0 --unit-time 0.001");
  ASSERT_EQ(given.exit_code, 0) << given.err;
  EXPECT_TRUE(contains(given.out, "unit 0.001 s (given)")) << given.out;
  EXPECT_TRUE(contains(given.out, "unit 0.001 s, hull cost model")) << given.out;
}

// A valid irregular table (the issue's reproducer) once stopped with an internal error that the cost
// model was not convex. Its exact frontier, by enumerating the 2^3 · 3^3 plans (one stage: time and
// energy are the sums), is below; the summary says whether the local search converged.
TEST_F(FrontierCli, TheIssueReproducerYieldsItsExactFrontier) {
  const std::string profile = write("irregular.csv",
                                    "stage,instruction,frequency,time,energy\n"
                                    "0,forward,1410,0.016515391,5.294489256\n"
                                    "0,forward,1395,0.018304849,1.974897819\n"
                                    "0,backward,1410,0.024978143,8.536331892\n"
                                    "0,backward,1395,0.031397717,8.664798790\n"
                                    "0,backward,1380,0.031968636,8.516385082\n");
  const std::string args = "frontier --profile " + profile + " --stages 1 --microbatches 3 --p-blocking 60 --unit-time 0.0001";
  CliResult summary = run(args);
  ASSERT_EQ(summary.exit_code, 0) << summary.err;
  EXPECT_TRUE(contains(summary.out, "local search converged in")) << summary.out;
  CliResult r = run(args + " --csv");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::pair<double, double>> ours;
  std::istringstream lines(r.out);
  std::string line;
  std::getline(lines, line);
  while (std::getline(lines, line)) {
    ours.emplace_back(std::stod(line.substr(0, line.find(','))), std::stod(line.substr(line.find(',') + 1)));
  }
  const std::pair<double, double> exact[] = {{0.124481, 41.4925}, {0.126270, 38.1729}, {0.128060, 34.8533},
                                             {0.129849, 31.5337}, {0.136839, 31.5137}, {0.143830, 31.4938},
                                             {0.150820, 31.4738}};
  for (auto [time_s, energy_j] : exact) {
    double best = 1e300;
    for (auto [t, e] : ours) {
      if (t <= time_s + 1e-6) best = std::min(best, e);
    }
    EXPECT_NEAR(best, energy_j, 1e-4) << "at " << time_s << " s";
  }
}

// `kareus plan --stage-options` writes the composed table the frontier command reads: the default
// job (2 stages, 8 microbatches, P_blocking = summary.json's p_static_w, 85 W) has the plan's
// fastest plan on its frontier.
TEST_F(FrontierCli, ReadsTheComposedTableThatPlanWrites) {
  const std::string table = path("table.csv");
  CliResult plan = run("plan --out " + path("plan") + " --stage-options " + table);
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  ASSERT_TRUE(contains(slurp(dir_ / "plan" / "summary.json"), "\"p_static_w\": 85.0"));
  CliResult r = run("frontier --profile " + table + " --stages 2 --microbatches 8 --p-blocking 85 --csv");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto first_row = [](const std::string& csv) {
    const std::string row = csv.substr(csv.find('\n') + 1);
    return std::pair{std::stod(row.substr(0, row.find(','))), std::stod(row.substr(row.find(',') + 1))};
  };
  const auto [plan_time, plan_energy] = first_row(slurp(dir_ / "plan" / "frontier.csv"));
  const auto [time, energy] = first_row(r.out);
  EXPECT_NEAR(time, plan_time, 1e-6 * plan_time);
  EXPECT_LE(energy, plan_energy * (1 + 1e-6));
}

// The plan's certificate (summary.json's bound_gap at bound_gap_time_s) rests on the bound of the
// table it composed: the frontier command's bound of that table, read back from its CSV, gives the
// plan's worst plan the same gap (interpolated between the bounds of its two neighbouring plans).
TEST_F(FrontierCli, BoundsThePlansFrontAsThePlanSays) {
  const std::string table = path("table.csv");
  ASSERT_EQ(run("plan --out " + path("plan") + " --stage-options " + table).exit_code, 0);
  const auto summary = nlohmann::json::parse(slurp(dir_ / "plan" / "summary.json"));
  const double gap = summary["bound_gap"].get<double>(), at_s = summary["bound_gap_time_s"].get<double>();
  EXPECT_GT(gap, 0);
  EXPECT_LT(gap, 0.02);
  // (time, last column) of each data row.
  auto rows = [](const std::string& csv) {
    std::vector<std::pair<double, double>> out;
    std::istringstream in(csv.substr(csv.find('\n') + 1));
    for (std::string line; std::getline(in, line);) out.emplace_back(std::stod(line), std::stod(line.substr(line.rfind(',') + 1)));
    return out;
  };
  const auto plans = rows(slurp(dir_ / "plan" / "frontier.csv"));  // (time, energy)
  const auto worst = std::ranges::min_element(plans, {}, [&](const auto& p) { return std::abs(p.first - at_s); });
  ASSERT_NEAR(worst->first, at_s, 1e-7 * at_s) << "the worst plan is one of the plan's frontier";
  CliResult r = run("frontier --profile " + table + " --stages 2 --microbatches 8 --p-blocking " +
                    std::to_string(summary["p_static_w"].get<double>()) + " --bound --csv");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto bound = rows(r.out);  // (time, bound_j)
  const auto after = std::ranges::lower_bound(bound, std::pair{at_s, 0.0});
  ASSERT_TRUE(after != bound.begin() && after != bound.end()) << "inside the frontier command's front";
  const auto before = std::prev(after);
  const double w = (at_s - before->first) / (after->first - before->first);
  EXPECT_NEAR(worst->second / (before->second + w * (after->second - before->second)) - 1, gap, 1e-4);
}

// --relaxation-plans only adds to the front: each plan without it has one with it no slower and no
// dearer, and the summary gives the bound's line.
TEST_F(FrontierCli, RelaxationPlansOnlyAddToTheFront) {
  const std::string args =
      "frontier --profile " + kData + "bloom+a100_sxm_bf16.csv --stages 8 --microbatches 24 --p-blocking 83.64";
  auto plans = [](const std::string& csv) {
    std::vector<std::pair<double, double>> out;
    std::istringstream in(csv.substr(csv.find('\n') + 1));
    double time_s = 0, energy_j = 0;
    for (std::string line; std::getline(in, line);) {
      if (std::sscanf(line.c_str(), "%lf,%lf", &time_s, &energy_j) == 2) out.emplace_back(time_s, energy_j);
    }
    return out;
  };
  const CliResult without = run(args + " --csv"), with = run(args + " --csv --relaxation-plans");
  ASSERT_EQ(without.exit_code, 0) << without.err;
  ASSERT_EQ(with.exit_code, 0) << with.err;
  const auto before = plans(without.out), after = plans(with.out);
  ASSERT_FALSE(before.empty());
  EXPECT_NE(before, after) << "the plans enter BLOOM's front near its fastest plans";
  for (const std::pair<double, double>& q : before) {
    EXPECT_TRUE(std::ranges::any_of(after, [&](const std::pair<double, double>& p) {
      return p.first <= q.first * (1 + 1e-8) && p.second <= q.second * (1 + 1e-8);
    })) << q.first;
  }
  EXPECT_TRUE(contains(run(args + " --relaxation-plans").out, "Every plan within "));
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
      {profile("j.csv", header + "0,forward,1410,0.05,20\n0,backward,1410,0.1,40\n") + " --stages 1" + rest +
           " --unit-time 0", "--unit-time"},
      {profile("k.csv", header + "0,forward,1410,0.05,20\n0,backward,1410,0.1,40\n") + " --stages 1" + rest +
           " --unit-time fine", "--unit-time"},
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
