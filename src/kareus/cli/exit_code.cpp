#include <fmt/format.h>

#include <filesystem>
#include <string_view>

#include "kareus/cli/commands.hpp"
#include "kareus/core/error.hpp"

namespace kareus::cli {

ExitCode exit_code_for(const std::exception& e) {
  if (dynamic_cast<const InputError*>(&e)) return ExitCode::kBadInput;
  if (dynamic_cast<const DeviceError*>(&e) || dynamic_cast<const std::filesystem::filesystem_error*>(&e)) {
    return ExitCode::kDeviceOrEnvironment;
  }
  return ExitCode::kInternal;
}

namespace {

// The message with its control characters written as escapes: a message quotes the input at fault,
// which may hold a newline (a flag's value, a CSV field), and the failure is one line whatever it
// quotes.
std::string one_line(std::string_view message) {
  std::string out;
  out.reserve(message.size());
  for (const char c : message) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (byte < 0x20 || byte == 0x7f) {
      out += fmt::format("\\x{:02x}", byte);
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

std::string failure_line(const std::exception& e) {
  if (exit_code_for(e) != ExitCode::kInternal) return fmt::format("kareus: error: {}\n", one_line(e.what()));
  return fmt::format("kareus: error: {} (a bug in kareus: please report it with the command that gave it)\n",
                     one_line(e.what()));
}

std::string usage_failure_line(const std::exception& e) {
  return fmt::format("kareus: error: {} (see kareus --help)\n", one_line(e.what()));
}

}  // namespace kareus::cli
