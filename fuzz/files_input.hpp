// Targets whose input is several files (a directory tree, a pair of CSVs) take them as one text:
//   === relative/path
//   the file's contents
//   === another/path
//   ...
// Paths are kept to [A-Za-z0-9_.-] components under the tree's root (no "..", no absolute path);
// text before the first header is ignored, as is a header with a path outside that.
#pragma once

#include <cstddef>
#include <cctype>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "fuzz_support.hpp"

namespace kareus::fuzz {

inline bool safe_relative_path(std::string_view p) {
  if (p.empty() || p.size() > 120 || p.front() == '/') return false;
  std::size_t depth = 0, start = 0;
  for (;;) {
    const std::size_t end = p.find('/', start);
    const std::string_view part = p.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
    if (part.empty() || part == "." || part == ".." || ++depth > 5) return false;
    for (char c : part) {
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.' || c == ' ')) return false;
    }
    if (end == std::string_view::npos) return true;
    start = end + 1;
  }
}

// Writes the files of `data` under a fresh `root` (removed first); returns how many it wrote.
inline std::size_t write_files(const std::uint8_t* data, std::size_t size, const std::filesystem::path& root) {
  std::filesystem::remove_all(root);
  std::filesystem::create_directories(root);
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  constexpr std::string_view kHeader = "=== ";
  std::size_t pos = text.rfind(kHeader, 0) == 0 ? 0 : text.find(std::string("\n") + std::string(kHeader));
  std::size_t written = 0;
  while (pos != std::string_view::npos && written < 32) {
    if (text[pos] == '\n') ++pos;
    const std::size_t name_end = text.find('\n', pos);
    if (name_end == std::string_view::npos) break;
    const std::string_view name = text.substr(pos + kHeader.size(), name_end - pos - kHeader.size());
    std::size_t next = text.find(std::string("\n") + std::string(kHeader), name_end);
    const std::size_t body_end = next == std::string_view::npos ? text.size() : next + 1;
    if (safe_relative_path(name)) {
      // A tree holds no file where another path needs a directory, nor the other way round: such
      // an entry is left out, as a second file of one name is written over the first.
      std::error_code ec;
      bool fits = !std::filesystem::is_directory(root / name, ec);
      for (std::filesystem::path up = std::filesystem::path(name).parent_path(); fits && !up.empty();
           up = up.parent_path()) {
        fits = !std::filesystem::exists(root / up, ec) || std::filesystem::is_directory(root / up, ec);
      }
      if (fits) {
        write_file(root / name, text.substr(name_end + 1, body_end - name_end - 1));
        ++written;
      }
    }
    pos = next;
  }
  return written;
}

}  // namespace kareus::fuzz
