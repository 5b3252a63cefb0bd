// `kareus plan`, `kareus compare` and `kareus export` end to end on the simulated GPU: what they
// write, that the chosen plan is the one the target asks for, that Kareus is never worse than the
// baselines, and bad input as one line, exit 2, nothing written.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>

#include "cli_fixture.hpp"

namespace kareus::testing {
namespace {

struct Point {
  double time_s, energy_j;
};

std::vector<Point> read_frontier_csv(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "time_s,energy_j");
  std::vector<Point> points;
  while (std::getline(in, line)) {
    const auto comma = line.find(',');
    points.push_back({std::stod(line.substr(0, comma)), std::stod(line.substr(comma + 1))});
  }
  return points;
}

std::vector<std::vector<std::string>> read_csv_rows(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> cells;
    std::size_t start = 0;
    for (std::size_t comma; (comma = line.find(',', start)) != std::string::npos; start = comma + 1) {
      cells.push_back(line.substr(start, comma - start));
    }
    cells.push_back(line.substr(start));
    rows.push_back(std::move(cells));
  }
  return rows;
}

using PlanCli = CliTest;

TEST_F(PlanCli, DefaultRunWritesTheFrontierThePlanTheSummaryAndTheReport) {
  const CliResult r = run("plan --out " + path("out"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "Llama 3.2 3B")) << r.out;
  EXPECT_TRUE(contains(r.out, "simulated")) << r.out;

  const std::vector<Point> frontier = read_frontier_csv(slurp(path("out/frontier.csv")));
  ASSERT_GE(frontier.size(), 2u);
  for (std::size_t i = 1; i < frontier.size(); ++i) {
    EXPECT_GT(frontier[i].time_s, frontier[i - 1].time_s) << i;
    EXPECT_LT(frontier[i].energy_j, frontier[i - 1].energy_j) << i;
  }

  const auto summary = nlohmann::json::parse(slurp(path("out/summary.json")));
  for (const char* key : {"workload", "evaluator", "p_static_w", "energy_scope", "time_s", "energy_j",
                          "frontier_points", "run_time_s"}) {
    EXPECT_TRUE(summary.contains(key)) << key;
  }
  EXPECT_EQ(summary["frontier_points"].get<std::size_t>(), frontier.size());
  // The default job's local search converges; how near exact its frontier is is said three times.
  EXPECT_TRUE(summary["local_search_converged"].get<bool>());
  EXPECT_TRUE(summary["relaxation_plans"].get<bool>());
  const std::string gap = fmt::format("every plan within {:.3f}%", 100 * summary["bound_gap"].get<double>());
  EXPECT_TRUE(contains(r.out, "How near exact: local search converged; " + gap)) << r.out;
  // max-throughput is the default target: the fastest point.
  EXPECT_NEAR(summary["time_s"].get<double>(), frontier.front().time_s, 1e-6 * frontier.front().time_s);
  EXPECT_NEAR(summary["energy_j"].get<double>(), frontier.front().energy_j, 1e-6 * frontier.front().energy_j);

  // plans.json: 200 plans spread over the frontier (it holds thousands), both ends among them.
  const auto plans = nlohmann::json::parse(slurp(path("out/plans.json")))["plans"];
  ASSERT_EQ(plans.size(), std::min<std::size_t>(200, frontier.size()));
  EXPECT_EQ(plans.front()["frontier_index"].get<std::size_t>(), 0u);
  EXPECT_EQ(plans.back()["frontier_index"].get<std::size_t>(), frontier.size() - 1);
  EXPECT_NEAR(plans.back()["time_s"].get<double>(), frontier.back().time_s, 1e-6 * frontier.back().time_s);

  const auto plan = nlohmann::json::parse(slurp(path("out/plan.json")));
  EXPECT_EQ(plan["format"], "kareus-plan");
  ASSERT_EQ(plan["stages"].size(), 2u);
  const auto& first = plan["stages"][0]["instructions"][0];
  ASSERT_TRUE(first["knob"].contains("partitions")) << first.dump();
  EXPECT_FALSE(first["knob"]["partitions"].empty());

  const std::string html = slurp(path("out/report.html"));
  EXPECT_TRUE(contains(html, "<svg")) << "the report embeds its plots";
  EXPECT_TRUE(contains(html, "Llama 3.2 3B"));
  // The timeline's colour legend, and the overlap decisions: a row per partition the plan runs,
  // each naming a share of its knobs.
  EXPECT_TRUE(contains(html, "url(#clock)") && contains(html, "SM clock")) << "a colour legend";
  EXPECT_TRUE(contains(html, "Overlap decisions"));
  EXPECT_TRUE(contains(html, gap));
  for (const char* key : {"fwd_attn", "fwd_mlp", "bwd_attn", "bwd_mlp"}) {
    EXPECT_TRUE(contains(html, std::string("<tr><td>") + key + "</td>")) << key;
  }
  EXPECT_TRUE(contains(slurp(path("out/timeline.svg")), "<svg"));
  EXPECT_TRUE(contains(html, "One partition's overlap: ")) << "the heaviest partition's Gantt";
  EXPECT_TRUE(contains(html, "other nanobatch's "));
}

// The report draws the partition asked for; one the plan does not run is a one-line error, and
// nothing is written.
TEST_F(PlanCli, TheReportDrawsThePartitionAskedFor) {
  const CliResult r = run("plan --gantt-partition fwd_attn --no-baselines --out " + path("out"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(slurp(path("out/report.html")), "One partition's overlap: fwd_attn</h2>"));
  expect_one_line_error(run("plan --gantt-partition fwd_nope --out " + path("bad")), "fwd_nope");
  EXPECT_FALSE(std::filesystem::exists(path("bad")));
}

// The engine is named wherever the figures are, and a host far slower than the default (each op
// issued in milliseconds) turns partitions host-bound: listed in the summary, and the plan slower.
TEST_F(PlanCli, TheEngineIsNamedAndASlowHostShowsWhereItBinds) {
  ASSERT_EQ(run("plan --out " + path("default")).exit_code, 0);
  const auto plain = nlohmann::json::parse(slurp(path("default/summary.json")));
  EXPECT_EQ(plain.at("engine"), "megatron-te-eager");
  // The artifact's loop waits for the GPU at each op: the partitions of the instructions that
  // overlap run it, a sequential one among them too, and are listed with the host time that adds
  // to theirs, none host-bound.
  ASSERT_FALSE(plain.at("host_bound_partitions").empty()) << plain.dump();
  for (const auto& p : plain.at("host_bound_partitions")) {
    EXPECT_FALSE(p.at("host_bound").get<bool>()) << p.dump();
    EXPECT_GT(p.at("exposed_host_s").get<double>(), 0) << p.dump();
    EXPECT_EQ(p.at("exposed_host_s").get<double>(), p.at("host_time_s").get<double>()) << p.dump();
  }
  ASSERT_EQ(run("plan --engine cuda-graphs --out " + path("graphs")).exit_code, 0);
  const auto graphs = nlohmann::json::parse(slurp(path("graphs/summary.json")));
  EXPECT_TRUE(graphs.at("host_bound_partitions").empty()) << graphs.dump();
  EXPECT_LT(graphs.at("time_s").get<double>(), plain.at("time_s").get<double>());
  const std::string slow = write("slow.json", R"({"format": "kareus-engine", "version": 1, "name": "slow",
    "display_name": "A slow host", "source": "a test",
    "host": {"partition_op_us": 3000, "layer_op_us": 0, "collective_call_us": 0, "event_us": 0, "partition_us": 0,
             "instruction_us": 0, "launch_latency_us": 0},
    "sync": "instruction", "sources": {"partition_op_us": "a test"}})");
  const CliResult r = run("plan --engine " + slow + " --out " + path("slow"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "Engine slow: host-bound partitions:")) << r.out;
  const auto summary = nlohmann::json::parse(slurp(path("slow/summary.json")));
  EXPECT_EQ(summary.at("engine"), "slow");
  EXPECT_GE(summary.at("time_s").get<double>(), plain.at("time_s").get<double>());
  // Only nanobatched partitions pay the per-op loop: every one listed is overlapped, host above GPU.
  for (const auto& p : summary.at("host_bound_partitions")) {
    EXPECT_NE(p.at("slot"), "none") << p.dump();
    EXPECT_TRUE(p.at("host_bound").get<bool>()) << p.dump();
    EXPECT_GT(p.at("host_time_s").get<double>(), p.at("gpu_time_s").get<double>()) << p.dump();
    EXPECT_EQ(p.at("exposed_host_s").get<double>(), 0) << p.dump();
  }
  expect_one_line_error(run("plan --engine no-such-engine --out " + path("bad")), "megatron-te-eager");
  EXPECT_FALSE(std::filesystem::exists(path("bad")));
}

// kareus plan costs the baselines beside its plan and says what the chosen plan saves; the figures
// are kareus compare's on the same job, exactly. --no-baselines leaves them out.
TEST_F(PlanCli, TheBaselinesAndSavingsAreKareusComparesExactly) {
  const CliResult r = run("plan --out " + path("plan"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "Against the baselines")) << r.out;
  EXPECT_TRUE(contains(r.out, "less energy than Megatron-LM")) << r.out;
  ASSERT_EQ(run("compare --out " + path("compare")).exit_code, 0);
  const auto summary = nlohmann::json::parse(slurp(path("plan/summary.json")));
  const auto& b = summary.at("baselines");
  const auto methods = nlohmann::json::parse(slurp(path("compare/compare.json")))["configs"][0]["methods"];
  for (const auto& m : methods) {
    if (m["method"] == "Kareus") {
      EXPECT_EQ(b.at("iso_time_energy_reduction_pct_vs_perseus"), m["iso_time_energy_reduction_pct"]);
      EXPECT_EQ(b.at("iso_energy_time_reduction_pct_vs_perseus"), m["iso_energy_time_reduction_pct"]);
      continue;
    }
    const auto same = std::find_if(b.at("methods").begin(), b.at("methods").end(),
                                   [&](const nlohmann::json& x) { return x["method"] == m["method"]; });
    ASSERT_NE(same, b.at("methods").end()) << m["method"];
    EXPECT_EQ((*same)["fastest_time_s"], m["max_throughput_time_s"]);
    EXPECT_EQ((*same)["fastest_energy_j"], m["max_throughput_energy_j"]);
    if (m["method"] == "Megatron-LM") {
      const double saving = 100 * (1 - summary["energy_j"].get<double>() / m["max_throughput_energy_j"].get<double>());
      EXPECT_NEAR(b.at("vs_megatron").at("energy_saving_pct").get<double>(), saving, 1e-9);
    }
  }
  const CliResult bare = run("plan --no-baselines --out " + path("bare"));
  ASSERT_EQ(bare.exit_code, 0) << bare.err;
  EXPECT_FALSE(contains(bare.out, "Against the baselines")) << bare.out;
  EXPECT_FALSE(nlohmann::json::parse(slurp(path("bare/summary.json"))).contains("baselines"));
}

// --no-relaxation-plans reaches the planner and the summary says so; the default job's search
// converges, so its frontier is the same without them, and its certificate is still given.
TEST_F(PlanCli, NoRelaxationPlansSolvesWithoutThem) {
  const CliResult with = run("plan --no-baselines --out " + path("with"));
  const CliResult without = run("plan --no-baselines --no-relaxation-plans --out " + path("without"));
  ASSERT_EQ(with.exit_code, 0) << with.err;
  ASSERT_EQ(without.exit_code, 0) << without.err;
  const auto summary = nlohmann::json::parse(slurp(path("without/summary.json")));
  EXPECT_FALSE(summary["relaxation_plans"].get<bool>());
  EXPECT_EQ(summary["bound_gap"], nlohmann::json::parse(slurp(path("with/summary.json")))["bound_gap"]);
  EXPECT_EQ(slurp(path("without/frontier.csv")), slurp(path("with/frontier.csv")));
  EXPECT_TRUE(contains(without.out, "How near exact: local search converged")) << without.out;
  ASSERT_EQ(run("compare --no-relaxation-plans --out " + path("compare")).exit_code, 0);
  EXPECT_FALSE(nlohmann::json::parse(slurp(path("compare/compare.json")))["relaxation_plans"].get<bool>());
}

TEST_F(PlanCli, TargetsPickTheirPoint) {
  ASSERT_EQ(run("plan --target min-energy --out " + path("low")).exit_code, 0);
  const std::vector<Point> frontier = read_frontier_csv(slurp(path("low/frontier.csv")));
  ASSERT_GE(frontier.size(), 3u);
  auto chosen = [&](const std::string& dir) {
    const auto s = nlohmann::json::parse(slurp(path(dir + "/summary.json")));
    return Point{s["time_s"].get<double>(), s["energy_j"].get<double>()};
  };
  EXPECT_NEAR(chosen("low").energy_j, frontier.back().energy_j, 1e-6 * frontier.back().energy_j);

  // A deadline halfway along the frontier: the least energy among the points that meet it.
  const double deadline = (frontier.front().time_s + frontier.back().time_s) / 2;
  ASSERT_EQ(run("plan --target deadline:" + std::to_string(deadline) + " --out " + path("mid")).exit_code, 0);
  double expected = frontier.front().energy_j;
  for (const Point& p : frontier) {
    if (p.time_s <= deadline) expected = std::min(expected, p.energy_j);
  }
  EXPECT_LE(chosen("mid").time_s, deadline);
  EXPECT_NEAR(chosen("mid").energy_j, expected, 1e-6 * expected);
}

TEST_F(PlanCli, ThePlanExportsToTheKareusArtifactFormat) {
  ASSERT_EQ(run("plan --out " + path("out")).exit_code, 0);
  const CliResult r = run("export --plan " + path("out/plan.json") + " --format kareus-artifact --out " + path("art"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string freqs = slurp(path("art/freqs_pipeline_00000.py"));
  const std::string scheds = slurp(path("art/scheds_pipeline_00000.py"));
  EXPECT_TRUE(contains(freqs, "('forward', ")) << freqs.substr(0, 200);
  EXPECT_TRUE(contains(freqs, "('backward', ")) << freqs.substr(0, 200);
  EXPECT_TRUE(contains(scheds, "-none-")) << scheds.substr(0, 200);
  EXPECT_TRUE(contains(scheds, "-1024")) << scheds.substr(0, 200);
}

TEST_F(PlanCli, BadInputIsOneLineExitTwoAndNothingWritten) {
  const std::string out = " --out " + path("never");
  expect_one_line_error(run("plan --target deadline:0.001" + out), "reachable");
  expect_one_line_error(run("plan --target fastest" + out), "--target");
  expect_one_line_error(run("plan --preset llama3.2-3b-tp8-mbs8-seq4096 --tp 4" + out), "--tp");
  expect_one_line_error(run("plan --preset no-such-config" + out), "qwen3-1.7b-tp8-mbs8-seq4096");
  expect_one_line_error(run("plan --config " + write("job.json", R"({"model": "qwen3-1.7b", "tpp": 4})") + out),
                        "tpp");
  expect_one_line_error(run("plan --mbs 1" + out), "mbs");
  expect_one_line_error(run("plan --model gpt-9" + out), "llama-3.2-3b");
  expect_one_line_error(run("plan --overhead 0" + out), "--overhead");
  EXPECT_FALSE(std::filesystem::exists(path("never")));
}

using CompareCli = CliTest;

TEST_F(CompareCli, FourMethodsAndKareusIsNeverWorse) {
  const CliResult r = run("compare --preset qwen3-1.7b-cp2tp4-mbs8-seq4096 --out " + path("cmp"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto rows = read_csv_rows(slurp(path("cmp/compare.csv")));
  ASSERT_EQ(rows.size(), 5u);
  EXPECT_EQ(rows[0], (std::vector<std::string>{"config", "method", "max_throughput_time_s", "max_throughput_energy_j",
                                               "iso_time_energy_reduction_pct", "iso_energy_time_reduction_pct",
                                               "cluster_gpus", "cluster_energy_j"}));
  std::map<std::string, std::vector<std::string>> by_method;
  for (std::size_t i = 1; i < rows.size(); ++i) {
    ASSERT_EQ(rows[i].size(), 8u);
    EXPECT_EQ(rows[i][0], "qwen3-1.7b-cp2tp4-mbs8-seq4096");
    // The whole job: TP 4 × CP 2 × PP 2 × DP 1 GPUs, each stage's 8 drawing like the one the
    // iteration energy covers.
    EXPECT_EQ(rows[i][6], "16");
    EXPECT_NEAR(std::stod(rows[i][7]), 8 * std::stod(rows[i][3]), 0.1 + 1e-6 * std::stod(rows[i][7]));
    by_method[rows[i][1]] = rows[i];
  }
  ASSERT_EQ(by_method.size(), 4u);
  // Perseus is the reference of the iso figures.
  EXPECT_EQ(by_method["Perseus"][4], "");
  EXPECT_EQ(by_method["Perseus"][5], "");
  const double kareus_time = std::stod(by_method["Kareus"][2]);
  for (const auto& [method, row] : by_method) EXPECT_LE(kareus_time, std::stod(row[2]) * (1 + 1e-9)) << method;
  // Kareus's frontier weakly dominates Nanobatching+Perseus's, so it saves at least as much where
  // that one has a figure: none where it never runs as fast as Perseus's fastest plan (on this
  // config the artifact's loop costs the nanobatches more host time than their overlap hides).
  const std::string nanobatching_saving = by_method["Nanobatching+Perseus"][4];
  if (nanobatching_saving.empty()) {
    EXPECT_GT(std::stod(by_method["Nanobatching+Perseus"][2]), std::stod(by_method["Perseus"][2]));
  } else {
    EXPECT_GE(std::stod(by_method["Kareus"][4]), std::stod(nanobatching_saving) - 1e-3);
  }
  EXPECT_GT(std::stod(by_method["Kareus"][4]), 0);

  const auto report = nlohmann::json::parse(slurp(path("cmp/compare.json")));
  ASSERT_EQ(report["configs"].size(), 1u);
  for (const auto& method : report["configs"][0]["methods"]) {
    EXPECT_TRUE(method.contains("iso_time_energy_reduction_pct_10_points")) << method["method"];
    const auto& frontier = method["frontier"];
    for (std::size_t i = 1; i < frontier.size(); ++i) {
      EXPECT_GT(frontier[i][0].get<double>(), frontier[i - 1][0].get<double>());
      EXPECT_LT(frontier[i][1].get<double>(), frontier[i - 1][1].get<double>());
    }
  }
  EXPECT_TRUE(std::filesystem::exists(path("cmp/qwen3-1.7b-cp2tp4-mbs8-seq4096.svg")));
}

TEST_F(CompareCli, ContradictoryFlagsAreOneLineExitTwo) {
  const std::string out = " --out " + path("never");
  expect_one_line_error(run("compare --all --preset qwen3-1.7b-tp8-mbs8-seq4096" + out), "contradict");
  expect_one_line_error(run("compare --all --model qwen3-1.7b" + out), "--model");
  expect_one_line_error(run("compare --mode greedy" + out), "--mode");
  EXPECT_FALSE(std::filesystem::exists(path("never")));
}

}  // namespace
}  // namespace kareus::testing
