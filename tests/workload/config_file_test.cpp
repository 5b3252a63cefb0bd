// Job description files: JSON and YAML read into the same document.
#include "kareus/workload/config_file.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "test_util.hpp"

namespace kareus::workload {
namespace {

using kareus::testing::Contains;
using kareus::testing::input_error_of;

class ConfigFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("kareus-config-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path write(const std::string& name, const std::string& content) {
    std::ofstream(dir_ / name) << content;
    return dir_ / name;
  }
  std::filesystem::path dir_;
};

TEST_F(ConfigFile, YamlAndJsonGiveTheSameDocument) {
  auto yaml =
      read_config_document(write("a.yaml",
                                 "model: qwen3-1.7b\ntp: 4\ncp: 2\nlayers_per_stage: [15, 13]\n"
                                 "checkpointing: none\nratio: 1.5\nflag: true\nname: '42'\n"));
  auto json = read_config_document(write("a.json", R"({"model": "qwen3-1.7b", "tp": 4, "cp": 2,
      "layers_per_stage": [15, 13], "checkpointing": "none", "ratio": 1.5, "flag": true, "name": "42"})"));
  EXPECT_EQ(yaml, json);
  EXPECT_TRUE(yaml["tp"].is_number_integer());
  EXPECT_TRUE(yaml["name"].is_string());
}

TEST_F(ConfigFile, SyntaxErrorsNameFileAndLine) {
  std::string yaml =
      input_error_of([&] { read_config_document(write("b.yaml", "tp: 4\nmodel: [unclosed\n")); });
  EXPECT_TRUE(Contains(yaml, "b.yaml:"));
  EXPECT_TRUE(Contains(yaml, "not valid YAML"));
  std::string json = input_error_of([&] { read_config_document(write("b.json", "{\"tp\": }")); });
  EXPECT_TRUE(Contains(json, "not valid JSON"));
  EXPECT_TRUE(Contains(input_error_of([&] { read_config_document(write("c.yaml", "- 1\n- 2\n")); }),
                       "expected a mapping"));
  EXPECT_TRUE(
      Contains(input_error_of([&] { read_config_document(write("d.yaml", "tp: 1\ntp: 2\n")); }),
               "appears twice"));
  EXPECT_FALSE(input_error_of([&] { read_config_document(dir_ / "missing.yaml"); }).empty());
}

TEST_F(ConfigFile, AYamlByteThatIsNotUtf8IsRefusedAtItsLine) {
  // What a YAML file holds goes into journals and summaries as JSON, which must be UTF-8: a name
  // with such a byte made every later dump throw (found by fuzzing job files).
  const std::string error =
      input_error_of([&] { read_config_document(write("e.yaml", "tp: 8\ngpu: a100-sx\x81m4-40gb\n")); });
  EXPECT_TRUE(Contains(error, "e.yaml:2: not valid YAML: a byte that is not UTF-8")) << error;
  EXPECT_EQ(read_config_document(write("f.yaml", "name: caf\xc3\xa9\n"))["name"], "caf\xc3\xa9");  // UTF-8 is fine
}

TEST_F(ConfigFile, AYamlControlCharacterIsRefusedAtItsLineAndColumn) {
  // yaml-cpp read "mbs: <NUL>N2" as the lone byte 0x85 and "2", which is not UTF-8: the plan then
  // stopped with an internal error when it wrote the job as JSON (found by fuzzing job files).
  // YAML allows no C0 control character but tab, line feed and carriage return, nor DEL.
  for (const char c : {'\0', '\x01', '\x1b', '\x7f'}) {
    const std::string error = input_error_of(
        [&] { read_config_document(write("g.yaml", std::string("tp: 8\nmbs: ") + c + "N2\n")); });
    EXPECT_TRUE(Contains(error, "g.yaml:2:6: not valid YAML: a control character")) << error;
  }
  const auto doc = read_config_document(write("h.yaml", "tp:\t8\r\nname: 'a\tb'\r\n"));
  EXPECT_EQ(doc["tp"], 8);
  EXPECT_EQ(doc["name"], "a\tb");
}

}  // namespace
}  // namespace kareus::workload
