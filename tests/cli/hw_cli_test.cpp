// The `kareus hw` commands end to end: show, check's last line, fit's output file, and bad input
// as one line on stderr with exit code 2.
#include <nlohmann/json.hpp>
#include <map>
#include <regex>
#include <utility>

#include "cli_fixture.hpp"
#include "kareus/hardware/gpu.hpp"

namespace kareus::testing {
namespace {

const std::string kProfiles = std::string(KAREUS_DATA_DIR) + "/perseus-sosp24/stage_profile/";

std::string last_line(const std::string& text) {
  std::string trimmed = text.substr(0, text.find_last_not_of('\n') + 1);
  return trimmed.substr(trimmed.rfind('\n') + 1);
}

using HwCli = CliTest;

const std::regex kSummary(
    R"(time_err_median=(\d+\.\d\d) time_err_max=(\d+\.\d\d) power_err_median=(\d+\.\d\d) power_err_max=(\d+\.\d\d))");

// Perseus's profiles come from 500 W boards (they draw ~475 W at 1410 MHz): the preset of that
// board holds them to within 5%; the 400 W board of the Kareus cluster throttles where they did not.
TEST_F(HwCli, CheckEndsWithTheSummaryLine) {
  CliResult r =
      run("hw check --gpu a100-sxm4-80gb --profile " + kProfiles + "gpt3-175b+a100_sxm_bf16.csv");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::smatch m;
  std::string last = last_line(r.out);
  ASSERT_TRUE(std::regex_match(last, m, kSummary)) << last;
  EXPECT_LE(std::stod(m[1]), 5.0);
  EXPECT_LE(std::stod(m[3]), 5.0);
  // One row per stage, instruction and clock.
  EXPECT_NE(r.out.find("gpt3-175b+a100_sxm_bf16.csv"), std::string::npos);
  EXPECT_GE(std::count(r.out.begin(), r.out.end(), '\n'), 16 * 38);
}

TEST_F(HwCli, CheckTakesSeveralProfilesAndAnyPreset) {
  CliResult r = run("hw check --gpu a40 --profile " + kProfiles + "gpt3-175b+a100_sxm_bf16.csv" +
                    " --profile " + kProfiles + "bloom+a100_sxm_bf16.csv");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string last = last_line(r.out);
  EXPECT_TRUE(std::regex_match(last, kSummary)) << last;
}

TEST_F(HwCli, ShowPrintsThePresetAndItsCurves) {
  CliResult r = run("hw show --gpu a100-sxm4-40gb");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* expected :
       {"NVIDIA A100 SXM4 40GB", "108", "312.0 TFLOP/s", "1555 GB/s", "400 W", "85 W", "clock_mhz",
        "voltage_v", "full_load_w", "not a measurement"}) {
    EXPECT_NE(r.out.find(expected), std::string::npos) << expected << "\n" << r.out;
  }
  // Rows from the lowest to the highest clock, where the voltage reaches V_max.
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(\n +210 +0\.\d+ )"))) << r.out;
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(\n +1410 +1\.000 +312\.0 )"))) << r.out;
  // The 400 W board: a GEMM-bound stage hits the limit below the top clock.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex(R"(throttles from +a GEMM-bound stage locked at (\d+) MHz)")))
      << r.out;
  EXPECT_GT(std::stod(m[1]), 1000);
  EXPECT_LT(std::stod(m[1]), 1410);
}

TEST_F(HwCli, ShowTakesAPowerLimitAndThrottlesEarlier) {
  auto throttle = [&](const std::string& args) {
    CliResult r = run("hw show --gpu a100-sxm4-40gb" + args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::smatch m;
    EXPECT_TRUE(std::regex_search(r.out, m, std::regex(R"(locked at (\d+) MHz)"))) << r.out;
    return m.empty() ? 0.0 : std::stod(m[1]);
  };
  EXPECT_LT(throttle(" --power-limit 250"), throttle(""));
  expect_one_line_error(run("hw show --gpu a100-sxm4-40gb --power-limit 450"), "--power-limit");
}

TEST_F(HwCli, UnknownGpuIsOneLineListingTheKnownOnes) {
  for (const std::string& args :
       {std::string("hw show --gpu b200"),
        "hw check --gpu b200 --profile " + kProfiles + "bloom+a100_sxm_bf16.csv"}) {
    CliResult r = run(args);
    EXPECT_EQ(r.exit_code, 2) << args;
    EXPECT_TRUE(r.out.empty()) << r.out;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    for (const char* name : {"b200", "a100-sxm4-40gb", "a40", "h100-sxm", "h200"}) {
      EXPECT_NE(r.err.find(name), std::string::npos) << r.err;
    }
  }
}

TEST_F(HwCli, BadProfileIsOneLineWithItsLocation) {
  const std::string bad =
      write("bad.csv", "stage,instruction,frequency,time,energy\n0,forward,1000,x,2\n");
  CliResult r = run("hw check --gpu a40 --profile " + bad);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("bad.csv:2:"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

TEST_F(HwCli, FitWritesACalibratedGpuThatCheckAccepts) {
  const std::string out = path("mine.json");
  CliResult r =
      run("hw fit --base-gpu a100-sxm4-40gb --profile " + kProfiles +
          "bloom+a100_sxm_bf16.csv --name my-a100 --display-name 'My A100' --out " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(std::regex_match(last_line(r.out), kSummary)) << r.out;
  auto doc = nlohmann::json::parse(slurp(out));
  EXPECT_EQ(doc.at("name"), "my-a100");
  EXPECT_EQ(doc.at("display_name"), "My A100");
  EXPECT_NE(doc.at("calibration").at("command").get<std::string>().find("--profile"),
            std::string::npos);

  CliResult check =
      run("hw check --gpu " + out + " --profile " + kProfiles + "bloom+a100_sxm_bf16.csv");
  ASSERT_EQ(check.exit_code, 0) << check.err;
  EXPECT_EQ(last_line(check.out), last_line(r.out));
}

TEST_F(HwCli, FitWithoutOutIsAUsageError) {
  CliResult r =
      run("hw fit --base-gpu a100-sxm4-40gb --profile " + kProfiles + "bloom+a100_sxm_bf16.csv");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--out"), std::string::npos) << r.err;
}

const std::string kPlans = std::string(KAREUS_DATA_DIR) + "/kareus-osdi26/plans.csv";
const std::regex kPlanSummary(
    R"(time_err_median=(\d+\.\d\d) time_err_max=(\d+\.\d\d) energy_err_median=(\d+\.\d\d) energy_err_max=(\d+\.\d\d))");

TEST_F(HwCli, CheckPlansPrintsEveryPlanTheFrontiersAndTheSummary) {
  CliResult r = run("hw check --gpu a100-sxm4-40gb --plans " + kPlans);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(std::regex_match(last_line(r.out), kPlanSummary)) << last_line(r.out);
  EXPECT_NE(r.out.find("not a measurement"), std::string::npos);
  // 85 plans, 8 frontiers (two methods, four jobs), 4 gains, 8 frontiers' missing work.
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 85 + 8 + 4 + 8 + 12) << r.out;
  EXPECT_NE(r.out.find("What the model misses"), std::string::npos);
  EXPECT_NE(r.out.find("llama-3.2-3b tp4 cp2 mbs8 seq4096 plan 126"), std::string::npos);
  EXPECT_NE(r.out.find("max-throughput time gain"), std::string::npos);
}

// The plans are evaluated under the engine they were measured through, named in the header; another
// engine is one flag, and an unknown one a one-line error.
TEST_F(HwCli, CheckPlansNamesItsEngineAndTakesAnother) {
  CliResult r = run("hw check --gpu a100-sxm4-40gb --plans " + kPlans);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out.substr(0, r.out.find('\n')), "engine megatron-te-eager")) << r.out;
  r = run("hw check --gpu a100-sxm4-40gb --engine cuda-graphs --plans " + kPlans);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out.substr(0, r.out.find('\n')), "engine cuda-graphs")) << r.out;
  expect_one_line_error(run("hw check --gpu a100-sxm4-40gb --engine nope --plans " + kPlans), "known engines");
}

// Per job, the gain row's measured gain, model gain (under --engine) and gain under cuda-graphs.
struct GainRow {
  double measured, model, graphs;
};
std::map<std::string, GainRow> gain_rows(const std::string& out) {
  static const std::regex row(R"((llama\S* .*?seq\d+)\s+([+-]\d+\.\d+)%\s+([+-]\d+\.\d+)%\s+[+-]\d+\.\d+\s+([+-]\d+\.\d+)%)");
  std::map<std::string, GainRow> gains;
  for (auto it = std::sregex_iterator(out.begin(), out.end(), row); it != std::sregex_iterator(); ++it) {
    gains[(*it)[1]] = {std::stod((*it)[2]), std::stod((*it)[3]), std::stod((*it)[4])};
  }
  return gains;
}

// Nanobatching+Perseus's gain over Perseus under the engine the plans were measured through is the
// measured one within 2 points, with its sign, on each of the four configs (the artifact's loop
// waits for the GPU at each op, so its cited host costs add to the partitions'). Beside it the gain
// without host overhead (cuda-graphs), which does not depend on --engine and stays above it; a host
// ten times slower takes the gain lower still, first where the partitions are smallest (CP2·TP4
// mbs8 seq4096's are half the others').
TEST_F(HwCli, CheckPlansGainsAreTheMeasuredOnesAndTheGainWithoutHostOverheadBeside) {
  CliResult r = run("hw check --gpu a100-sxm4-40gb --plans " + kPlans);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto cited = gain_rows(r.out);
  ASSERT_EQ(cited.size(), 4u) << r.out;
  for (const auto& [job, g] : cited) {
    EXPECT_NEAR(g.model, g.measured, 2.0) << job;
    EXPECT_EQ(g.model > 0, g.measured > 0) << job;
    EXPECT_GT(g.graphs, g.model + 2.0) << job << ": without the host's time the overlap gains more";
  }

  nlohmann::json slow = nlohmann::json::parse(slurp(std::string(KAREUS_DATA_DIR) + "/engines/megatron-te-eager.json"));
  slow["name"] = "slow-host";
  slow["host"]["partition_op_us"] = 400.0;  // ten times the cited cost of an op of the nanobatched loop
  r = run("hw check --gpu a100-sxm4-40gb --engine " + write("slow.json", slow.dump()) + " --plans " + kPlans);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto slowed = gain_rows(r.out);
  ASSERT_EQ(slowed.size(), 4u) << r.out;
  double least_loss = 1e9;
  for (const auto& [job, g] : slowed) {
    EXPECT_NEAR(g.graphs, cited.at(job).graphs, 1e-9) << job << ": the graphs' gain is not the engine's";
    EXPECT_LT(g.model, cited.at(job).model) << job << ": only nanobatching's loop got slower";
    least_loss = std::min(least_loss, cited.at(job).model - g.model);
  }
  const std::string small = "llama-3.2-3b tp4 cp2 mbs8 seq4096";
  EXPECT_GT(cited.at(small).model - slowed.at(small).model, least_loss) << "the smallest partitions lose the most";
}

// hw fit --engine-trace on the real trace: an engine file that plan takes; it fits an engine, so the
// flags that fit a GPU are refused beside it.
TEST_F(HwCli, FitEngineTraceWritesAnEngineThatPlanTakes) {
  const std::string trace = std::string(KAREUS_TESTS_DIR) + "/engine/trace/layer_cpu_trace.json";
  const std::string out = path("fitted.json");
  CliResult r = run("hw fit --engine-trace " + trace + " --name fitted --out " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "layer_op_us")) << r.out;
  EXPECT_EQ(nlohmann::json::parse(slurp(out)).at("name"), "fitted");
  r = run("plan --engine " + out + " --out " + path("plan"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(slurp(path("plan/summary.json"))).at("engine"), "fitted");
  expect_one_line_error(run("hw fit --engine-trace " + trace + " --base-gpu a100-sxm4-40gb --out " + path("x.json")),
                        "--engine-trace");
  expect_one_line_error(run("hw fit --plans " + kPlans + " --out " + path("x.json")), "--base-gpu");
}

// The model held against the Kareus cluster's measured plans: a ratchet on the medians the
// note of issue 18 records (time 7.05%, energy 2.30% with the preset's time scale fitted to the
// Perseus plans; 15.27% and 10.85% without), so a change that takes the simulated GPU further
// from the hardware fails here; lower them as it improves.
TEST_F(HwCli, CheckPlansErrorsDoNotGrowPastTheRecordedMedians) {
  CliResult r = run("hw check --gpu a100-sxm4-40gb --plans " + kPlans);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::smatch m;
  const std::string summary = last_line(r.out);
  ASSERT_TRUE(std::regex_match(summary, m, kPlanSummary)) << summary;
  EXPECT_LE(std::stod(m[1]), 3.2) << "median time error";
  EXPECT_LE(std::stod(m[3]), 2.1) << "median energy error";
}

// hw fit --plans: the time scale and its record in the written GPU, the power model untouched
// without --profile; the GPU it writes checks the plans as the fit said; neither input is an error.
TEST_F(HwCli, FitPlansWritesTheTimeScaleThatCheckHolds) {
  const std::string out = path("scaled.json");
  CliResult r = run("hw fit --base-gpu a100-sxm4-40gb --plans " + kPlans + " --out " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(std::regex_match(last_line(r.out), kPlanSummary)) << r.out;
  const auto doc = nlohmann::json::parse(slurp(out));
  const hardware::GpuSpec preset = hardware::load_gpu_preset("a100-sxm4-40gb");
  EXPECT_NEAR(doc.at("time_scale").get<double>(), preset.time_scale, 1e-12);
  EXPECT_EQ(doc.at("calibration").at("time_scale").at("fitted_plans"), 45);
  EXPECT_EQ(hardware::load_gpu_spec(out).power, preset.power);
  CliResult check = run("hw check --gpu " + out + " --plans " + kPlans);
  ASSERT_EQ(check.exit_code, 0) << check.err;
  EXPECT_EQ(last_line(check.out), last_line(r.out));
  expect_one_line_error(run("hw fit --base-gpu a100-sxm4-40gb --out " + out), "--profile");
}

// The real producer's output: a fake-device profile of a board whose overlap is 1.3x / 1.8x
// slower than the plain preset's (the fake GPU runs the simulated model of the file it is given)
// fits back to those factors from the plain preset, and hw show reports them.
TEST_F(HwCli, FitPartitionsRecoversTheOverlapOfTheBoardThatMeasuredThem) {
  auto board = nlohmann::json::parse(slurp(std::string(KAREUS_DATA_DIR) + "/gpus/a100-sxm4-40gb.json"));
  board["name"] = "interfering";
  board["overlap_compute_slowdown"] = 1.3;
  board["overlap_collective_slowdown"] = 1.8;
  const std::string board_file = write("interfering.json", board.dump());
  const std::string prof = path("prof");
  CliResult p = run("profile --device fake --gpu " + board_file +
                    " --mode exhaustive --partition fwd_mlp,bwd_attn --clocks 1110:1410:300 --sms 16,32 --slots 2"
                    " --window 0.05 --warmup 0 --cool-down 0 --out " + prof);
  ASSERT_EQ(p.exit_code, 0) << p.err;
  const std::string out = path("fitted.json");
  CliResult r = run("hw fit --base-gpu a100-sxm4-40gb --partitions " + prof + " --out " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("16 overlapped knob(s)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("interfering, gpu:fake"), std::string::npos) << r.out;
  EXPECT_TRUE(std::regex_match(last_line(r.out), std::regex(R"(ratio_err_median=0\.00 \(before \d+\.\d\d\))")))
      << r.out;
  const hardware::GpuSpec fitted = hardware::load_gpu_spec(out);
  EXPECT_NEAR(fitted.overlap_compute_slowdown, 1.3, 1e-4);
  EXPECT_NEAR(fitted.overlap_collective_slowdown, 1.8, 1e-4);
  ASSERT_TRUE(fitted.calibration.overlap);
  EXPECT_EQ(fitted.calibration.overlap->pairs, 16);
  // Everything else is the base's.
  const hardware::GpuSpec preset = hardware::load_gpu_preset("a100-sxm4-40gb");
  EXPECT_EQ(fitted.power, preset.power);
  EXPECT_EQ(fitted.time_scale, preset.time_scale);
  // Held, not fitted: the fitted file explains the measurements, the plain preset does not.
  CliResult held = run("hw check --gpu " + out + " --partitions " + prof);
  ASSERT_EQ(held.exit_code, 0) << held.err;
  EXPECT_EQ(last_line(held.out), "ratio_err_median=0.00") << held.out;
  CliResult plain = run("hw check --gpu a100-sxm4-40gb --partitions " + prof);
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  std::smatch m;
  const std::string plain_last = last_line(plain.out);
  ASSERT_TRUE(std::regex_match(plain_last, m, std::regex(R"(ratio_err_median=(\d+\.\d\d))"))) << plain.out;
  EXPECT_GT(std::stod(m[1]), 5.0);
  expect_one_line_error(run("hw check --gpu a100-sxm4-40gb --partitions " + prof + " --plans " + kPlans), "give one");
  // A later power fit from that file keeps the overlap factors and their record.
  const std::string refit = path("refit.json");
  ASSERT_EQ(run("hw fit --base-gpu " + out + " --profile " + kProfiles + "bloom+a100_sxm_bf16.csv --out " + refit).exit_code,
            0);
  const hardware::GpuSpec refitted = hardware::load_gpu_spec(refit);
  EXPECT_EQ(refitted.overlap_compute_slowdown, fitted.overlap_compute_slowdown);
  EXPECT_EQ(refitted.overlap_collective_slowdown, fitted.overlap_collective_slowdown);
  EXPECT_EQ(refitted.calibration.overlap, fitted.calibration.overlap);
  CliResult show = run("hw show --gpu " + out);
  ASSERT_EQ(show.exit_code, 0) << show.err;
  EXPECT_NE(show.out.find("compute 1.3000x slower beside a moving collective"), std::string::npos) << show.out;

  expect_one_line_error(run("hw fit --base-gpu a100-sxm4-40gb --partitions " + path("none") + " --out " + out),
                        "is not a directory");
  std::filesystem::create_directories(path("empty"));
  expect_one_line_error(run("hw fit --base-gpu a100-sxm4-40gb --partitions " + path("empty") + " --out " + out),
                        "holds no *.journal.jsonl");
  // The same journal with its sequential knobs only: nothing overlapped to fit.
  std::istringstream journal(slurp(prof + "/fwd_mlp.journal.jsonl"));
  std::string sequential, line;
  while (std::getline(journal, line)) {
    if (!contains(line, "\"overlap_start\"") || contains(line, "\"overlap_start\":\"none\"")) sequential += line + "\n";
  }
  std::filesystem::create_directories(path("seq"));
  write("seq/fwd_mlp.journal.jsonl", sequential);
  expect_one_line_error(run("hw fit --base-gpu a100-sxm4-40gb --partitions " + path("seq") + " --out " + out),
                        "no overlapped knob");
}

TEST_F(HwCli, CheckNeedsProfilesOrPlansButNotBoth) {
  expect_one_line_error(run("hw check --gpu a100-sxm4-40gb"), "--profile");
  expect_one_line_error(run("hw check --gpu a100-sxm4-40gb --plans " + kPlans + " --profile " + kProfiles +
                            "bloom+a100_sxm_bf16.csv"),
                        "--plans");
  const std::string bad = write("plans.csv", "method,model,tp,cp,mbs,seq,plan,time_s,energy_j\nPerseus,llama-3.2-3b,8,1,8,4096,1,x,1\n");
  write("plan_clocks.csv", "method,model,tp,cp,mbs,seq,plan,stage,position,instruction,microbatch,freq_mhz\n"
                           "Perseus,llama-3.2-3b,8,1,8,4096,1,0,0,forward,0,1410\n");
  expect_one_line_error(run("hw check --gpu a100-sxm4-40gb --plans " + bad), "plans.csv:2:");
}

// Our own plan files: the real `kareus plan` output is a Kareus plan, whose knobs differ per
// partition; check --plans says so in one line rather than evaluating it under a baseline's knob.
TEST_F(HwCli, CheckPlansNamesAKareusPlanItCannotHold) {
  const std::string out = path("plan");
  ASSERT_EQ(run("plan --out " + out).exit_code, 0);
  expect_one_line_error(run("hw check --gpu a100-sxm4-40gb --plans " + out + "/plan.json"), "source.method");
}

}  // namespace
}  // namespace kareus::testing
