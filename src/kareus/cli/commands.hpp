// The `kareus` command's subcommands. Each src/kareus/cli/<name>_command.cpp defines
//   Action register_<name>(CLI::App& app);
// which adds the subcommand's flags to `app` and returns the action to run after parsing. The build
// lists those files (generated kareus/cli/command_list.inc), so adding a command edits nothing else.
// Actions are thin: they parse, call the modules, and print or write.
#pragma once

#include <CLI/CLI.hpp>
#include <exception>
#include <functional>
#include <string>

namespace kareus::cli {

using Action = std::function<int()>;

// What `kareus` exits with when a command fails (0 when it succeeds): bad input (an InputError: a
// flag, a file, a field), the device or the environment (a DeviceError: a GPU, its driver, NVML,
// MPI; a file system error), or a bug (an InternalError or any other exception; 70 is sysexits'
// EX_SOFTWARE).
enum class ExitCode : int { kBadInput = 2, kDeviceOrEnvironment = 3, kInternal = 70 };
ExitCode exit_code_for(const std::exception& e);
// The one line on stderr: "kareus: error: <what>", a bug saying it is one.
std::string failure_line(const std::exception& e);
// The one line on stderr for flags that do not parse: "kareus: error: <what> (see kareus --help)".
std::string usage_failure_line(const std::exception& e);

#define KAREUS_COMMAND(name) Action register_##name(CLI::App& app);
#include "kareus/cli/command_list.inc"
#undef KAREUS_COMMAND

}  // namespace kareus::cli
