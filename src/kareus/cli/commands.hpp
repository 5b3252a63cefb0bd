// The `kareus` command's subcommands. Each src/kareus/cli/<name>_command.cpp defines
//   Action register_<name>(CLI::App& app);
// which adds the subcommand's flags to `app` and returns the action to run after parsing. The build
// lists those files (generated kareus/cli/command_list.inc), so adding a command edits nothing else.
// Actions are thin: they parse, call the modules, and print or write.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace kareus::cli {

using Action = std::function<int()>;

#define KAREUS_COMMAND(name) Action register_##name(CLI::App& app);
#include "kareus/cli/command_list.inc"
#undef KAREUS_COMMAND

}  // namespace kareus::cli
