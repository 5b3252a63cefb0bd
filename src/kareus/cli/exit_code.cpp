#include <fmt/format.h>

#include <filesystem>

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

std::string failure_line(const std::exception& e) {
  if (exit_code_for(e) != ExitCode::kInternal) return fmt::format("kareus: error: {}\n", e.what());
  return fmt::format("kareus: error: {} (a bug in kareus: please report it with the command that gave it)\n", e.what());
}

}  // namespace kareus::cli
