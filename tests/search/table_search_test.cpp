// Searching a table of measurements: the search's space is the grid the table's knobs span (the
// evaluator says which it holds), on whatever grid measured them, so MOBO never spends a
// measurement on a knob without a sample and none of the table's knobs is lost. Checked on the
// Kareus artifact's profiling tree of the default job (tests/evaluate/artifact_tree/), read by the
// real reader, and on random tables.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

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
      // 3 clocks x 2 slots x SMs 6, 12, 24, and no sequential knob: 18 of the 21 knobs they span.
      EXPECT_EQ(prepared.space.available_count(), 18u) << p.key;
      EXPECT_EQ(prepared.space.size(), 21u) << p.key;
      EXPECT_TRUE(prepared.unusable.empty()) << p.key;
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

// Any table of a partition, on any clocks and SM counts: every knob it holds is in the search's
// space or reported outside it, never both, and outside only when the space cannot hold it (a slot
// the partition lacks, a sequential knob at a second SM count).
RC_GTEST_PROP(TableSearch, EveryKnobOfATableIsSearchedOrReported, ()) {
  const hardware::GpuSpec gpu = hardware::load_gpu_preset("a100-sxm4-40gb");
  const workload::ModelSpec model = workload::load_model("llama-3.2-3b");
  const auto partitions = workload::build_partitions(model, workload::validated(model, workload::ParallelConfig{}));
  const workload::Partition& p = partitions[*rc::gen::inRange<std::size_t>(0, partitions.size())];
  std::vector<std::string> slots{"none", "nowhere_0"};
  for (const auto& s : p.slots) slots.push_back(s.name);
  const auto clocks = *rc::gen::container<std::vector<int>>(*rc::gen::inRange(1, 6), rc::gen::inRange(600, 1500));
  std::vector<Knob> known;
  const int n = *rc::gen::inRange(1, 40);
  for (int i = 0; i < n; ++i) {
    const std::string slot = *rc::gen::elementOf(slots);
    const int sms = slot == "none" ? *rc::gen::element(24, 7) : *rc::gen::inRange(1, 60);
    known.push_back({static_cast<double>(*rc::gen::elementOf(clocks)), sms, slot});
  }
  GridOptions grid;
  const KnobSpace space = search_space_for(p, gpu, grid, known);
  const std::vector<Knob> outside = knobs_outside(space, known);
  RC_ASSERT(space.restricted());
  std::set<Knob> usable;
  for (const Knob& k : known) {
    const bool out = std::find(outside.begin(), outside.end(), k) != outside.end();
    const auto i = space.index_of(k);
    RC_ASSERT(out != (i && space.available(*i)));
    const bool foreign = k.slot == "nowhere_0";
    const bool second_sequential = k.sequential() && k.sms != space.sequential_sms();
    RC_ASSERT(out == (foreign || second_sequential));
    if (!out) usable.insert(k);
  }
  RC_ASSERT(space.available_count() == usable.size());
  // The sequential knob keeps the grid's SM count whenever the table holds it.
  if (std::any_of(known.begin(), known.end(), [](const Knob& k) { return k.sequential() && k.sms == 24; })) {
    RC_ASSERT(space.sequential_sms() == 24);
  }
  PartitionSearchOptions o;
  o.mode = SearchMode::kExhaustive;
  RC_ASSERT(prepare_search(p, gpu, o, known).budget == usable.size());
}

}  // namespace
}  // namespace kareus::search
