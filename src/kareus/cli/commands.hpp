// The `kareus` command's subcommands. Each registers its flags on the app and returns the action
// to run after parsing; the actions are thin: they parse, call the modules, and print or write.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace kareus::cli {

using Action = std::function<int()>;

Action register_frontier(CLI::App& app);
Action register_partitions(CLI::App& app);
Action register_evaluate(CLI::App& app);
Action register_replay(CLI::App& app);
Action register_hw(CLI::App& app);
Action register_export(CLI::App& app);

}  // namespace kareus::cli
