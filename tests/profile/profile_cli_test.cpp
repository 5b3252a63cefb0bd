// `kareus profile` end to end on fake GPUs: a run killed with SIGKILL mid-way and rerun resumes from
// its journals, measures no knob twice, and ends with the results of an uninterrupted run; and
// `kareus plan --evaluator gpu` without a GPU is one clear line.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include "cli/cli_fixture.hpp"
#include "kareus/search/journal.hpp"

namespace kareus::testing {
namespace {

// 4 clocks x (1 + 2 slots x 2 SM levels) = 20 knobs per partition, two partitions; 40 ms idle
// after each window gives the run a pace to interrupt.
const std::string kFakeRun =
    "profile --device fake --tp 2 --partition fwd_mlp,bwd_attn --mode exhaustive --clocks 1110:1410:100 "
    "--sms 8,16 --slots 2 --window 2 --warmup 0.2 --cool-down 0.04 --out ";

std::size_t journal_lines(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::size_t n = 0;
  for (std::string line; std::getline(in, line);) n += !line.empty();
  return n;
}

using Results = std::map<std::string, std::pair<double, double>>;  // "key knob" -> (time, energy)

// Every measurement of the run's journals; fails the test when a knob appears twice.
Results journal_results(const std::filesystem::path& dir) {
  Results out;
  for (const std::string key : {"fwd_mlp", "bwd_attn"}) {
    const search::JournalContents j = search::Journal::read(dir / (key + ".journal.jsonl"));
    for (const auto& m : j.measurements) {
      const std::string id = fmt::format("{} {:g}/{}/{}", key, m.knob.freq_mhz, m.knob.sms, m.knob.slot);
      EXPECT_TRUE(m.ok) << id << ": " << m.error;
      EXPECT_TRUE(out.emplace(id, std::pair{m.time_s, m.energy_j}).second) << id << " measured twice";
    }
  }
  return out;
}

class ProfileCli : public CliTest {};

TEST_F(ProfileCli, AKilledRunResumesWithoutMeasuringAKnobTwice) {
  const auto reference = dir_ / "whole";
  ASSERT_EQ(run(kFakeRun + reference.string()).exit_code, 0);
  const Results whole = journal_results(reference);
  ASSERT_EQ(whole.size(), 40u);

  const auto killed = dir_ / "killed";
  const std::string command = std::string(KAREUS_BINARY) + " " + kFakeRun + killed.string() + " >/dev/null 2>&1";
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    execl("/bin/sh", "sh", "-c", ("exec " + command).c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  // Kill it once the first partition's journal holds a few measurements but before it is done.
  const auto journal = killed / "fwd_mlp.journal.jsonl";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (journal_lines(journal) < 6 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_EQ(kill(child, SIGKILL), 0);
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status)) << "the run finished before it could be killed";
  const std::size_t before = journal_lines(journal) - 1;  // the header
  ASSERT_GE(before, 5u);
  ASSERT_LT(before, 20u);
  EXPECT_FALSE(std::filesystem::exists(killed / "measurements.csv"));

  const CliResult resumed = run(kFakeRun + killed.string());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_TRUE(contains(resumed.out, fmt::format("{} knobs measured now", 40 - before))) << resumed.out;
  const Results after = journal_results(killed);
  ASSERT_EQ(after.size(), whole.size());
  for (const auto& [id, figures] : whole) {
    ASSERT_TRUE(after.contains(id)) << id;
    EXPECT_NEAR(after.at(id).first, figures.first, 1e-9 * figures.first) << id;
    EXPECT_NEAR(after.at(id).second, figures.second, 1e-9 * figures.second) << id;
  }
  // The per-rank log has one row per measurement of either run, none lost and none repeated.
  EXPECT_EQ(journal_lines(killed / "ranks.csv"), 1 + 40u);
  EXPECT_EQ(slurp(killed / "measurements.csv").size(), slurp(reference / "measurements.csv").size());
}

// --noise on fake devices, as the simulated GPU takes it: seeded, and named in the journal, so a
// noise-free run refuses to resume a noisy one.
TEST_F(ProfileCli, NoiseOnFakeDevicesIsSeededAndItsJournalKeptApart) {
  const std::string flags = kFakeRun.substr(std::string("profile ").size());
  const auto noisy = dir_ / "noisy", again = dir_ / "again", clean = dir_ / "clean";
  ASSERT_EQ(run("profile --noise 0.02 --noise-seed 3 " + flags + noisy.string()).exit_code, 0);
  ASSERT_EQ(run("profile --noise 0.02 --noise-seed 3 " + flags + again.string()).exit_code, 0);
  ASSERT_EQ(run(kFakeRun + clean.string()).exit_code, 0);
  EXPECT_EQ(journal_results(noisy), journal_results(again));
  const Results a = journal_results(noisy), b = journal_results(clean);
  ASSERT_EQ(a.size(), b.size());
  int moved = 0;
  for (const auto& [id, figures] : b) moved += std::abs(a.at(id).first / figures.first - 1) > 1e-4;
  EXPECT_GT(moved, static_cast<int>(b.size()) / 2);
  expect_one_line_error(run(kFakeRun + noisy.string()), "noise");
}

// --remeasure on fake devices with noise: a knob measured again is one knob in measurements.csv,
// at the mean of its journalled measurements, and the output says the knobs and the repeats apart.
TEST_F(ProfileCli, AKnobMeasuredAgainIsOneRowAtItsMeanAndSaidApart) {
  const auto out = dir_ / "again";
  const std::string flags =
      "profile --device fake --tp 2 --partition fwd_mlp --mode mobo --clocks 1005:1365:60 --sms 5,11,20,27 --noise "
      "0.01 --remeasure 3 --budget 60 --window 2 --warmup 0.2 --cool-down 0 --out " +
      out.string();
  const CliResult r = run(flags);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const search::JournalContents j = search::Journal::read(out / "fwd_mlp.journal.jsonl");
  ASSERT_EQ(j.measurements.size(), 60u);
  std::map<std::string, std::vector<std::pair<double, double>>> by_knob;
  std::size_t again = 0;
  for (const auto& m : j.measurements) {
    auto& seen = by_knob[fmt::format("{:g},{},{}", m.knob.freq_mhz, m.knob.sms, m.knob.slot)];
    EXPECT_EQ(m.repeat, static_cast<int>(seen.size()));
    seen.emplace_back(m.time_s, m.energy_j);
    again += m.repeat > 0 ? 1 : 0;
  }
  ASSERT_GT(again, 0u) << "no knob was measured again";
  EXPECT_TRUE(contains(r.out, fmt::format("{} measured ({} measurements again)", by_knob.size(), again))) << r.out;
  EXPECT_TRUE(contains(r.out, fmt::format("{} knobs measured now, {} measured again", 60 - again, again))) << r.out;
  std::ifstream csv(out / "measurements.csv");
  std::string line;
  std::getline(csv, line);
  std::size_t rows = 0;
  while (std::getline(csv, line)) {
    ++rows;
    std::vector<std::string> f;
    std::stringstream in(line);
    for (std::string cell; std::getline(in, cell, ',');) f.push_back(cell);
    ASSERT_EQ(f.size(), 7u) << line;
    const auto& seen = by_knob.at(f[1] + "," + f[2] + "," + f[3]);
    double time = 0;
    for (const auto& [t, e] : seen) time += t / static_cast<double>(seen.size());
    EXPECT_NEAR(std::stod(f[4]), time, 1e-8 * time) << line;
  }
  EXPECT_EQ(rows, by_knob.size());
}

TEST_F(ProfileCli, PlanOnTheGpuWithoutOneIsOneClearLine) {
  if (std::filesystem::exists("/dev/nvidiactl")) GTEST_SKIP() << "this machine has an NVIDIA GPU";
  const CliResult r = run("plan --evaluator gpu --out " + path("plan"));
  expect_one_line_error(r, "needs an NVIDIA GPU", 3);  // the environment, not the input
  EXPECT_FALSE(std::filesystem::exists(path("plan")));
  expect_one_line_error(run("profile --out " + path("prof")), "needs an NVIDIA GPU", 3);
}

TEST_F(ProfileCli, BadFlagsFailBeforeAnyDeviceIsTouched) {
  expect_one_line_error(run("profile --device tpu --out " + path("p")), "--device");
  expect_one_line_error(run("profile --device fake --collective ib --out " + path("p")), "--collective");
  expect_one_line_error(run("profile --device fake --partition fwd_nope --out " + path("p")), "fwd_nope");
  expect_one_line_error(run("profile --device fake --tp 2 --window 0 --out " + path("p")), "window");
  expect_one_line_error(run("profile --device nvml --noise 0.01 --out " + path("p")), "--device fake only");
  expect_one_line_error(run("profile --device fake --noise 0.5 --out " + path("p")), "--noise");
}

TEST_F(ProfileCli, PStaticOnOneRankIsOneClearLineAndWritesNothing) {
  expect_one_line_error(run("profile --device fake --p-static --window 1 --out " + path("ps")), "mpirun -np 2");
  EXPECT_FALSE(std::filesystem::exists(path("ps")));
  expect_one_line_error(run("profile --device fake --p-static --stage-sweep --out " + path("ps")), "--stage-sweep");
}

TEST_F(ProfileCli, HelpSaysHowToRunIt) {
  const CliResult r = run("profile --help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_TRUE(contains(r.out, "mpirun")) << r.out;
  EXPECT_TRUE(contains(r.out, "--collective")) << r.out;
  EXPECT_TRUE(contains(r.out, "--p-static")) << r.out;
  EXPECT_TRUE(contains(r.out, "stage,instruction,frequency,time,energy")) << r.out;
  EXPECT_FALSE(contains(r.out, "--fake-rank-slowdown")) << r.out;
}

}  // namespace
}  // namespace kareus::testing
