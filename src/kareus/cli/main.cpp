#include <fmt/format.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <cstdio>

#include "kareus/cli/commands.hpp"

int main(int argc, char** argv) {
  CLI::App app{"kareus: plans GPU clocks and communication overlap for energy-efficient "
               "pipeline-parallel training"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "kareus 0.1.0");
  bool verbose = false;
  app.add_flag("-v,--verbose", verbose, "Log more detail on stderr");
  std::vector<std::pair<CLI::App*, kareus::cli::Action>> actions;
  auto add = [&](auto register_fn) {
    std::size_t before = app.get_subcommands({}).size();
    kareus::cli::Action action = register_fn(app);
    actions.emplace_back(app.get_subcommands({})[before], std::move(action));
  };
#define KAREUS_COMMAND(name) add(kareus::cli::register_##name);
#include "kareus/cli/command_list.inc"
#undef KAREUS_COMMAND

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fputs(kareus::cli::usage_failure_line(e).c_str(), stderr);
    return static_cast<int>(kareus::cli::ExitCode::kBadInput);
  }
  // Diagnostics go to stderr, so that stdout carries data only (e.g. `kareus frontier --csv`).
  spdlog::set_default_logger(spdlog::stderr_color_mt("kareus"));
  spdlog::set_pattern("kareus: %v");
  spdlog::set_level(verbose ? spdlog::level::debug : spdlog::level::info);
  // A script can tell a typo from a failing GPU from a bug (kareus::cli::ExitCode).
  try {
    for (auto& [command, action] : actions) {
      if (command->parsed()) return action();
    }
  } catch (const std::exception& e) {
    std::fputs(kareus::cli::failure_line(e).c_str(), stderr);
    return static_cast<int>(kareus::cli::exit_code_for(e));
  }
  return 0;
}
