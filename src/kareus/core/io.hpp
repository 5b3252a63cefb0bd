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

// Writes `content` to `path` atomically: a sibling temporary file is written, flushed, fsynced and
// renamed over `path`. Creates missing parent directories. Throws EnvironmentError on failure (a
// full disk, a directory it may not write), leaving no temporary file behind.
void write_file_atomic(const std::filesystem::path& path, std::string_view content);

}  // namespace kareus
