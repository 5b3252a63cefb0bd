#include "kareus/core/io.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "kareus/core/error.hpp"

namespace kareus {

std::string read_text_file(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    throw InputError({path.string(), 0, 0, ""}, "no such file");
  }
  if (std::filesystem::is_directory(path, ec)) {
    throw InputError({path.string(), 0, 0, ""}, "is a directory, expected a file");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError({path.string(), 0, 0, ""}, "cannot be read");
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

nlohmann::json read_json_file(const std::filesystem::path& path) {
  const std::string text = read_text_file(path);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {  // parse_error, or out_of_range for a number overflow
    throw InputError({path.string(), 0, 0, ""}, fmt::format("not valid JSON: {}", e.what()));
  }
}

void write_file_atomic(const std::filesystem::path& path, std::string_view content) {
  std::filesystem::path parent = path.parent_path();
  std::error_code ec;
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  if (ec) throw EnvironmentError(fmt::format("{}: cannot create directory: {}", parent.string(), ec.message()));
  std::filesystem::path temp = path;
  temp += fmt::format(".tmp.{}", ::getpid());
  int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw EnvironmentError(fmt::format("{}: cannot create: {}", temp.string(), std::strerror(errno)));
  const char* data = content.data();
  std::size_t left = content.size();
  while (left > 0) {
    ssize_t n = ::write(fd, data, left);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int saved = errno;
      ::close(fd);
      ::unlink(temp.c_str());
      throw EnvironmentError(fmt::format("{}: write failed: {}", path.string(), std::strerror(saved)));
    }
    data += n;
    left -= static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    int saved = errno;
    ::unlink(temp.c_str());
    throw EnvironmentError(fmt::format("{}: flush failed: {}", path.string(), std::strerror(saved)));
  }
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    int saved = errno;
    ::unlink(temp.c_str());
    throw EnvironmentError(fmt::format("{}: rename failed: {}", path.string(), std::strerror(saved)));
  }
}

}  // namespace kareus
