// Searching a table of measurements: the search's space is the table's knobs on the grid (the
// evaluator says which it holds), so MOBO never spends a measurement on a knob without a sample.
// Checked on the Kareus artifact's profiling tree of the default job (tests/evaluate/
// artifact_tree/), read by the real reader.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "kareus/evaluate/artifact_tree.hpp"
#include "kareus/hardware/gpu.hpp"
#include "kareus/search/partition_search.hpp"
#include "kareus/workload/model.hpp"
#include "kareus/workload/parallel.hpp"

namespace kareus::search {
namespace {

const std::filesystem::path kFixture = std::filesystem::path(KAREUS_TESTS_DIR) / "evaluate" / "artifact_tree";

// Records which knobs the search asked for.
class RecordingTable final : public evaluate::EvaluatorImpl {
 public:
  explicit RecordingTable(std::unique_ptr<evaluate::TableEvaluator> table) : table_(std::move(table)) {}
  std::string name() const override { return table_->name(); }
  evaluate::Provenance provenance() const override { return table_->provenance(); }
  bool thread_safe() const override { return false; }
  const hardware::GpuSpec& gpu() const override { return table_->gpu(); }
  evaluate::EvalResult evaluate(const workload::Partition& p, const workload::Knob& k) const override {
    asked.insert({p.key, k});
    return table_->evaluate(p, k);
  }
  std::optional<std::vector<workload::Knob>> known_knobs(const workload::Partition& p) const override {
    return table_->known_knobs(p);
  }
  mutable std::set<std::pair<std::string, workload::Knob>> asked;

 private:
  std::unique_ptr<evaluate::TableEvaluator> table_;
};

struct Fixture {
  std::vector<workload::Partition> partitions;
  evaluate::Evaluator evaluator;
  const RecordingTable* table;
};

Fixture load() {
  const hardware::GpuSpec gpu = hardware::load_gpu_preset("a100-sxm4-40gb");
  auto table = std::make_unique<evaluate::TableEvaluator>(gpu);
  evaluate::read_artifact_tree(kFixture).fill(*table);
  auto recording = std::make_unique<RecordingTable>(std::move(table));
  const RecordingTable* raw = recording.get();
  const workload::ModelSpec model = workload::load_model("llama-3.2-3b");
  return {workload::build_partitions(model, workload::validated(model, workload::ParallelConfig{})),
          evaluate::Evaluator(std::move(recording)), raw};
}

TEST(TableSearch, MoboOnTheArtifactTreeAsksOnlyForSampledKnobs) {
  Fixture f = load();
  ASSERT_EQ(f.partitions.size(), 4u);
  for (std::uint64_t seed : {0u, 1u, 7u}) {
    for (const workload::Partition& p : f.partitions) {
      PartitionSearchOptions o;
      o.mode = SearchMode::kMobo;
      o.seed = seed;
      o.batch_size = 4;
      o.budget = 12;  // the 6-knob initial design, then two model-guided batches
      const PreparedSearch prepared = prepare_search(p, f.evaluator, o);
      EXPECT_TRUE(prepared.space.restricted());
      // 3 clocks x 2 slots x SMs 6, 12, 24 of the default grid: 18 of its hundreds of knobs.
      EXPECT_EQ(prepared.space.available_count(), 18u) << p.key;
      EXPECT_GT(prepared.space.size(), 700u) << p.key;
      const PartitionSearchResult r = run_prepared_search(prepared, f.evaluator, {}, std::nullopt);
      EXPECT_EQ(r.failed, 0u) << p.key << " seed " << seed;
      EXPECT_EQ(r.successful.size(), 12u) << p.key << " seed " << seed;
      EXPECT_EQ(r.space_size, 18u);
      EXPECT_TRUE(r.restricted);
    }
  }
  EXPECT_EQ(f.evaluator.failures(), 0) << "a search asked the table for a knob it has no sample of";
  for (const auto& [key, knob] : f.table->asked) {
    const auto& p = *std::find_if(f.partitions.begin(), f.partitions.end(), [&](const auto& q) { return q.key == key; });
    const auto sampled = *f.table->known_knobs(p);
    EXPECT_NE(std::find(sampled.begin(), sampled.end(), knob), sampled.end()) << key << " " << knob.slot;
  }
}

TEST(TableSearch, TheUnrestrictedGridWouldHaveWastedTheBudget) {
  // The same search on the bare grid asks for knobs the table lacks: the restriction is what
  // keeps them out.
  Fixture f = load();
  PartitionSearchOptions o;
  o.mode = SearchMode::kMobo;
  o.budget = 60;  // the 51-knob covering design, then a batch
  const PreparedSearch bare = prepare_search(f.partitions.front(), f.evaluator.gpu(), o);
  EXPECT_FALSE(bare.space.restricted());
  const PartitionSearchResult r = run_prepared_search(bare, f.evaluator, {}, std::nullopt);
  EXPECT_GT(r.failed, 40u);
}

TEST(TableSearch, ExhaustiveOnATableMeasuresEachSampleOnce) {
  Fixture f = load();
  PartitionSearchOptions o;
  o.mode = SearchMode::kExhaustive;
  for (const workload::Partition& p : f.partitions) {
    const PreparedSearch prepared = prepare_search(p, f.evaluator, o);
    EXPECT_EQ(prepared.budget, 18u) << "the default budget is the table's knobs on the grid";
    const PartitionSearchResult r = run_prepared_search(prepared, f.evaluator, {}, std::nullopt);
    EXPECT_EQ(r.successful.size(), 18u);
    EXPECT_EQ(r.outcome.stop, StopReason::kBudgetSpent);
  }
  EXPECT_EQ(f.evaluator.failures(), 0);
}

}  // namespace
}  // namespace kareus::search
