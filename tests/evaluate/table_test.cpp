// TableEvaluator: answers from measured samples in our CSV and the Kareus artifact's JSONL, and
// says clearly when a knob was not measured.
#include "kareus/evaluate/table.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "kareus/core/error.hpp"
#include "test_util.hpp"

namespace kareus::evaluate {
namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

class TableTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("kareus-table-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    auto model = workload::load_model("llama-3.2-3b");
    parts_ =
        workload::build_partitions(model, workload::validated(model, workload::ParallelConfig{}));
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path write(const std::string& name, const std::string& content) {
    std::ofstream(dir_ / name) << content;
    return dir_ / name;
  }
  const workload::Partition& part(const char* key) { return workload::find_partition(parts_, key); }
  std::string error_of(const std::function<void()>& action) { return testing::input_error_of(action); }
  std::filesystem::path dir_;
  std::vector<workload::Partition> parts_;
};

TEST_F(TableTest, ArtifactJsonlSamples) {
  auto table = std::make_unique<TableEvaluator>(hardware::load_gpu_preset("a100-sxm4-40gb"));
  table->add_file(
      write(
          "eval_results.jsonl",
          R"({"freq": 1410, "overlap_start": "linear_0", "overlap_end": "none", "sm": 12, "block": 1024, "time_s": 0.0021, "energy_j": 0.81}
{"freq": 1410, "overlap_start": "linear_0", "overlap_end": "none", "sm": 12, "block": 1024, "time_s": 0.0023, "energy_j": 0.83}

{"freq": 900, "overlap_start": "none", "overlap_end": "none", "sm": 16, "block": 1024, "time_s": 0.004, "energy_j": 0.7}
{"freq": 900, "overlap_start": -1, "overlap_end": -1, "sm": 20, "block": 1024, "time_s": 0.005, "energy_j": 0.75}
{"freq": 900, "overlap_start": "norm_0", "overlap_end": "linear_1", "sm": 20, "block": 1024, "time_s": 0.003, "energy_j": 0.6}
)"),
      "fwd_mlp");
  EXPECT_EQ(table->samples(), 4u);
  EXPECT_EQ(table->skipped_samples(), 1u);
  EXPECT_EQ(table->partition_keys(), (std::vector<std::string>{"fwd_mlp"}));
  Evaluator eval(std::move(table));
  EXPECT_EQ(eval.provenance(), Provenance::kMeasurement);
  EvalResult r = eval.evaluate(part("fwd_mlp"), {1410, 12, "linear_0"});
  ASSERT_TRUE(r.ok());
  EXPECT_DOUBLE_EQ(r.time_s, 0.0022);  // repeated samples are averaged
  EXPECT_DOUBLE_EQ(r.energy_j, 0.82);
  EXPECT_DOUBLE_EQ(eval.evaluate(part("fwd_mlp"), {900, 20, "none"}).time_s, 0.005);
  EvalResult missing = eval.evaluate(part("fwd_mlp"), {1410, 15, "linear_0"});
  EXPECT_EQ(missing.status, EvalStatus::kNotMeasured);
  EXPECT_TRUE(contains(missing.message,
                       "fwd_mlp: knob (1410 MHz, 15 SMs, slot linear_0) was not measured"));
  EXPECT_EQ(eval.evaluate(part("fwd_attn"), {1410, 12, "linear_0"}).status,
            EvalStatus::kNotMeasured);
}

TEST_F(TableTest, OurCsvWithAndWithoutAPartitionColumn) {
  TableEvaluator table(hardware::load_gpu_preset("a100-sxm4-40gb"));
  table.add_file(
      write("all.csv",
            "partition,freq_mhz,sms,slot,time_s,energy_j\n"
            "fwd_attn,1410,15,linear_0,0.0012,0.4\nbwd_mlp,1200,9,linear_1,0.0031,1.0\n"));
  table.add_file(write("fwd_mlp.frontier.csv",
                       "freq_mhz,sms,slot,time_s,energy_j,effective_energy_j\n"
                       "1410,15,linear_0,0.0018,0.6,0.447\n"),
                 "fwd_mlp");
  EXPECT_EQ(table.samples(), 3u);
  EXPECT_DOUBLE_EQ(table.evaluate(part("bwd_mlp"), {1200, 9, "linear_1"}).energy_j, 1.0);
  EXPECT_DOUBLE_EQ(table.evaluate(part("fwd_mlp"), {1410, 15, "linear_0"}).time_s, 0.0018);
  EXPECT_TRUE(contains(table.name(), "all.csv"));
}

TEST_F(TableTest, MalformedFilesNameFileLineAndField) {
  TableEvaluator table(hardware::load_gpu_preset("a100-sxm4-40gb"));
  auto no_key = write("a.csv", "freq_mhz,sms,slot,time_s,energy_j\n1410,15,linear_0,0.1,1\n");
  EXPECT_TRUE(contains(error_of([&] { table.add_file(no_key); }), "no partition column"));
  auto negative = write(
      "b.csv", "partition,freq_mhz,sms,slot,time_s,energy_j\nfwd_mlp,1410,15,linear_0,-0.1,1\n");
  EXPECT_TRUE(contains(error_of([&] { table.add_file(negative); }), "b.csv:2"));
  auto bad_line =
      write("c.jsonl",
            "{\"freq\": 1410, \"overlap_start\": \"none\", \"overlap_end\": \"none\", "
            "\"sm\": 12, \"block\": 1024, \"time_s\": 0.1, \"energy_j\": 1}\n{not json\n");
  EXPECT_TRUE(contains(error_of([&] { table.add_file(bad_line, "fwd_mlp"); }), "c.jsonl:2"));
  auto missing = write("d.jsonl",
                       "{\"freq\": 1410, \"overlap_start\": \"none\", \"overlap_end\": \"none\", "
                       "\"block\": 1024, \"time_s\": 0.1, \"energy_j\": 1}\n");
  EXPECT_TRUE(contains(error_of([&] { table.add_file(missing, "fwd_mlp"); }),
                       "d.jsonl:1: field 'sm': is missing"));
  auto nan = write("e.jsonl",
                   "{\"freq\": 1410, \"overlap_start\": \"none\", \"overlap_end\": \"none\", "
                   "\"sm\": 12, \"block\": 1024, \"time_s\": \"fast\", \"energy_j\": 1}\n");
  EXPECT_TRUE(contains(error_of([&] { table.add_file(nan, "fwd_mlp"); }), "field 'time_s'"));
  EXPECT_FALSE(error_of([&] { table.add_file(dir_ / "missing.jsonl", "fwd_mlp"); }).empty());
}

}  // namespace
}  // namespace kareus::evaluate
