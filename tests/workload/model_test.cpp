// Model files: the bundled architectures load with the issue's numbers, users can add one, and
// malformed files are InputErrors naming file and field.
#include "kareus/workload/model.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "test_util.hpp"

namespace kareus::workload {
namespace {

using kareus::testing::Contains;
using kareus::testing::input_error_of;

TEST(Model, BundledModelsAreListed) {
  auto names = model_names();
  for (const char* name : {"llama-3.2-3b", "qwen3-1.7b", "llama-3.1-8b", "llama-3.3-70b"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), name), names.end()) << name;
  }
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
}

TEST(Model, Llama32_3bHasTheIssueNumbers) {
  ModelSpec m = load_model("llama-3.2-3b");
  EXPECT_EQ(m.name, "llama-3.2-3b");
  EXPECT_EQ(m.hidden_size, 3072);
  EXPECT_EQ(m.num_attention_heads, 24);
  EXPECT_EQ(m.num_query_groups, 8);
  EXPECT_EQ(m.head_dim, 128);
  EXPECT_EQ(m.ffn_hidden_size, 8192);
  EXPECT_EQ(m.num_layers, 28);
  EXPECT_EQ(m.vocab_size, 128256);
  EXPECT_FALSE(m.qk_norm);
}

TEST(Model, Qwen3_17bHasQkNorm) {
  ModelSpec m = load_model("qwen3-1.7b");
  EXPECT_EQ(m.hidden_size, 2048);
  EXPECT_EQ(m.num_attention_heads, 16);
  EXPECT_EQ(m.num_query_groups, 8);
  EXPECT_EQ(m.ffn_hidden_size, 6144);
  EXPECT_EQ(m.num_layers, 28);
  EXPECT_EQ(m.vocab_size, 151936);
  EXPECT_TRUE(m.qk_norm);
}

TEST(Model, UnknownNameListsKnownModels) {
  std::string message = input_error_of([] { load_model("gpt-5"); });
  EXPECT_TRUE(Contains(message, "unknown model 'gpt-5'"));
  EXPECT_TRUE(Contains(message, "llama-3.2-3b"));
  EXPECT_TRUE(Contains(message, "qwen3-1.7b"));
  EXPECT_FALSE(input_error_of([] { load_model("../models/llama-3.2-3b"); }).empty());
}

class ModelFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("kareus-model-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& content) {
    std::ofstream(dir_ / name) << content;
    return (dir_ / name).string();
  }
  std::filesystem::path dir_;
};

TEST_F(ModelFile, UserModelFromAPath) {
  std::string path =
      write("tiny.json", R"({"hidden_size": 256, "num_attention_heads": 4, "num_query_groups": 2,
    "ffn_hidden_size": 512, "num_layers": 2, "vocab_size": 1000, "qk_norm": false, "tied_embeddings": true})");
  ModelSpec m = load_model(path);
  EXPECT_EQ(m.name, "tiny");
  EXPECT_EQ(m.display_name, "tiny");
  EXPECT_EQ(m.head_dim, 64);  // defaults to hidden / heads
}

TEST_F(ModelFile, UnknownKeyIsNamed) {
  std::string path =
      write("bad.json", R"({"hidden_size": 256, "num_attention_heads": 4, "num_query_groups": 2,
    "ffn_hidden_size": 512, "num_layers": 2, "vocab_size": 1000, "qk_norm": false, "tied_embeddings": true,
    "num_experts": 8})");
  std::string message = input_error_of([&] { load_model(path); });
  EXPECT_TRUE(Contains(message, "bad.json"));
  EXPECT_TRUE(Contains(message, "num_experts"));
  EXPECT_TRUE(Contains(message, "unknown key"));
}

TEST_F(ModelFile, MissingAndNonPositiveFieldsAreNamed) {
  std::string missing = write("missing.json", R"({"hidden_size": 256})");
  EXPECT_TRUE(Contains(input_error_of([&] { load_model(missing); }), "num_attention_heads"));
  std::string negative =
      write("negative.json", R"({"hidden_size": -256, "num_attention_heads": 4})");
  EXPECT_TRUE(Contains(input_error_of([&] { load_model(negative); }), "field 'hidden_size'"));
  std::string broken = write("broken.json", "{");
  EXPECT_TRUE(Contains(input_error_of([&] { load_model(broken); }), "not valid JSON"));
}

}  // namespace
}  // namespace kareus::workload
