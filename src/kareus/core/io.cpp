#include "kareus/core/io.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

#include "kareus/core/error.hpp"

namespace kareus {

namespace {

std::ifstream open_for_reading(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    throw InputError({path.string(), 0, 0, ""}, "no such file");
  }
  if (std::filesystem::is_directory(path, ec)) {
    throw InputError({path.string(), 0, 0, ""}, "is a directory, expected a file");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError({path.string(), 0, 0, ""}, "cannot be read");
  return in;
}

template <typename Input>
nlohmann::json parse_json(const std::filesystem::path& path, Input&& input,
                          const nlohmann::json::parser_callback_t& keep = nullptr) {
  try {
    return nlohmann::json::parse(std::forward<Input>(input), keep);
  } catch (const nlohmann::json::exception& e) {  // parse_error, or out_of_range for a number overflow
    throw InputError({path.string(), 0, 0, ""}, fmt::format("not valid JSON: {}", e.what()));
  }
}

}  // namespace

std::string read_text_file(const std::filesystem::path& path) {
  std::ifstream in = open_for_reading(path);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

nlohmann::json read_json_file(const std::filesystem::path& path) { return parse_json(path, read_text_file(path)); }

nlohmann::json read_json_file(const std::filesystem::path& path, const nlohmann::json::parser_callback_t& keep) {
  std::ifstream in = open_for_reading(path);
  return parse_json(path, in, keep);
}

void write_file_atomic(const std::filesystem::path& path, std::string_view content) {
  AtomicFileWriter file(path);
  file.append(content);
  file.commit();
}

AtomicFileWriter::AtomicFileWriter(const std::filesystem::path& path) : path_(path), temp_(path) {
  std::filesystem::path parent = path.parent_path();
  std::error_code ec;
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  if (ec) throw EnvironmentError(fmt::format("{}: cannot create directory: {}", parent.string(), ec.message()));
  temp_ += fmt::format(".tmp.{}", ::getpid());
  fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) throw EnvironmentError(fmt::format("{}: cannot create: {}", temp_.string(), std::strerror(errno)));
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ < 0) return;
  ::close(fd_);
  ::unlink(temp_.c_str());
}

void AtomicFileWriter::fail(const char* what) {
  const int saved = errno;
  ::close(fd_);
  ::unlink(temp_.c_str());
  fd_ = -1;
  throw EnvironmentError(fmt::format("{}: {}: {}", path_.string(), what, std::strerror(saved)));
}

void AtomicFileWriter::append(std::string_view content) {
  KAREUS_CHECK(fd_ >= 0, "appending to a file already committed or failed");
  const char* data = content.data();
  std::size_t left = content.size();
  while (left > 0) {
    ssize_t n = ::write(fd_, data, left);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail("write failed");
    data += n;
    left -= static_cast<std::size_t>(n);
  }
}

void AtomicFileWriter::commit() {
  KAREUS_CHECK(fd_ >= 0, "committing a file already committed or failed");
  if (::fsync(fd_) != 0) fail("flush failed");
  const int fd = std::exchange(fd_, -1);
  const char* failed = ::close(fd) != 0                               ? "flush failed"
                       : ::rename(temp_.c_str(), path_.c_str()) != 0 ? "rename failed"
                                                                      : nullptr;
  if (failed) {
    const int saved = errno;
    ::unlink(temp_.c_str());
    throw EnvironmentError(fmt::format("{}: {}: {}", path_.string(), failed, std::strerror(saved)));
  }
}

}  // namespace kareus
