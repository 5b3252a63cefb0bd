// The Kareus artifact's formats through the `kareus` command: planning from its profiling tree
// (the hand-made fixture in tests/evaluate/artifact_tree/) with an account of what was used, a
// malformed record as one error line and nothing written, a search resuming from its log, and
// the data/diagnostics split (CSV fields quoted, warnings on stderr).
#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <map>
#include <set>

#include "cli_fixture.hpp"
#include "kareus/interop/artifact_format.hpp"
#include "kareus/core/csv.hpp"
#include "kareus/evaluate/artifact_tree.hpp"

namespace kareus::testing {
namespace {

namespace fs = std::filesystem;

const fs::path kFixture = fs::path(KAREUS_TESTS_DIR) / "evaluate" / "artifact_tree";

using ArtifactCli = CliTest;

TEST_F(ArtifactCli, PlansFromAnArtifactTreeAndSaysWhatItUsed) {
  const CliResult r = run("plan --evaluator artifact:" + kFixture.string() + " --mode exhaustive --out " + path("out"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.err, "84 records used (bwd_attn 18, bwd_mlp 18, embedding_bwd 3, embedding_fwd 3, fwd_attn 18, "
                              "fwd_mlp 18, head_bwd 3, head_fwd 3), 3 unusable")) << r.err;
  EXPECT_TRUE(contains(r.err, "overlap_end linear_1")) << r.err;
  EXPECT_TRUE(contains(r.err, "no sequential knob")) << r.err;
  EXPECT_TRUE(contains(r.out, "costs measured")) << r.out;
  EXPECT_FALSE(contains(r.out, "no sequential knob")) << "the account is a diagnostic: " << r.out;
  const auto plan = nlohmann::json::parse(slurp(path("out/plan.json")));
  // The plan's knobs are measured ones: every slot and SM count comes from the tree.
  for (const auto& stage : plan.at("stages")) {
    for (const auto& ins : stage.at("instructions")) {
      for (const auto& p : ins.at("knob").at("partitions")) {
        EXPECT_NE(p["slot"], "none") << p;
        EXPECT_TRUE(p["sms"] == 6 || p["sms"] == 12 || p["sms"] == 24) << p;
      }
    }
  }
  // The measurement count is of knobs with a cost: 84 records, of which the job uses all.
  const auto summary = nlohmann::json::parse(slurp(path("out/summary.json")));
  EXPECT_TRUE(contains(summary.dump(), "artifact:")) << summary.dump();
  EXPECT_TRUE(contains(r.out, "from 84 measurements")) << r.out;

  // And it exports for the artifact's scheduler, in its slot names.
  const CliResult e = run("export --plan " + path("out/plan.json") + " --format kareus-artifact --out " + path("art"));
  ASSERT_EQ(e.exit_code, 0) << e.err;
  EXPECT_FALSE(contains(slurp(path("art/scheds_pipeline_00000.py")), "act_")) << slurp(path("art/scheds_pipeline_00000.py"));
}

TEST_F(ArtifactCli, AMalformedRecordIsOneLocatedErrorAndNothingIsWritten) {
  fs::copy(kFixture, dir_ / "tree", fs::copy_options::recursive);
  {
    std::ofstream log(dir_ / "tree" / "fwd_attn" / "eval_results.jsonl", std::ios::app);
    log << R"({"freq": 1410, "overlap_start": "linear_0", "overlap_end": "none", "sm": 12, "block": 1024, "time_s": -1, "energy_j": 3})"
        << "\n";
  }
  const CliResult r = run("plan --evaluator artifact:" + path("tree") + " --mode exhaustive --out " + path("out"));
  expect_one_line_error(r, "fwd_attn/eval_results.jsonl:19: field 'time_s'");
  EXPECT_FALSE(fs::exists(dir_ / "out"));
  expect_one_line_error(run("plan --evaluator artifact:" + path("nowhere") + " --out " + path("out")), "is not a directory");
  expect_one_line_error(run("plan --evaluator lab:x --out " + path("out")), "artifact:DIR");
}

TEST_F(ArtifactCli, SearchResumesFromAnArtifactLogAndAppendsInItsForm) {
  fs::create_directories(dir_ / "logs" / "fwd_mlp");
  fs::copy(kFixture / "fwd_mlp" / "eval_results.jsonl", dir_ / "logs" / "fwd_mlp" / "eval_results.jsonl");
  const std::string grid = " --clocks 1050:1410:180 --sms 6:24:6 --mode exhaustive --budget 100000 ";
  const CliResult r = run("search --partition fwd_mlp" + grid + "--journal " + path("logs/fwd_mlp/eval_results.jsonl") +
                          " --out " + path("out"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.err, "resuming from the artifact's log (18 records")) << r.err;
  const auto summary = nlohmann::json::parse(slurp(path("out/summary.json")));
  const auto& part = summary["partitions"]["fwd_mlp"];
  // The 18 records that lie on this grid (3 clocks, SMs 6/12/24 of 6..24, two slots) were not measured again.
  EXPECT_EQ(part["measured_this_run"].get<int>() + 18, part["measured_knobs"].get<int>()) << part.dump();
  // Appended lines are artifact records the artifact's reader (and ours) takes.
  std::istringstream lines(slurp(path("logs/fwd_mlp/eval_results.jsonl")));
  std::string line;
  long number = 0, appended = 0;
  while (std::getline(lines, line)) {
    ++number;
    auto parsed = evaluate::parse_artifact_record(line, "log", number, "fwd_mlp");
    ASSERT_TRUE(std::holds_alternative<evaluate::ArtifactRecord>(parsed)) << line;
    const auto doc = nlohmann::json::parse(line);
    EXPECT_FALSE(doc.contains("status")) << line;
    if (number > 18) {
      ++appended;
      EXPECT_FALSE(contains(doc["overlap_start"].get<std::string>(), "act_")) << line;
    }
  }
  EXPECT_EQ(appended, part["measured_this_run"].get<int>());

  // A log in another partition's directory is refused, untouched.
  const std::string before = slurp(path("logs/fwd_mlp/eval_results.jsonl"));
  expect_one_line_error(run("search --partition bwd_mlp" + grid + "--journal " + path("logs/fwd_mlp/eval_results.jsonl") +
                            " --out " + path("out2")),
                        "partition 'fwd_mlp'");
  EXPECT_EQ(slurp(path("logs/fwd_mlp/eval_results.jsonl")), before);
}

TEST_F(ArtifactCli, SearchOnATableMeasuresOnlyItsKnobsAndSaysSo) {
  const CliResult r = run("search --partition bwd_mlp --evaluator artifact:" + kFixture.string() +
                          " --clocks 1050:1410:180 --sms 6:24:6 --mode exhaustive --out " + path("out"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // The space is the tree's knobs, whatever the grid flags say: 3 clocks x (2 slots x SMs 6, 12,
  // 24 + the sequential knob it never measures) = 21, of which the tree holds 18; the search asks
  // for those alone.
  EXPECT_TRUE(contains(r.out, "18 knobs in the table,   18 measured (100.0%), ")) << r.out;
  EXPECT_FALSE(contains(r.out, "failed")) << r.out;
  const auto part = nlohmann::json::parse(slurp(path("out/summary.json")))["partitions"]["bwd_mlp"];
  EXPECT_EQ(part["space_size"], 18);
  EXPECT_EQ(part["grid_size"], 21);
  EXPECT_EQ(part["unusable_knobs"], 0);
  EXPECT_EQ(part["failed"], 0);

  // MOBO likewise: its default budget is a share of the table, and nothing it asks for fails.
  const CliResult m = run("search --partition all --evaluator artifact:" + kFixture.string() + " --out " + path("mobo"));
  ASSERT_EQ(m.exit_code, 0) << m.err;
  const auto mobo = nlohmann::json::parse(slurp(path("mobo/summary.json")));  // outlives the loop
  for (const auto& [key, p] : mobo["partitions"].items()) {
    EXPECT_EQ(p["failed"], 0) << key;
    EXPECT_EQ(p["space_size"], (key.starts_with("fwd_") || key.starts_with("bwd_")) ? 18 : 3)
        << key;
  }
}

TEST_F(ArtifactCli, EvaluateReadsOneKnobFromAnArtifactTree) {
  const CliResult r = run("evaluate --partition fwd_mlp --freq 1230 --sms 12 --slot act_0 --evaluator artifact:" +
                          kFixture.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // The fixture's record of that knob, in the artifact's name for the slot.
  std::istringstream lines(slurp(kFixture / "fwd_mlp" / "eval_results.jsonl"));
  std::string line;
  std::optional<nlohmann::json> record;
  while (std::getline(lines, line)) {
    const auto doc = nlohmann::json::parse(line);
    if (doc["freq"] == 1230 && doc["sm"] == 12 && doc["overlap_start"] == "activation_0") record = doc;
  }
  ASSERT_TRUE(record);
  EXPECT_TRUE(contains(r.out, fmt::format("{:10.4f} ms", (*record)["time_s"].get<double>() * 1e3))) << r.out;
  EXPECT_TRUE(contains(r.out, fmt::format("{:10.4f} J per GPU", (*record)["energy_j"].get<double>()))) << r.out;
  EXPECT_TRUE(contains(r.out, "artifact:")) << r.out;
  // A knob the tree lacks: exit 2, the error the last line after the tree's account.
  const CliResult missing =
      run("evaluate --partition fwd_mlp --freq 1200 --sms 12 --slot act_0 --evaluator artifact:" + kFixture.string());
  EXPECT_EQ(missing.exit_code, 2);
  const std::string last = missing.err.substr(missing.err.rfind('\n', missing.err.size() - 2) + 1);
  EXPECT_TRUE(last.starts_with("kareus: error: ") && contains(last, "was not measured")) << missing.err;
}

// compare from an artifact tree: every method the tree can cost runs; the others are left out with
// the reason, on stdout and in compare.json; the iso figures are against the reference that ran.
TEST_F(ArtifactCli, CompareRunsWhatTheTreeSupportsAndSaysWhatItLeftOut) {
  const CliResult r = run("compare --evaluator artifact:" + kFixture.string() + " --out " + path("cmp"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "Perseus left out: artifact:")) << r.out;
  EXPECT_TRUE(contains(r.out, "the Kareus artifact never measures it")) << r.out;
  EXPECT_TRUE(contains(r.out, "no iso figures: no baseline could run")) << r.out;
  const auto config = nlohmann::json::parse(slurp(path("cmp/compare.json")))["configs"][0];
  ASSERT_EQ(config["methods"].size(), 1u) << config.dump();
  EXPECT_EQ(config["methods"][0]["method"], "Kareus");
  EXPECT_TRUE(config["methods"][0]["iso_time_energy_reduction_pct"].is_null());
  EXPECT_TRUE(config["reference"].is_null());
  std::set<std::string> left;
  for (const auto& l : config["left_out"]) {
    left.insert(l["method"].get<std::string>());
    EXPECT_TRUE(contains(l["reason"].get<std::string>(), l["method"] == "Nanobatching+Perseus" ? "nanobatching knob"
                                                                                                : "sequential knob"))
        << l.dump();
  }
  EXPECT_EQ(left, (std::set<std::string>{"Megatron-LM", "Perseus", "Nanobatching+Perseus"}));
  const CsvTable csv = CsvTable::parse(slurp(path("cmp/compare.csv")), "compare.csv");
  ASSERT_EQ(csv.rows(), 1u);
  EXPECT_EQ(csv.text(0, 1), "Kareus");
}

// zb-h1 from the same tree: the baselines lack their knobs as on 1F1B, and Kareus lacks W's
// weight-gradient GEMMs, which the artifact never measures; all four are left out with why, not an error.
TEST_F(ArtifactCli, CompareOnZeroBubbleLeavesOutWhatTheTreeCannotCost) {
  const CliResult r = run("compare --schedule zb-h1 --evaluator artifact:" + kFixture.string() + " --out " + path("cmp"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "Megatron-LM left out: artifact:")) << r.out;
  EXPECT_TRUE(contains(r.out, "Kareus left out: artifact:")) << r.out;
  const auto config = nlohmann::json::parse(slurp(path("cmp/compare.json")))["configs"][0];
  EXPECT_TRUE(config["methods"].empty()) << config.dump();
  std::map<std::string, std::string> left;
  for (const auto& l : config["left_out"]) left[l["method"].get<std::string>()] = l["reason"].get<std::string>();
  ASSERT_EQ(left.size(), 4u) << config.dump();
  EXPECT_TRUE(contains(left["Megatron-LM"], "sequential knob")) << left["Megatron-LM"];
  EXPECT_TRUE(contains(left["Perseus"], "sequential knob")) << left["Perseus"];
  EXPECT_TRUE(contains(left["Kareus"], "bwd_wgrad")) << left["Kareus"];
  const std::string csv = slurp(path("cmp/compare.csv"));
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 1) << csv;  // the header, no method's row
}

TEST_F(ArtifactCli, CompareRunsNanobatchingWhereTheTreeHoldsItsKnob) {
  // The tree plus the nanobatching knob (collective at the first slot, norm_0, with 24 SMs: the
  // library's default, NCCL's 24 channels) of every layer partition at the tree's three clocks.
  fs::copy(kFixture, dir_ / "tree", fs::copy_options::recursive);
  for (const char* key : {"fwd_attn", "fwd_mlp", "bwd_mlp", "bwd_attn"}) {
    std::ofstream log(dir_ / "tree" / key / "eval_results.jsonl", std::ios::app);
    for (int f : {1410, 1230, 1050}) {
      log << fmt::format(R"({{"freq": {}, "overlap_start": "norm_0", "overlap_end": "none", "sm": 24, "block": 1024, )"
                         R"("time_s": {:.6f}, "energy_j": {:.4f}}})",
                         f, 0.03 * 1410.0 / f, 9.0 * f / 1410.0 + 3.0)
          << "\n";
    }
  }
  const CliResult r = run("compare --evaluator artifact:" + path("tree") + " --out " + path("cmp"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "iso figures against Nanobatching+Perseus's frontier (Perseus left out)")) << r.out;
  const auto config = nlohmann::json::parse(slurp(path("cmp/compare.json")))["configs"][0];
  EXPECT_EQ(config["reference"], "Nanobatching+Perseus");
  ASSERT_EQ(config["methods"].size(), 2u) << config.dump();
  const auto& nb = config["methods"][0];
  const auto& kareus = config["methods"][1];
  EXPECT_EQ(nb["method"], "Nanobatching+Perseus");
  EXPECT_EQ(nb["clocks_mhz"], nlohmann::json::parse("[1050.0, 1230.0, 1410.0]")) << nb["clocks_mhz"];
  EXPECT_TRUE(nb["iso_time_energy_reduction_pct"].is_null());
  EXPECT_EQ(kareus["method"], "Kareus");
  // Kareus's options include the nanobatching knobs, so its frontier weakly dominates the baseline's.
  EXPECT_GE(kareus["iso_time_energy_reduction_pct"].get<double>(), -1e-9);
  EXPECT_GE(kareus["iso_energy_time_reduction_pct"].get<double>(), -1e-9);
  EXPECT_LE(kareus["max_throughput_time_s"].get<double>(), nb["max_throughput_time_s"].get<double>() * (1 + 1e-9));
  std::set<std::string> left;
  for (const auto& l : config["left_out"]) left.insert(l["method"].get<std::string>());
  EXPECT_EQ(left, (std::set<std::string>{"Megatron-LM", "Perseus"}));
}

// A plan solved from the artifact's own instruction profile, whose columns hold its config
// strings, exports them as they are, each in its field.
TEST_F(ArtifactCli, ConfigStringsFromAnArtifactProfileSurviveFrontierAndExport) {
  std::string csv = "stage,instruction,frequency,time,energy,attention_configs,mlp_configs,"
                    "recompute_attention_configs,recompute_mlp_configs\n";
  for (int stage = 0; stage < 2; ++stage) {
    for (int f : {1410, 1200}) {
      const double slow = 1410.0 / f;
      const int sms = f == 1410 ? 12 : 6;
      csv += fmt::format("{},forward,{},{},{},linear_0-none-{}-1024,activation_0-none-{}-1024,,\n", stage, f,
                         0.05 * slow, 12.0 / slow, sms, sms + stage);
      csv += fmt::format("{},backward,{},{},{},attn_0-none-{}-1024,linear_1-none-{}-1024,norm_0-none-{}-1024,"
                         "rope_0-none-{}-1024\n",
                         stage, f, 0.1 * slow, 25.0 / slow, sms, sms + 1, sms + 2, sms + 3);
    }
  }
  const std::string profile = write("profile.csv", csv);
  ASSERT_EQ(run("frontier --profile " + profile + " --stages 2 --microbatches 2 --p-blocking 60 --out " + path("f"))
                .exit_code, 0);
  const CliResult e =
      run("export --plan " + path("f/plans.json") + " --index 0 --format kareus-artifact --out " + path("art"));
  ASSERT_EQ(e.exit_code, 0) << e.err;
  const auto plans = nlohmann::json::parse(slurp(path("f/plans.json")));
  const std::string scheds = slurp(path("art/scheds_pipeline_00000.py"));
  for (const auto& stage : plans["plans"][0]["stages"]) {
    for (const auto& ins : stage["instructions"]) {
      const auto& k = ins["knob"];
      const std::string tuple =
          ins["type"] == "forward"
              ? fmt::format("('forward', '{}', '{}')", k["attention_configs"].get<std::string>(),
                            k["mlp_configs"].get<std::string>())
              : fmt::format("('backward', '{}', '{}', '{}', '{}')", k["recompute_attention_configs"].get<std::string>(),
                            k["recompute_mlp_configs"].get<std::string>(), k["attention_configs"].get<std::string>(),
                            k["mlp_configs"].get<std::string>());
      EXPECT_TRUE(contains(scheds, tuple)) << tuple << "\n" << scheds;
    }
  }
}

TEST_F(ArtifactCli, CsvFieldsWithCommasAreQuotedAndWarningsGoToStderr) {
  // A job given by workload flags is named with commas ("TP 8, CP 1, PP 2 ...").
  const CliResult r = run("compare --model llama-3.2-3b --microbatches 4 --out " + path("cmp"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const CsvTable csv = CsvTable::parse(slurp(path("cmp/compare.csv")), "compare.csv");
  // Every row has the header's columns (the parser refuses others), the config's commas inside one.
  ASSERT_EQ(csv.header().front(), "config");
  ASSERT_TRUE(csv.find_column("cluster_energy_j"));
  const auto report = nlohmann::json::parse(slurp(path("cmp/compare.json")));
  const std::string name = report["configs"][0]["config"];
  EXPECT_TRUE(contains(name, ",")) << name;
  ASSERT_EQ(csv.rows(), 4u);
  for (std::size_t row = 0; row < csv.rows(); ++row) EXPECT_EQ(csv.text(row, 0), name);

  // A torn journal line is dropped with a warning on stderr; stdout keeps the data.
  const std::string grid = " --clocks 1200:1410:70 --sms 6:24:6 --budget 20 ";
  ASSERT_EQ(run("search --partition fwd_mlp" + grid + "--out " + path("s")).exit_code, 0);
  { std::ofstream(dir_ / "s" / "fwd_mlp.journal.jsonl", std::ios::app) << "{\"freq\": 12"; }
  const CliResult again = run("search --partition fwd_mlp" + grid + "--out " + path("s"));
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_TRUE(contains(again.err, "torn last line")) << again.err;
  EXPECT_FALSE(contains(again.out, "torn")) << again.out;
}

}  // namespace
}  // namespace kareus::testing
