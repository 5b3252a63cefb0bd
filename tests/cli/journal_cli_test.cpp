// One journal per partition, shared by every command that measures (search/journal.hpp's
// journal_path, workload::cost_identity): `kareus search`'s journals resume under `kareus plan
// --journal-dir` without measuring a knob twice, what does not change a partition's cost (the
// pipeline's depth and microbatch count, checkpointing) re-measures nothing, and what does (the
// microbatch size) is refused naming the difference.
#include <nlohmann/json.hpp>

#include <filesystem>
#include <map>
#include <set>
#include <tuple>

#include "cli_fixture.hpp"

namespace kareus::testing {
namespace {

using JournalCli = CliTest;

// Per journal of `dir`: its measured knobs, and whether one came twice.
struct JournalKnobs {
  std::size_t lines = 0;
  std::set<std::tuple<double, int, std::string>> knobs;
  bool repeated = false;
};

std::map<std::string, JournalKnobs> journals_of(const std::filesystem::path& dir) {
  std::map<std::string, JournalKnobs> out;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (!name.ends_with(".journal.jsonl")) continue;
    JournalKnobs& j = out[name];
    std::istringstream in(slurp(entry.path()));
    std::string line;
    std::getline(in, line);  // the header
    while (std::getline(in, line)) {
      const auto m = nlohmann::json::parse(line);
      ++j.lines;
      const auto knob = std::make_tuple(m["freq"].get<double>(), m["sm"].get<int>(), m["overlap_start"].get<std::string>());
      j.repeated = j.repeated || !j.knobs.insert(knob).second;
    }
  }
  return out;
}

TEST_F(JournalCli, ASearchsJournalsResumeUnderPlanAndThePipelineChangesNothing) {
  ASSERT_EQ(run("search --partition all --out " + path("journals")).exit_code, 0);
  const auto searched = journals_of(path("journals"));
  ASSERT_EQ(searched.size(), 8u);  // four layer partitions, embedding and head, forward and backward

  const CliResult plan = run("plan --no-baselines --journal-dir " + path("journals") + " --out " + path("plan"));
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  const auto planned = journals_of(path("journals"));
  ASSERT_EQ(planned.size(), searched.size());
  for (const auto& [name, j] : planned) {
    EXPECT_FALSE(j.repeated) << name << ": a knob measured twice";
    const JournalKnobs& before = searched.at(name);
    EXPECT_TRUE(std::includes(j.knobs.begin(), j.knobs.end(), before.knobs.begin(), before.knobs.end())) << name;
  }

  // Another pipeline and microbatch count, and no checkpointing: the same partitions, nothing measured.
  const CliResult other = run("plan --no-baselines --pp 4 --microbatches 4 --checkpointing none --journal-dir " +
                              path("journals") + " --out " + path("other"));
  ASSERT_EQ(other.exit_code, 0) << other.err;
  for (const auto& [name, j] : journals_of(path("journals"))) {
    EXPECT_EQ(j.lines, planned.at(name).lines) << name << " measured again";
  }

  // A microbatch size changes every partition's cost: refused, naming it, nothing written.
  expect_one_line_error(run("plan --mbs 4 --journal-dir " + path("journals") + " --out " + path("mbs4")), "mbs 8 vs 4");
  EXPECT_FALSE(std::filesystem::exists(path("mbs4")));
}

}  // namespace
}  // namespace kareus::testing
