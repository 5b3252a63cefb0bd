// Tests of the file helpers: atomic writes and whole-file reads with errors that name the path.
#include "kareus/core/io.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "kareus/core/error.hpp"

namespace kareus {
namespace {

namespace fs = std::filesystem;

::testing::AssertionResult Contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "\"" << text << "\" does not contain \"" << part << "\"";
}

// Reads a file with the standard library, independently of read_text_file.
std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// Every entry below `dir` whose name contains ".tmp.".
std::vector<fs::path> temp_files_under(const fs::path& dir) {
  std::vector<fs::path> found;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    if (entry.path().filename().string().find(".tmp.") != std::string::npos) found.push_back(entry.path());
  }
  return found;
}

class IoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("kareus_io_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  fs::path dir_;
};

TEST_F(IoTest, WriteCreatesFileWithExactContent) {
  auto path = dir_ / "out.json";
  std::string content = "{\"a\": 1}\nsecond line\r\n";
  content += '\0';
  content += "after a NUL byte";
  write_file_atomic(path, content);
  ASSERT_TRUE(fs::is_regular_file(path));
  EXPECT_EQ(slurp(path), content);
  EXPECT_EQ(fs::file_size(path), content.size());
  EXPECT_TRUE(temp_files_under(dir_).empty());
}

TEST_F(IoTest, WriteEmptyContent) {
  auto path = dir_ / "empty.txt";
  write_file_atomic(path, "");
  ASSERT_TRUE(fs::is_regular_file(path));
  EXPECT_EQ(fs::file_size(path), 0u);
}

TEST_F(IoTest, WriteLargeContent) {
  auto path = dir_ / "large.bin";
  std::string content;
  for (int i = 0; i < 300000; ++i) content += static_cast<char>('a' + i % 26);
  write_file_atomic(path, content);
  EXPECT_EQ(slurp(path), content);
}

TEST_F(IoTest, WriteReplacesExistingFile) {
  auto path = dir_ / "plan.json";
  {
    std::ofstream out(path, std::ios::binary);
    out << "an old and much longer content that must not survive in any part";
  }
  write_file_atomic(path, "new");
  EXPECT_EQ(slurp(path), "new");
  write_file_atomic(path, "newer content");
  EXPECT_EQ(slurp(path), "newer content");
  EXPECT_TRUE(temp_files_under(dir_).empty());
  // Only the target is in the directory.
  std::size_t entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir_)) ++entries;
  EXPECT_EQ(entries, 1u);
}

TEST_F(IoTest, WriteIgnoresAStaleTemporary) {
  // A temporary left by an earlier, killed process whose id this one now has.
  auto path = dir_ / "out.txt";
  auto stale = path;
  stale += ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(stale, std::ios::binary);
    out << "stale content from a crashed run, longer than the new content";
  }
  write_file_atomic(path, "fresh");
  EXPECT_EQ(slurp(path), "fresh");
}

TEST_F(IoTest, WriteCreatesParentDirectories) {
  auto path = dir_ / "a" / "b" / "c" / "out.txt";
  write_file_atomic(path, "deep");
  EXPECT_TRUE(fs::is_directory(dir_ / "a" / "b" / "c"));
  EXPECT_EQ(slurp(path), "deep");
  EXPECT_TRUE(temp_files_under(dir_).empty());
}

TEST_F(IoTest, WriteOverADirectoryFailsAndLeavesNoTemporary) {
  auto path = dir_ / "taken";
  fs::create_directories(path / "child");
  EXPECT_THROW(write_file_atomic(path, "x"), Error);
  EXPECT_TRUE(fs::is_directory(path / "child"));
  EXPECT_TRUE(temp_files_under(dir_).empty());
}

// io.hpp promises Error on every failure: when a parent
// component is a regular file, the failure is a kareus::Error naming the directory.
TEST_F(IoTest, WriteUnderARegularFileThrowsKareusError) {
  auto blocker = dir_ / "file";
  { std::ofstream out(blocker); }
  EXPECT_THROW(write_file_atomic(blocker / "sub" / "out.txt", "x"), Error);
  EXPECT_THROW(write_file_atomic(blocker / "out.txt", "x"), Error);
  EXPECT_TRUE(fs::is_regular_file(blocker));
  EXPECT_TRUE(temp_files_under(dir_).empty());
}

TEST_F(IoTest, ReadReturnsExactContent) {
  auto path = dir_ / "in.txt";
  std::string content = "line 1\r\nline 2\n\nno newline at end";
  {
    std::ofstream out(path, std::ios::binary);
    out << content;
  }
  EXPECT_EQ(read_text_file(path), content);
  { std::ofstream out(dir_ / "empty.txt"); }
  EXPECT_EQ(read_text_file(dir_ / "empty.txt"), "");
}

TEST_F(IoTest, ReadWhatWasWritten) {
  auto path = dir_ / "round" / "trip.txt";
  write_file_atomic(path, "round trip\n");
  EXPECT_EQ(read_text_file(path), "round trip\n");
}

TEST_F(IoTest, ReadMissingFileIsInputErrorNamingThePath) {
  auto path = dir_ / "missing.csv";
  try {
    (void)read_text_file(path);
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_TRUE(Contains(e.what(), path.string()));
    EXPECT_TRUE(Contains(e.what(), "no such file"));
    EXPECT_EQ(e.location().file, path.string());
  }
}

TEST_F(IoTest, ReadDirectoryIsInputErrorNamingThePath) {
  try {
    (void)read_text_file(dir_);
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_TRUE(Contains(e.what(), dir_.string()));
    EXPECT_TRUE(Contains(e.what(), "directory"));
    EXPECT_EQ(e.location().file, dir_.string());
  }
}

TEST_F(IoTest, ReadThroughMissingParentIsInputError) {
  auto path = dir_ / "no" / "such" / "dir" / "file.txt";
  try {
    (void)read_text_file(path);
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_TRUE(Contains(e.what(), path.string()));
  }
}

TEST_F(IoTest, AFileWrittenInPiecesIsTheirConcatenationOnceCommitted) {
  const auto path = dir_ / "sub" / "pieces.txt";
  std::string expected;
  AtomicFileWriter file(path);
  for (int i = 0; i < 1000; ++i) {
    const std::string piece = std::to_string(i) + (i % 7 == 0 ? std::string(5000, 'x') : "") + "\n";
    file.append(piece);
    expected += piece;
  }
  EXPECT_FALSE(fs::exists(path));  // nothing at the path until it is whole
  file.commit();
  EXPECT_EQ(slurp(path), expected);
  EXPECT_TRUE(temp_files_under(dir_).empty());
}

TEST_F(IoTest, AFileWrittenInPiecesAndNeverCommittedLeavesThePathAsItWas) {
  const auto path = dir_ / "kept.txt";
  write_file_atomic(path, "the old file");
  try {
    AtomicFileWriter file(path);
    file.append("half of a new ");
    throw std::runtime_error("failed on the way");
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(slurp(path), "the old file");
  EXPECT_TRUE(temp_files_under(dir_).empty());
}

TEST_F(IoTest, ReadJsonThroughACallbackDropsWhatItRejects) {
  const auto path = dir_ / "doc.json";
  write_file_atomic(path, R"({"keep": 1, "items": [{"a": 1}, {"a": 2}, 3], "more": {"b": [4]}})");
  std::vector<nlohmann::json> seen;
  auto drop_items = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    if (depth == 2 && (event == nlohmann::json::parse_event_t::object_end || event == nlohmann::json::parse_event_t::value) &&
        seen.size() < 3) {
      seen.push_back(parsed);
      return false;
    }
    return true;
  };
  const nlohmann::json doc = read_json_file(path, drop_items);
  EXPECT_EQ(doc, nlohmann::json::parse(R"({"keep": 1, "items": [], "more": {"b": [4]}})"));
  EXPECT_EQ(seen, (std::vector<nlohmann::json>{{{"a", 1}}, {{"a", 2}}, 3}));
  write_file_atomic(path, R"({"cut": [1, 2)");
  try {
    (void)read_json_file(path, drop_items);
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_TRUE(Contains(e.what(), path.string()));
    EXPECT_TRUE(Contains(e.what(), "not valid JSON"));
  }
}

}  // namespace
}  // namespace kareus
