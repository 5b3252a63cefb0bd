// The journal: round trip, resume, a torn last line, refusing foreign or unreadable journals
// without touching them, and a search killed with SIGKILL losing at most the measurement in flight.
#include "kareus/search/journal.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fcntl.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "kareus/core/error.hpp"
#include "kareus/core/io.hpp"
#include "kareus/search/search.hpp"
#include "search/synthetic.hpp"

namespace kareus::search {
namespace {

JournalHeader header(const std::string& partition = "fwd_mlp") {
  return {nlohmann::json{{"model", "llama-3.2-3b"}, {"tp", 8}, {"seq_len", 4096}, {"static_power_w", 85.0}}, partition,
          "sim"};
}

Measurement sample(int i, bool ok = true) {
  Measurement m;
  m.knob = Knob{900.0 + 30 * i, 3 * (i % 10 + 1), i % 3 == 0 ? "none" : "linear_1"};
  m.ok = ok;
  if (ok) {
    m.time_s = 1e-3 * (1 + i) / 3.0;
    m.energy_j = 0.1 + i / 7.0;
    m.effective_energy_j = m.energy_j - 85 * m.time_s;
  } else {
    m.error = "GPU fell off the bus";
  }
  m.pass = i % 2 ? PickPass::kHvReal : PickPass::kInitial;
  m.batch = i / 4;
  if (i % 2) m.predicted = Prediction{1e-3, 1e-4, 0.2, 0.01, 0.3, 0.02};
  return m;
}

void expect_same(const Measurement& a, const Measurement& b) {
  EXPECT_EQ(a.knob, b.knob);
  EXPECT_EQ(a.ok, b.ok);
  if (a.ok) {
    EXPECT_EQ(a.time_s, b.time_s);  // exact: doubles round-trip
    EXPECT_EQ(a.energy_j, b.energy_j);
    EXPECT_EQ(a.effective_energy_j, b.effective_energy_j);
  } else {
    EXPECT_TRUE(std::isnan(b.time_s));
    EXPECT_EQ(a.error, b.error);
  }
  EXPECT_EQ(a.pass, b.pass);
  EXPECT_EQ(a.batch, b.batch);
  EXPECT_EQ(a.repeat, b.repeat);
  EXPECT_EQ(a.predicted, b.predicted);
}

class JournalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("kareus-journal-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    path_ = dir_ / "fwd_mlp.jsonl";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_, path_;
};

TEST_F(JournalTest, MeasurementLinesRoundTripWithTheArtifactsFieldNames) {
  for (int i = 0; i < 8; ++i) {
    Measurement m = sample(i, i != 5);
    std::string line = encode_measurement(m);
    EXPECT_EQ(line.find('\n'), std::string::npos);
    auto doc = nlohmann::json::parse(line);
    for (const char* key : {"freq", "overlap_start", "overlap_end", "sm", "block", "time_s", "energy_j"}) {
      EXPECT_TRUE(doc.contains(key)) << key;
    }
    expect_same(m, decode_measurement(line, "test"));
  }
  EXPECT_THROW(decode_measurement("{\"freq\": 900}", "test"), InputError);
  EXPECT_THROW(decode_measurement("not json", "test"), InputError);
}

// A knob measured again says so ("repeat": n); a first measurement's line is as it always was.
TEST_F(JournalTest, AMeasurementAgainIsRecordedAsARepeat) {
  Measurement m = sample(3);
  EXPECT_FALSE(nlohmann::json::parse(encode_measurement(m)).contains("repeat"));
  m.repeat = 2;
  const std::string line = encode_measurement(m);
  EXPECT_EQ(nlohmann::json::parse(line)["repeat"], 2);
  expect_same(m, decode_measurement(line, "test"));
  nlohmann::json bad = nlohmann::json::parse(line);
  bad["repeat"] = -1;
  EXPECT_THROW(decode_measurement(bad.dump(), "test"), InputError);
  bad["repeat"] = 1.5;
  EXPECT_THROW(decode_measurement(bad.dump(), "test"), InputError);
}

TEST_F(JournalTest, CreatesThenResumes) {
  {
    Journal j = Journal::open(path_, header());
    EXPECT_TRUE(j.measurements().empty());
    for (int i = 0; i < 5; ++i) j.append(sample(i, i != 2));
  }
  Journal j = Journal::open(path_, header());
  std::vector<Measurement> got = j.measurements();
  ASSERT_EQ(got.size(), 5u);
  for (int i = 0; i < 5; ++i) expect_same(sample(i, i != 2), got[static_cast<std::size_t>(i)]);
  j.append(sample(5));
  EXPECT_EQ(Journal::read(path_).measurements.size(), 6u);
  EXPECT_EQ(Journal::read(path_).header, header());
}

// An artifact's eval_results.jsonl resumes as a journal: its records are measurements (slots in
// our names), new successes are appended as artifact records, failures and repeats are not written, and a
// torn last record is dropped; the file stays a log the artifact reads.
TEST_F(JournalTest, AnArtifactLogResumesAndGrowsInItsOwnForm) {
  std::filesystem::create_directories(dir_ / "fwd_mlp");
  const auto log = dir_ / "fwd_mlp" / "eval_results.jsonl";
  const std::string records =
      R"({"freq": 1410, "overlap_start": "activation_0", "overlap_end": "none", "sm": 12, "block": 1024, "time_s": 0.01, "energy_j": 3.5})"
      "\n"
      R"({"freq": 1410, "overlap_start": "linear_0", "overlap_end": "linear_1", "sm": 12, "block": 1024, "time_s": 0.01, "energy_j": 3.5})"
      "\n";
  std::ofstream(log) << records << R"({"freq": 1230, "overlap_st)";  // torn
  {
    Journal j = Journal::open(log, header());
    EXPECT_TRUE(j.artifact_log());
    const auto got = j.measurements();
    ASSERT_EQ(got.size(), 1u);  // the overlap_end record is not a Kareus knob
    EXPECT_EQ(got[0].knob, (Knob{1410, 12, "act_0"}));
    EXPECT_TRUE(got[0].ok);
    EXPECT_DOUBLE_EQ(got[0].energy_j, 3.5);
    Measurement m = sample(1);
    m.knob = {1230, 6, "act_0"};
    j.append(m);
    j.append(sample(2, false));
    m.repeat = 1;  // the artifact keeps a knob's first record only
    j.append(m);
  }
  const std::string text = read_text_file(log);
  EXPECT_EQ(text.rfind(records, 0), 0u) << "the log's records stay as they were";
  const std::string appended = text.substr(records.size());
  EXPECT_EQ(std::count(appended.begin(), appended.end(), '\n'), 1) << appended;
  const auto doc = nlohmann::json::parse(appended);
  EXPECT_EQ(doc["overlap_start"], "activation_0");
  EXPECT_EQ(doc["freq"], 1230);
  EXPECT_FALSE(doc.contains("status"));
  EXPECT_EQ(Journal::read(log).measurements.size(), 2u);
  // A log in another partition's directory is refused.
  EXPECT_THROW(Journal::open(log, header("bwd_mlp")), InputError);
}

TEST_F(JournalTest, ATornLastLineIsDroppedWithAWarning) {
  {
    Journal j = Journal::open(path_, header());
    for (int i = 0; i < 3; ++i) j.append(sample(i));
  }
  std::string intact = read_text_file(path_);
  std::string torn = encode_measurement(sample(3)).substr(0, 25);
  std::ofstream(path_, std::ios::app) << torn;
  JournalContents c = Journal::read(path_);
  EXPECT_TRUE(c.torn_tail);
  EXPECT_EQ(c.measurements.size(), 3u);
  EXPECT_EQ(read_text_file(path_), intact + torn);  // read() changes nothing
  {
    Journal j = Journal::open(path_, header());
    EXPECT_EQ(j.measurements().size(), 3u);
    EXPECT_EQ(read_text_file(path_), intact);  // the torn part is gone, appends start clean
    j.append(sample(4));
  }
  c = Journal::read(path_);
  EXPECT_FALSE(c.torn_tail);
  ASSERT_EQ(c.measurements.size(), 4u);
  expect_same(sample(4), c.measurements[3]);
}

TEST_F(JournalTest, AGarbledLastLineIsDroppedButAGarbledMiddleLineIsAnError) {
  {
    Journal j = Journal::open(path_, header());
    for (int i = 0; i < 2; ++i) j.append(sample(i));
  }
  std::string intact = read_text_file(path_);
  std::ofstream(path_, std::ios::app) << std::string(12, '\0') << "\n";
  EXPECT_EQ(Journal::read(path_).measurements.size(), 2u);
  EXPECT_TRUE(Journal::read(path_).torn_tail);
  write_file_atomic(path_, intact + "{garbage\n" + encode_measurement(sample(3)) + "\n");
  std::string before = read_text_file(path_);
  EXPECT_THROW(Journal::open(path_, header()), InputError);
  EXPECT_EQ(read_text_file(path_), before);
}

// A whole line (newline and all) that is not a measurement was not torn by a crash: someone edited
// the journal. Before, a last such line was dropped, and its text truncated away, on resume.
TEST_F(JournalTest, AWholeGarbledLastLineIsRefusedUntouched) {
  {
    Journal j = Journal::open(path_, header());
    for (int i = 0; i < 2; ++i) j.append(sample(i));
  }
  std::ofstream(path_, std::ios::app) << R"({"freq": 1230, "overlap_st)" << "\n";
  const std::string before = read_text_file(path_);
  try {
    Journal::open(path_, header());
    FAIL() << "resumed a journal whose last line was edited";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(":4: not a JSON line"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("fix or delete line 4"), std::string::npos) << e.what();
  }
  EXPECT_EQ(read_text_file(path_), before);
}

// A measurement line's integers must be integers an int holds: get<int>() of 1e300 or of 24.5 is
// undefined behaviour (or a silent truncation), and the line is someone's edit to fix.
TEST_F(JournalTest, AnSmOrBatchThatIsNoIntIsRefusedNamingItsLine) {
  {
    Journal j = Journal::open(path_, header());
    j.append(sample(0));
  }
  const std::string intact = read_text_file(path_);
  nlohmann::json line = nlohmann::json::parse(encode_measurement(sample(1)));
  for (const auto& [key, value] : std::vector<std::pair<std::string, nlohmann::json>>{
           {"sm", 1e300}, {"sm", 24.5}, {"sm", 4294967296LL}, {"sm", "24"}, {"batch", 1e300}, {"batch", -1e20}}) {
    nlohmann::json bad = line;
    bad[key] = value;
    write_file_atomic(path_, intact + bad.dump() + "\n");
    try {
      (void)Journal::read(path_);
      FAIL() << key << " = " << value.dump() << " was read";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(":3: '" + key + "' must be an integer"), std::string::npos) << e.what();
    }
  }
  nlohmann::json missing = line;
  missing.erase("batch");
  write_file_atomic(path_, intact + missing.dump() + "\n");
  EXPECT_EQ(Journal::read(path_).measurements.back().batch, 0) << "a line without batch is of the initial design";
}

// A full disk (here a file-size limit, with SIGXFSZ ignored so that the write fails instead of
// killing the process): the append throws EnvironmentError (exit code 3, not a bug's 70) and the
// journal is cut back to its whole lines, so that the next append, or a rerun, starts on a fresh
// line instead of after a torn fragment.
TEST_F(JournalTest, AFailedWriteLeavesTheJournalWhole) {
  Journal j = Journal::open(path_, header());
  for (int i = 0; i < 2; ++i) j.append(sample(i));
  const std::string before = read_text_file(path_);
  struct rlimit saved {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
  struct rlimit tight = saved;
  tight.rlim_cur = before.size() + 10;  // room for a fragment of the next line, not all of it
  auto previous = ::signal(SIGXFSZ, SIG_IGN);
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &tight), 0);
  bool threw = false;
  try {
    j.append(sample(2));
  } catch (const EnvironmentError& e) {
    threw = true;
    EXPECT_NE(std::string(e.what()).find("write failed: File too large"), std::string::npos) << e.what();
  }
  ::setrlimit(RLIMIT_FSIZE, &saved);
  ::signal(SIGXFSZ, previous);
  EXPECT_TRUE(threw);
  EXPECT_EQ(read_text_file(path_), before);
  EXPECT_EQ(j.measurements().size(), 2u);  // the lost measurement is not kept as journalled
  j.append(sample(3));
  JournalContents c = Journal::read(path_);
  EXPECT_FALSE(c.torn_tail);
  ASSERT_EQ(c.measurements.size(), 3u);
  expect_same(sample(3), c.measurements[2]);
}

TEST_F(JournalTest, ATornHeaderStartsAfresh) {
  std::ofstream(path_) << "{\"format\":\"kareus-search-jour";
  Journal j = Journal::open(path_, header());
  j.append(sample(1));
  EXPECT_EQ(Journal::read(path_).measurements.size(), 1u);
}

TEST_F(JournalTest, RefusesAJournalOfAnotherPartitionWorkloadOrEvaluatorUntouched) {
  {
    Journal j = Journal::open(path_, header());
    j.append(sample(0));
  }
  const std::string before = read_text_file(path_);
  try {
    Journal::open(path_, header("bwd_mlp"));
    FAIL() << "opened a journal of another partition";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("fwd_mlp"), std::string::npos) << e.what();
  }
  JournalHeader other = header();
  other.workload["seq_len"] = 8192;
  try {
    Journal::open(path_, other);
    FAIL() << "opened a journal of another workload";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("seq_len 4096 vs 8192"), std::string::npos) << e.what();
  }
  JournalHeader table = header();
  table.evaluator = "table:profile.csv";
  EXPECT_THROW(Journal::open(path_, table), InputError);
  EXPECT_EQ(read_text_file(path_), before);
}

// A journal agrees with a wanted workload that names fewer fields (what no longer changes a
// partition's cost, e.g. an older journal's pipeline depth), never with one naming a field it lacks.
TEST_F(JournalTest, ResumesWhenEveryWantedFieldAgreesWhateverElseItRecords) {
  JournalHeader recorded = header();
  recorded.workload["pp"] = 4;
  recorded.workload["checkpointing"] = "full";
  {
    Journal j = Journal::open(path_, recorded);
    j.append(sample(0));
  }
  EXPECT_EQ(Journal::open(path_, header()).measurements().size(), 1u);
  EXPECT_EQ(Journal::read(path_).header, recorded) << "resuming leaves the recorded header as it was";
  JournalHeader more = header();
  more.workload["hidden_dropout"] = 0.1;
  try {
    Journal::open(path_, more);
    FAIL() << "resumed a journal that does not record a field the workload names";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("hidden_dropout (none) vs 0.1"), std::string::npos) << e.what();
  }
}

TEST_F(JournalTest, RefusesUnreadableFilesUntouched) {
  std::ofstream(path_) << "time,energy\n1,2\n";
  EXPECT_THROW(Journal::open(path_, header()), InputError);
  EXPECT_EQ(read_text_file(path_), "time,energy\n1,2\n");
  std::ofstream(path_) << "just some words";  // no newline, not a torn header either
  EXPECT_THROW(Journal::open(path_, header()), InputError);
  EXPECT_EQ(read_text_file(path_), "just some words");
  EXPECT_THROW(Journal::open(dir_, header()), InputError);  // a directory
  std::ofstream(path_) << "{\"format\":\"kareus-search-journal\",\"version\":99}\n";
  EXPECT_THROW(Journal::open(path_, header()), InputError);
}

// A child process runs a serial search whose every measurement first notes the knob in a side
// file (fsynced) and then returns; the parent kills it with SIGKILL at a random moment after a few
// measurements. The journal must hold every completed measurement but at most the one in flight,
// be readable, and a resumed search must finish the budget without measuring a journaled knob
// again.
TEST_F(JournalTest, SigkillLosesAtMostTheMeasurementInFlight) {
  const testing::SyntheticPartition part;
  const KnobSpace space = testing::synthetic_space(part);
  const std::filesystem::path calls = dir_ / "calls.txt";
  const std::size_t budget = 90;
  for (int round = 0; round < 3; ++round) {
    std::filesystem::remove(path_);
    std::filesystem::remove(calls);
    pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      int code = 0;
      try {
        int fd = ::open(calls.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
        Journal journal = Journal::open(path_, header());
        ExhaustiveStrategy strategy(8);
        MeasureFn measure = [&](const Knob& k, int) {
          std::this_thread::sleep_for(std::chrono::microseconds(300));
          TimeEnergy r = part(k);
          std::string line = fmt::format("{} {} {}\n", k.freq_mhz, k.sms, k.slot);
          if (::write(fd, line.data(), line.size()) < 0 || ::fsync(fd) != 0) std::_Exit(3);
          return r;
        };
        run_search(space, strategy, measure, false, &journal, testing::options(budget, 85));
      } catch (...) {
        code = 2;
      }
      std::_Exit(code);
    }
    // Let it measure a few, then kill it wherever it is.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    const std::size_t kill_after = 10 + static_cast<std::size_t>(round) * 17;
    while (std::chrono::steady_clock::now() < deadline) {
      std::ifstream in(calls);
      std::size_t lines = 0;
      for (std::string l; std::getline(in, l);) ++lines;
      if (lines >= kill_after) break;
      std::this_thread::sleep_for(std::chrono::microseconds(200 + 150 * round));
    }
    ::kill(child, SIGKILL);
    int status = 0;
    ::waitpid(child, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status)) << "the child finished before it was killed";

    std::size_t completed = 0;
    {
      std::ifstream in(calls);
      for (std::string l; std::getline(in, l);) ++completed;
    }
    JournalContents c = Journal::read(path_);  // readable, whatever the moment of the kill
    ASSERT_GE(c.measurements.size() + 1, completed) << "round " << round;
    ASSERT_LE(c.measurements.size(), completed);

    // Resume: finish the budget; nothing journaled is measured again.
    std::set<std::size_t> journaled;
    for (const Measurement& m : c.measurements) journaled.insert(*space.index_of(m.knob));
    std::size_t remeasured = 0;
    Journal journal = Journal::open(path_, header());
    ExhaustiveStrategy strategy(8);
    MeasureFn measure = [&](const Knob& k, int) {
      remeasured += journaled.count(*space.index_of(k));
      return part(k);
    };
    SearchOutcome out = run_search(space, strategy, measure, false, &journal, testing::options(budget, 85));
    EXPECT_EQ(remeasured, 0u);
    EXPECT_EQ(out.measurements.size(), budget);
    EXPECT_EQ(out.measured_now, budget - c.measurements.size());
    std::set<std::size_t> all;
    for (const Measurement& m : Journal::read(path_).measurements) all.insert(*space.index_of(m.knob));
    EXPECT_EQ(all.size(), budget);
  }
}

}  // namespace
}  // namespace kareus::search
