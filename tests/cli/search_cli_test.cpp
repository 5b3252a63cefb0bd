// The `kareus search` command end to end on the simulated GPU: outputs, resuming from the journal,
// exhaustive mode, and bad input as one line on stderr, exit 2, the journal untouched.
#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cli_fixture.hpp"

namespace kareus::testing {
namespace {

class SearchCli : public CliTest {
 protected:
  // Runs `kareus search <args>`.
  CliResult search(const std::string& args) { return run("search " + args); }
  std::string out() const { return path("out"); }
};

// A small grid keeps these quick: 4 clocks, 4 SM levels.
const std::string kSmall = " --clocks 1200:1410:70 --sms 6:24:6 ";

TEST_F(SearchCli, WritesFrontiersAndSummaryAndResumes) {
  CliResult r = search("--partition fwd_mlp --budget 30 --batch 6 --seed 3" + kSmall + "--out " + out());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("a model, not a measurement"), std::string::npos) << r.out;
  const std::string frontier = slurp(dir_ / "out" / "fwd_mlp.frontier.csv");
  EXPECT_EQ(frontier.rfind("freq_mhz,sms,slot,time_s,energy_j,effective_energy_j\n", 0), 0u) << frontier;
  EXPECT_GT(std::count(frontier.begin(), frontier.end(), '\n'), 2);
  EXPECT_TRUE(std::filesystem::exists(dir_ / "out" / "fwd_mlp.effective.frontier.csv"));
  auto summary = nlohmann::json::parse(slurp(dir_ / "out" / "summary.json"));
  const auto& part = summary["partitions"]["fwd_mlp"];
  EXPECT_EQ(part["measurements"], 30);
  EXPECT_EQ(part["measured_this_run"], 30);
  EXPECT_GT(part["grid_size"].get<int>(), 30);
  EXPECT_GT(part["hypervolume"]["value_j_s"].get<double>(), 0);
  // Progress lines (stderr is not a terminal here).
  EXPECT_NE(r.err.find("measurements"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("hypervolume"), std::string::npos) << r.err;

  // The journal: a header and one line per measurement.
  const std::string journal = slurp(dir_ / "out" / "fwd_mlp.journal.jsonl");
  EXPECT_EQ(std::count(journal.begin(), journal.end(), '\n'), 31);

  // Rerun with a larger budget: only the difference is measured.
  r = search("--partition fwd_mlp --budget 40 --batch 6 --seed 3" + kSmall + "--out " + out());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  summary = nlohmann::json::parse(slurp(dir_ / "out" / "summary.json"));
  EXPECT_EQ(summary["partitions"]["fwd_mlp"]["measurements"], 40);
  EXPECT_EQ(summary["partitions"]["fwd_mlp"]["measured_this_run"], 10);
}

TEST_F(SearchCli, SameSeedSameOutputs) {
  auto once = [&](const std::string& sub) {
    CliResult r = search("--partition bwd_attn --budget 28 --batch 5 --seed 9" + kSmall + "--out " + path(sub));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return slurp(dir_ / sub / "bwd_attn.frontier.csv") + slurp(dir_ / sub / "bwd_attn.effective.frontier.csv");
  };
  EXPECT_EQ(once("a"), once("b"));
}

// --noise as plan and compare take it: the same seeded noise on the simulated GPU, named in the
// summary and the journal, so a noisy journal never resumes into a noise-free search.
TEST_F(SearchCli, NoiseIsSeededNamedAndKeptApartFromNoiseFree) {
  const std::string args = "--partition fwd_mlp --mode exhaustive --budget 100000" + kSmall;
  auto frontier = [&](const std::string& sub, const std::string& noise) {
    CliResult r = search(args + noise + " --out " + path(sub));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return slurp(dir_ / sub / "fwd_mlp.frontier.csv");
  };
  const std::string clean = frontier("clean", ""), noisy = frontier("noisy", " --noise 0.02 --noise-seed 4");
  EXPECT_NE(clean, noisy);
  EXPECT_EQ(frontier("again", " --noise 0.02 --noise-seed 4"), noisy);
  EXPECT_NE(frontier("other", " --noise 0.02 --noise-seed 5"), noisy);
  const auto summary = nlohmann::json::parse(slurp(dir_ / "noisy" / "summary.json"));
  EXPECT_NE(summary["evaluator"].get<std::string>().find("noise(2%, seed 4)"), std::string::npos) << summary["evaluator"];
  // The noisy run's journal refuses a noise-free resume, naming the evaluator it was measured on.
  CliResult resumed = search(args + "--journal " + (dir_ / "noisy" / "fwd_mlp.journal.jsonl").string() + " --out " + path("resumed"));
  EXPECT_EQ(resumed.exit_code, 2) << resumed.err;
  EXPECT_NE(resumed.err.find("noise"), std::string::npos) << resumed.err;
  expect_one_line_error(search(args + "--noise 0.6 --out " + path("bad")), "--noise");
}

// MOBO models the simulated GPU's noise unless told another; the summary says which it modelled.
// Modelled, the frontier is of the surrogates' estimates; taken as exact, of the measurements.
TEST_F(SearchCli, MeasurementNoiseDefaultsToTheSimulatedNoiseAndCanBeOverridden) {
  const std::string args = "--partition fwd_mlp --budget 40 --batch 6 --seed 3 --serial --noise 0.02" + kSmall;
  struct Run {
    double modelled;
    std::string journal;
    bool frontier_as_measured;  // every frontier time is one the journal holds
  };
  auto run = [&](const std::string& sub, const std::string& extra) {
    CliResult r = search(args + extra + " --out " + path(sub));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    const auto summary = nlohmann::json::parse(slurp(dir_ / sub / "summary.json"));
    std::set<std::string> measured_times;
    std::istringstream journal(slurp(dir_ / sub / "fwd_mlp.journal.jsonl"));
    std::string line;
    std::getline(journal, line);  // the header
    while (std::getline(journal, line)) {
      measured_times.insert(fmt::format("{:.9g}", nlohmann::json::parse(line)["time_s"].get<double>()));
    }
    std::istringstream frontier(slurp(dir_ / sub / "fwd_mlp.frontier.csv"));
    std::getline(frontier, line);
    bool as_measured = true;
    while (std::getline(frontier, line)) {
      std::vector<std::string> cells;
      std::istringstream row(line);
      for (std::string cell; std::getline(row, cell, ',');) cells.push_back(cell);
      as_measured = as_measured && cells.size() == 6 && measured_times.contains(cells[3]);
    }
    return Run{summary["measurement_noise"].get<double>(), slurp(dir_ / sub / "fwd_mlp.journal.jsonl"), as_measured};
  };
  const auto told = run("told", "");
  const auto exact = run("exact", " --measurement-noise 0");
  const auto same = run("same", " --measurement-noise 0.02");
  EXPECT_EQ(told.modelled, 0.02);
  EXPECT_EQ(exact.modelled, 0.0);
  EXPECT_EQ(same.journal, told.journal);
  EXPECT_NE(exact.journal, told.journal);  // the model's choices follow what it is told
  EXPECT_FALSE(told.frontier_as_measured);
  EXPECT_TRUE(exact.frontier_as_measured);
  expect_one_line_error(search(args + "--measurement-noise 0.5 --out " + path("bad")), "--measurement-noise");
  expect_one_line_error(search(args + "--measurement-noise -0.1 --out " + path("bad")), "--measurement-noise");
  EXPECT_FALSE(std::filesystem::exists(dir_ / "bad"));
}

// By default each knob is measured once; --remeasure 3 lets MOBO measure knobs of its front again,
// each a journal line that says so, the summary counting them; below 1 is bad input.
TEST_F(SearchCli, RemeasureCapsTheMeasurementsOfOneKnob) {
  const std::string args = "--partition fwd_mlp --budget 60 --batch 6 --seed 3 --serial --noise 0.02" + kSmall;
  auto again = [&](const std::string& sub, const std::string& extra) {
    CliResult r = search(args + extra + " --out " + path(sub));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    const auto summary = nlohmann::json::parse(slurp(dir_ / sub / "summary.json"));
    const auto& part = summary["partitions"]["fwd_mlp"];
    std::istringstream journal(slurp(dir_ / sub / "fwd_mlp.journal.jsonl"));
    std::string line;
    std::getline(journal, line);  // the header
    std::size_t repeats = 0;
    while (std::getline(journal, line)) repeats += nlohmann::json::parse(line).contains("repeat") ? 1 : 0;
    EXPECT_EQ(part["measured_again"].get<std::size_t>(), repeats);
    EXPECT_EQ(part["measurements"].get<std::size_t>(), part["measured_knobs"].get<std::size_t>() + repeats);
    return repeats;
  };
  EXPECT_EQ(again("once", ""), 0u);
  EXPECT_GT(again("thrice", " --remeasure 3"), 0u);
  expect_one_line_error(search(args + " --remeasure 0 --out " + path("bad")), "--remeasure");
  EXPECT_FALSE(std::filesystem::exists(dir_ / "bad"));
}

TEST_F(SearchCli, ExhaustiveMeasuresTheWholeGridOfEveryPartition) {
  CliResult r = search("--partition all --mode exhaustive --clocks 1350:1410:60 --sms 12:24:12 --budget 100000 --out " + out());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto summary = nlohmann::json::parse(slurp(dir_ / "out" / "summary.json"));
  EXPECT_GE(summary["partitions"].size(), 4u);
  for (const auto& [key, part] : summary["partitions"].items()) {
    EXPECT_EQ(part["measurements"], part["grid_size"]) << key;
    EXPECT_EQ(part["stop"], "grid") << key;
    EXPECT_TRUE(std::filesystem::exists(dir_ / "out" / (key + ".frontier.csv"))) << key;
  }
}

TEST_F(SearchCli, BadInputIsOneLineExitTwoAndTouchesNothing) {
  expect_one_line_error(search("--partition fwd_nothing --out " + out()), "fwd_nothing");
  expect_one_line_error(search("--partition fwd_mlp --budget 5 --out " + out()), "--budget");
  expect_one_line_error(search("--partition fwd_mlp --batch 0 --out " + out()), "--batch");
  expect_one_line_error(search("--partition fwd_mlp --mode greedy --out " + out()), "--mode");
  expect_one_line_error(search("--partition fwd_mlp --evaluator magic --out " + out()), "--evaluator");
  expect_one_line_error(search("--partition fwd_mlp --clocks 1410:900:30 --out " + out()), "--clocks");
  EXPECT_FALSE(std::filesystem::exists(dir_ / "out"));

  // A journal of another partition, another workload, or not a journal at all: refused, untouched.
  const std::string journal = path("j.jsonl");
  ASSERT_EQ(search("--partition fwd_mlp --budget 25" + kSmall + "--journal " + journal + " --out " + out()).exit_code, 0);
  const std::string before = slurp(journal);
  expect_one_line_error(search("--partition bwd_mlp --budget 25" + kSmall + "--journal " + journal + " --out " + out()),
                        "partition");
  expect_one_line_error(
      search("--partition fwd_mlp --seq 8192 --budget 25" + kSmall + "--journal " + journal + " --out " + out()),
      "workload");
  EXPECT_EQ(slurp(journal), before);
  const std::string garbage = write("notes.txt", "my notes\nabout the run\n");
  expect_one_line_error(search("--partition fwd_mlp --budget 25" + kSmall + "--journal " + garbage + " --out " + out()),
                        "journal");
  EXPECT_EQ(slurp(garbage), "my notes\nabout the run\n");
}

// --mode, --budget and --seed are one flag group: plan, compare, search and profile refuse the same
// values with the same line, before anything is written.
TEST_F(SearchCli, TheFourSearchingCommandsRefuseTheSameSearchFlags) {
  for (const std::string flags : {"--mode greedy", "--mode MOBO", "--budget x", "--budget -3", "--budget 0", "--seed x"}) {
    std::string first_error;
    for (const std::string command : {"plan", "compare", "search", "profile"}) {
      const CliResult r = run(command + " " + flags + " --out " + path("never"));
      expect_one_line_error(r, flags.substr(0, flags.find(' ')));
      if (first_error.empty()) first_error = r.err;
      EXPECT_EQ(r.err, first_error) << command << " " << flags;
    }
  }
  EXPECT_FALSE(std::filesystem::exists(path("never")));
}

}  // namespace
}  // namespace kareus::testing
