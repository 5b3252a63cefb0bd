// File helpers: whole-file reads with clear errors, and atomic writes (temp file + fsync + rename)
// so that an interrupted run never leaves a partial output file behind.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace kareus {

// Throws InputError naming the path when it does not exist, is a directory or cannot be read.
std::string read_text_file(const std::filesystem::path& path);

// read_text_file parsed as JSON; InputError "not valid JSON: …" naming the path otherwise.
nlohmann::json read_json_file(const std::filesystem::path& path);
// read_json_file parsed as the file is read, through nlohmann's parser callback: a value `keep`
// returns false for is dropped as soon as it is parsed, so a file too large to hold as a document
// (a plan set of a long pipeline) can be taken a piece at a time.
nlohmann::json read_json_file(const std::filesystem::path& path, const nlohmann::json::parser_callback_t& keep);

// Writes `content` to `path` atomically: a sibling temporary file is written, flushed, fsynced and
// renamed over `path`. Creates missing parent directories. Throws EnvironmentError on failure (a
// full disk, a directory it may not write), leaving no temporary file behind.
void write_file_atomic(const std::filesystem::path& path, std::string_view content);

// write_file_atomic in pieces, for a file too large to hold as one string (a plan set of a long
// pipeline): append() as often as needed, then commit(). Destroyed uncommitted (an exception on the
// way), it removes its temporary file and leaves `path` as it was.
class AtomicFileWriter {
 public:
  explicit AtomicFileWriter(const std::filesystem::path& path);
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;
  ~AtomicFileWriter();

  void append(std::string_view content);
  // Flushes, fsyncs and renames the temporary file over `path`.
  void commit();

 private:
  void fail(const char* what);

  std::filesystem::path path_, temp_;
  int fd_ = -1;
};

}  // namespace kareus
