// `kareus simulate` on plans the real producers wrote: `kareus plan` (the default job, 1F1B) and
// `kareus frontier` (the measured GPT-3 profile, interleaved), and a zb-h1 plan: with no transfer time, no switch
// latency and no jitter the replay is the plan; with them it is slower, never faster. And the three
// alignments of clock requests side by side, under the engine the plan names.
#include <nlohmann/json.hpp>
#include <set>

#include "cli_fixture.hpp"

namespace kareus::testing {
namespace {

const std::string kData = std::string(KAREUS_DATA_DIR) + "/perseus-sosp24/stage_profile/";

using SimulateCli = CliTest;

nlohmann::json figures(const CliResult& r) {
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return nlohmann::json::parse(r.out);
}

void expect_exact(const nlohmann::json& f) {
  EXPECT_NEAR(f["time_s"].get<double>(), f["planned_time_s"].get<double>(), 1e-12 * f["planned_time_s"].get<double>());
  EXPECT_NEAR(f["energy_j"].get<double>(), f["planned_energy_j"].get<double>(), 1e-9 * f["planned_energy_j"].get<double>());
}

TEST_F(SimulateCli, ReproducesAPlanOfKareusPlanExactlyAndSlowsWithTransfersAndSwitches) {
  ASSERT_EQ(run("plan --out " + path("out")).exit_code, 0);
  const std::string plan = path("out/plan.json");
  expect_exact(figures(run("simulate --plan " + plan + " --no-p2p --switch-latency-ms 0 --json")));

  const nlohmann::json real = figures(run("simulate --plan " + plan + " --json --trace " + path("trace.json")));
  EXPECT_GT(real["transfer_bytes"].get<double>(), 0);
  EXPECT_GT(real["time_s"].get<double>(), real["planned_time_s"].get<double>());
  EXPECT_GT(real["energy_j"].get<double>(), real["planned_energy_j"].get<double>());

  // The trace: one process per GPU with its instructions, P2P sends and a power counter.
  const auto trace = nlohmann::json::parse(slurp(path("trace.json")));
  std::set<int> gpus;
  std::size_t slices = 0, counters = 0;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == "X" && e["tid"] == 0) {
      ++slices;
      gpus.insert(e["pid"].get<int>());
      EXPECT_GE(e["ts"].get<double>(), 0);
      EXPECT_TRUE(contains(e["name"].get<std::string>(), "MHz"));
    }
    if (e["ph"] == "C") ++counters;
  }
  EXPECT_EQ(gpus, (std::set<int>{0, 1}));
  EXPECT_EQ(slices, 2u * 2 * 8);  // 2 stages × (forward + backward) × 8 microbatches
  EXPECT_GT(counters, slices);

  // The default job's plan does not fit a 4-stage workload.
  expect_one_line_error(run("simulate --plan " + plan + " --pp 4 --tp 4"), "--pp");
}

TEST_F(SimulateCli, ReproducesInterleavedFrontierPlansAndJitterIsSeeded) {
  ASSERT_EQ(run("frontier --profile " + kData + "gpt3-175b+a100_sxm_bf16.csv --stages 8 --microbatches 16 "
                "--p-blocking 83.64 --schedule interleaved --virtual-stages 2 --plans 3 --out " + path("out"))
                .exit_code,
            0);
  const std::string plans = path("out/plans.json");
  const auto set = nlohmann::json::parse(slurp(plans));
  ASSERT_EQ(set["plans"][0]["virtual_stages"], 2);
  for (int k = 0; k < 3; ++k) {
    expect_exact(figures(run("simulate --plan " + plans + " --index " + std::to_string(k) +
                             " --no-p2p --switch-latency-ms 0 --json")));
  }
  const std::string jittered = "simulate --plan " + plans + " --index 1 --no-p2p --switch-latency-ms 0 --json --jitter 0.02";
  const auto a = figures(run(jittered + " --seed 1")), b = figures(run(jittered + " --seed 1")),
             c = figures(run(jittered + " --seed 2"));
  EXPECT_EQ(a["time_s"], b["time_s"]);
  EXPECT_NE(a["time_s"], c["time_s"]);
  expect_one_line_error(run("simulate --plan " + plans + " --index 1 --no-p2p --jitter -1"), "--jitter");
}

TEST_F(SimulateCli, PrintsTheThreeAlignmentsUnderThePlansEngine) {
  ASSERT_EQ(run("plan --out " + path("out")).exit_code, 0);
  const std::string plan = path("out/plan.json");
  const CliResult table = run("simulate --plan " + plan);
  ASSERT_EQ(table.exit_code, 0) << table.err;
  for (const std::string row : {"\n  plan ", "\n  sync ", "\n  gpu-timed ", "\n  host-timed (lead 1) "}) {
    EXPECT_TRUE(contains(table.out, row)) << row << " in:\n" << table.out;
  }
  EXPECT_TRUE(contains(table.out, "Engine megatron-te-eager: 38.9 us")) << table.out;

  // Nothing added: synced is the plan, GPU-timed saves the exposure, host-timed clocks land early.
  const nlohmann::json f = figures(run("simulate --plan " + plan + " --no-p2p --switch-latency-ms 0 --json"));
  EXPECT_EQ(f["alignment"], "sync");
  EXPECT_EQ(f["engine"], "megatron-te-eager");
  ASSERT_EQ(f["alignments"].size(), 3u);
  const auto& sync = f["alignments"][0];
  const auto& gpu = f["alignments"][1];
  const auto& host = f["alignments"][2];
  EXPECT_EQ(sync["alignment"], "sync");
  EXPECT_EQ(sync["time_s"], f["time_s"]);
  EXPECT_EQ(gpu["alignment"], "gpu-timed");
  EXPECT_LT(gpu["time_s"].get<double>(), sync["time_s"].get<double>());
  EXPECT_EQ(gpu["early_clock_changes"], 0);
  EXPECT_EQ(host["alignment"], "host-timed");
  EXPECT_GT(host["early_clock_changes"].get<int>(), 0);

  // One alignment asked for: its figures alone; an engine that never syncs exposes nothing.
  const nlohmann::json idle = figures(run("simulate --plan " + plan +
                                          " --no-p2p --switch-latency-ms 0 --json --alignment gpu-timed --engine kareus-executor"));
  expect_exact(idle);
  EXPECT_EQ(idle["alignment"], "gpu-timed");
  EXPECT_FALSE(idle.contains("alignments"));

  expect_one_line_error(run("simulate --plan " + plan + " --alignment nope"), "--alignment");
  expect_one_line_error(run("simulate --plan " + plan + " --engine nope"), "field '--engine': unknown engine 'nope'");
  // An engine the plan names that does not load is refused naming the plan file's field.
  nlohmann::json doc = nlohmann::json::parse(slurp(plan));
  doc["source"]["engine"] = "nope";
  const std::string renamed = write("renamed-engine.json", doc.dump());
  expect_one_line_error(run("simulate --plan " + renamed), renamed + ": field 'source.engine': unknown engine 'nope'");
  expect_one_line_error(run("simulate --plan " + plan + " --host-lead 0"), "--host-lead");
}

// A zb-h1 plan of `kareus plan`: its B and W instructions replay on their own clocks, exactly.
TEST_F(SimulateCli, ReproducesAZeroBubblePlanOfKareusPlanExactly) {
  ASSERT_EQ(run("plan --schedule zb-h1 --plans 5 --out " + path("zb")).exit_code, 0);
  const auto plan = nlohmann::json::parse(slurp(path("zb/plan.json")));
  ASSERT_EQ(plan["schedule"], "zb-h1");
  std::set<std::string> types;
  for (const auto& ins : plan["stages"][0]["instructions"]) types.insert(ins["type"].get<std::string>());
  EXPECT_EQ(types, (std::set<std::string>{"forward", "backward_input", "backward_weight"}));
  expect_exact(figures(run("simulate --plan " + path("zb/plan.json") + " --no-p2p --switch-latency-ms 0 --json")));
  for (int k = 0; k < 5; ++k) {
    expect_exact(figures(run("simulate --plan " + path("zb/plans.json") + " --index " + std::to_string(k) +
                             " --no-p2p --switch-latency-ms 0 --json")));
  }
  const nlohmann::json real = figures(run("simulate --plan " + path("zb/plan.json") + " --json"));
  EXPECT_GT(real["time_s"].get<double>(), real["planned_time_s"].get<double>());
}

}  // namespace
}  // namespace kareus::testing
