// `kareus plan` and `kareus compare` on the interleaved schedule, the whole job's energy with
// several data-parallel pipelines and a straggler, and the schedules they (and `kareus frontier`)
// refuse.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "cli_fixture.hpp"
#include "kareus/core/csv.hpp"

namespace kareus::testing {
namespace {

using kareus::CsvTable;
using kareus::read_csv;
using ScheduleCli = CliTest;

const std::string kJob = " --layers-per-stage 14,14 --microbatches 8";

TEST_F(ScheduleCli, PlanWritesAnInterleavedPlanTheSimulatorReplaysExactly) {
  const CliResult r = run("plan --schedule interleaved --virtual-stages 2" + kJob + " --out " + path("out"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto plan = nlohmann::json::parse(slurp(path("out/plan.json")));
  EXPECT_EQ(plan["schedule"], "interleaved");
  EXPECT_EQ(plan["virtual_stages"], 2);
  ASSERT_EQ(plan["stages"][0]["instructions"].size(), 2u * 2 * 8);
  EXPECT_EQ(plan["stages"][0]["instructions"][2]["chunk"], 1);  // stage 0 warms up with F0.0 F1.0 F0.1 ...
  const auto summary = nlohmann::json::parse(slurp(path("out/summary.json")));
  EXPECT_EQ(summary["schedule"], "interleaved");
  EXPECT_EQ(summary["virtual_stages"], 2);
  const CliResult sim = run("simulate --plan " + path("out/plan.json") + " --no-p2p --switch-latency-ms 0 --json");
  ASSERT_EQ(sim.exit_code, 0) << sim.err;
  const auto f = nlohmann::json::parse(sim.out);
  EXPECT_NEAR(f["time_s"].get<double>(), plan["time_s"].get<double>(), 1e-12);
  EXPECT_NEAR(f["energy_j"].get<double>(), plan["energy_j"].get<double>(), 1e-9 * plan["energy_j"].get<double>());
}

TEST_F(ScheduleCli, CompareReportsTheWholeJobAndStragglers) {
  const CliResult r = run("compare --schedule interleaved --virtual-stages 2 --dp 4 --straggler 1.05,1.5" + kJob +
                          " --out " + path("cmp"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto report = nlohmann::json::parse(slurp(path("cmp/compare.json")));
  const auto& config = report["configs"][0];
  EXPECT_EQ(config["schedule"], "interleaved");
  EXPECT_TRUE(contains(config["cluster_energy_scope"].get<std::string>(), "all 64 GPUs")) << config["cluster_energy_scope"];
  for (const auto& m : config["methods"]) {
    ASSERT_EQ(m["stragglers"].size(), 2u);
    double last = -1;
    for (const auto& s : m["stragglers"]) {
      EXPECT_LE(s["cluster_energy_j"].get<double>(), s["cluster_energy_blocking_j"].get<double>() * (1 + 1e-12));
      EXPECT_LE(s["others_time_s"].get<double>(), s["iteration_time_s"].get<double>() * (1 + 1e-12));
      EXPECT_GE(s["saving_pct"].get<double>(), last - 1e-9);
      last = s["saving_pct"].get<double>();
    }
    // Megatron-LM has one plan: its other pipelines can only wait.
    if (m["method"] == "Megatron-LM") EXPECT_EQ(last, 0.0);
    else EXPECT_GT(last, 0.0) << m["method"];
  }
  // The job's name holds commas; both tables still parse as RFC 4180 with one name per row.
  for (const char* file : {"cmp/compare.csv", "cmp/stragglers.csv"}) {
    const CsvTable table = read_csv(path(file));
    ASSERT_GT(table.rows(), 0u) << file;
    const std::string& name = table.text(0, table.require_column("config"));
    EXPECT_TRUE(contains(name, "TP 8, CP 1")) << name;
  }
  EXPECT_EQ(read_csv(path("cmp/stragglers.csv")).rows(), 4u * 2);
}

TEST_F(ScheduleCli, ComparePlansZeroBubbleWithEveryMethod) {
  const CliResult r = run("compare --schedule zb-h1 --pp 4 --layers-per-stage 7,7,7,7 --dp 2 --out " + path("zb"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto config = nlohmann::json::parse(slurp(path("zb/compare.json")))["configs"][0];
  EXPECT_EQ(config["schedule"], "zb-h1");
  EXPECT_TRUE(config["left_out"].empty());
  std::vector<std::string> methods;
  for (const auto& m : config["methods"]) methods.push_back(m["method"]);
  EXPECT_EQ(methods, (std::vector<std::string>{"Megatron-LM", "Perseus", "Nanobatching+Perseus", "Kareus"}));
  // Kareus's frontier holds Perseus's plans, so it is at least as fast at every energy.
  const auto& perseus = config["methods"][1];
  EXPECT_GT(perseus["frontier"].size(), 1u);
  EXPECT_GE(config["methods"][3]["iso_time_energy_reduction_pct"].get<double>(), 0.0);
}

// Exports of real interleaved and zb-h1 plans: Zeus's PFO grammar is (name, MHz) in run order,
// so both export, B and W under their plan names; the artifact's scheduler runs 1F1B only, so it
// refuses in one line and writes nothing.
TEST_F(ScheduleCli, ExportsCarryWhatEachGrammarAllows) {
  ASSERT_EQ(run("plan --schedule zb-h1 --out " + path("zb")).exit_code, 0);
  ASSERT_EQ(run("plan --schedule interleaved --virtual-stages 2 --layers-per-stage 14,14 --out " + path("il")).exit_code, 0);
  for (const char* name : {"zb", "il"}) {
    const std::string plan_path = path(std::string(name) + "/plan.json");
    const auto plan = nlohmann::json::parse(slurp(plan_path));
    ASSERT_EQ(run("export --plan " + plan_path + " --format zeus-pfo --out " + path(std::string(name) + "-pfo")).exit_code, 0);
    const std::string text = slurp(path(std::string(name) + "-pfo/freqs_pipeline_00000.py"));
    // The file lists every instruction of the plan in order, by its type, at its rounded clock.
    std::string expected = "[\n";
    for (const auto& stage : plan["stages"]) {
      expected += "    [";
      bool first = true;
      for (const auto& ins : stage["instructions"]) {
        expected += (first ? "" : ", ") + std::string("('") + ins["type"].get<std::string>() + "', " +
                    std::to_string(std::lround(ins["freq_mhz"].get<double>())) + ")";
        first = false;
      }
      expected += "],\n";
    }
    EXPECT_EQ(text, expected + "]\n") << name;
    const std::string refused = path(std::string(name) + "-artifact");
    expect_one_line_error(run("export --plan " + plan_path + " --format kareus-artifact --out " + refused), "1F1B only");
    EXPECT_FALSE(std::filesystem::exists(refused + "/freqs_pipeline_00000.py"));
    EXPECT_FALSE(std::filesystem::exists(refused + "/scheds_pipeline_00000.py"));
  }
  EXPECT_TRUE(contains(slurp(path("zb-pfo/freqs_pipeline_00000.py")), "('backward_weight', "));
}

// The composed zb-h1 table written by `kareus plan --stage-options` (B and W rows) is a profile
// `kareus frontier --schedule zb-h1` plans: the same fastest and least-energy plans (plan's front
// also holds the baselines' plans mapped onto the table, so the points between may differ).
TEST_F(ScheduleCli, AZeroBubbleStageTableRoundTripsThroughFrontier) {
  ASSERT_EQ(run("plan --schedule zb-h1 --stage-options " + path("zb.csv") + " --out " + path("zb")).exit_code, 0);
  const std::string table = slurp(path("zb.csv"));
  EXPECT_TRUE(contains(table, ",backward_input,") && contains(table, ",backward_weight,")) << table.substr(0, 200);
  const double p = nlohmann::json::parse(slurp(path("zb/summary.json")))["p_static_w"].get<double>();
  const CliResult r = run("frontier --profile " + path("zb.csv") + " --stages 2 --microbatches 8 --schedule zb-h1 " +
                          "--p-blocking " + fmt::format("{:.17g}", p) + " --out " + path("fr"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const CsvTable planned = read_csv(path("zb/frontier.csv")), replanned = read_csv(path("fr/frontier.csv"));
  for (bool last : {false, true}) {
    const std::size_t a = last ? planned.rows() - 1 : 0, b = last ? replanned.rows() - 1 : 0;
    EXPECT_NEAR(planned.number(a, 0), replanned.number(b, 0), 1e-8 * planned.number(a, 0)) << last;
    EXPECT_NEAR(planned.number(a, 1), replanned.number(b, 1), 1e-8 * planned.number(a, 1)) << last;
  }
}

TEST_F(ScheduleCli, RefusalsAreOneLineExitTwoAndNothingWritten) {
  const std::string out = " --out " + path("never");
  expect_one_line_error(run("plan --schedule interleaved --virtual-stages 2" + out), "--virtual-stages");
  expect_one_line_error(run("plan --schedule interleaved --virtual-stages 2 --layers-per-stage 14,14 --microbatches 7" + out),
                        "multiple");
  expect_one_line_error(run("plan --schedule zigzag" + out), "--schedule");
  const std::string profile = std::string(KAREUS_DATA_DIR) + "/perseus-sosp24/stage_profile/bloom+a100_sxm_bf16.csv";
  expect_one_line_error(run("frontier --profile " + profile + " --stages 8 --microbatches 8 --p-blocking 80 "
                            "--schedule zb-h1" + out),
                        "B and W");
  expect_one_line_error(run("frontier --profile " + profile + " --stages 8 --microbatches 12 --p-blocking 80 "
                            "--schedule interleaved --virtual-stages 2" + out),
                        "multiple");
  expect_one_line_error(run("compare --straggler 0.9 --mode exhaustive" + out), "--straggler");
  EXPECT_FALSE(std::filesystem::exists(path("never")));
}

// --schedule and --virtual-stages are one flag group: the three commands that take them accept the
// same schedules and refuse the same values with the same line (zb-h1 aside: plan and compare
// build B and W from the workload, frontier says a Perseus profile has no B and W rows).
TEST_F(ScheduleCli, PlanCompareAndFrontierAcceptAndRefuseTheSameScheduleFlags) {
  const std::string profile = std::string(KAREUS_DATA_DIR) + "/perseus-sosp24/stage_profile/bloom+a100_sxm_bf16.csv";
  const auto command_line = [&](const std::string& command, const std::string& flags, const std::string& out) {
    if (command == "frontier") {
      return "frontier --profile " + profile + " --stages 8 --microbatches 8 --p-blocking 80 " + flags + " --out " +
             path(out);
    }
    return command + " " + flags + kJob + " --out " + path(out);
  };
  const std::vector<std::string> commands = {"plan", "compare", "frontier"};
  int n = 0;
  for (const std::string flags : {"--schedule 1f1b", "--schedule gpipe", "--schedule interleaved --virtual-stages 2",
                                  "--virtual-stages 1"}) {
    for (const std::string& command : commands) {
      const CliResult r = run(command_line(command, flags, "ok" + std::to_string(n++)));
      EXPECT_EQ(r.exit_code, 0) << command << " " << flags << ": " << r.err;
    }
  }
  const std::vector<std::pair<std::string, std::string>> refused = {
      {"--schedule zigzag", "--schedule"},
      {"--schedule 1F1B", "--schedule"},
      {"--schedule ''", "--schedule"},
      {"--schedule interleaved --virtual-stages 1", "at least 2"},
      {"--schedule interleaved --virtual-stages -2", "at least 2"},
      {"--virtual-stages 2", "interleaved schedule only"},
      {"--schedule gpipe --virtual-stages 2", "interleaved schedule only"},
      {"--schedule interleaved --virtual-stages x", "--virtual-stages"},
      {"--virtual-stages 1.5", "--virtual-stages"}};
  for (const auto& [flags, fragment] : refused) {
    std::string first_error;
    for (const std::string& command : commands) {
      const CliResult r = run(command_line(command, flags, "never"));
      expect_one_line_error(r, fragment);
      if (first_error.empty()) first_error = r.err;
      EXPECT_EQ(r.err, first_error) << command << " " << flags;
    }
  }
  EXPECT_FALSE(std::filesystem::exists(path("never")));
  EXPECT_EQ(run(command_line("compare", "--schedule zb-h1", "zb")).exit_code, 0);
  EXPECT_EQ(run(command_line("plan", "--schedule zb-h1", "zb-plan")).exit_code, 0);
  expect_one_line_error(run(command_line("frontier", "--schedule zb-h1", "never")), "B and W");
  // One help text for the group: frontier's --virtual-stages says how it splits a profile's stage.
  const CliResult plan_help = run("plan --help"), compare_help = run("compare --help"), frontier_help = run("frontier --help");
  const std::string schedule_help = "Pipeline schedule: 1f1b, gpipe, interleaved (Megatron-LM's, with --virtual-stages) or zb-h1";
  for (const CliResult* help : {&plan_help, &compare_help, &frontier_help}) {
    EXPECT_TRUE(contains(help->out, schedule_help)) << help->out;
  }
  EXPECT_TRUE(contains(plan_help.out, "a stage's layers must divide by it")) << plan_help.out;
  EXPECT_TRUE(contains(compare_help.out, "a stage's layers must divide by it")) << compare_help.out;
  EXPECT_TRUE(contains(frontier_help.out, "each runs the profile's stage"));
}

}  // namespace
}  // namespace kareus::testing
