// The value flags whose parsers are the tool's own: --straggler (replay), the LO:HI:STEP range
// flags (search and profile --clocks and --sms, cli/range_flags.hpp, then the knob grid's clocks),
// --target and --plans (plan, frontier), --alignment (simulate), --layers-per-stage. The first byte
// picks the flag, the rest is its value. --straggler and search's --clocks go through the `kareus`
// command itself, parsed and run as main() does, with the other flags chosen so that the command
// stops with bad input right after it has parsed the value under test; the others call the parser
// and its consumer (grid_clocks_mhz, select_plan, evenly_spaced_plans).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "fixtures.hpp"
#include "fuzz_support.hpp"
#include "kareus/cli/range_flags.hpp"
#include "kareus/plan/select.hpp"
#include "kareus/search/partition_search.hpp"
#include "kareus/sim/simulator.hpp"
#include "kareus/workload/parallel.hpp"

namespace {

using namespace kareus;

// `kareus ARGS...` as main() runs it, but returning instead of printing.
void run_kareus(std::vector<std::string> args, std::string_view flag, std::string_view stopper) {
  CLI::App app{"kareus"};
  app.require_subcommand(1);
  std::vector<std::pair<CLI::App*, cli::Action>> actions;
  auto add = [&](auto register_fn) {
    const std::size_t before = app.get_subcommands({}).size();
    cli::Action action = register_fn(app);
    actions.emplace_back(app.get_subcommands({})[before], std::move(action));
  };
#define KAREUS_COMMAND(name) add(cli::register_##name);
#include "kareus/cli/command_list.inc"
#undef KAREUS_COMMAND
  std::reverse(args.begin(), args.end());  // CLI11 takes them last first
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() != 0 && std::string_view(e.what()).find('\n') != std::string_view::npos) {
      fuzz::finding("command-line refusal is not one line", e.what());
    }
    return;
  }
  fuzz::holds_contract("", [&] {
    try {
      for (auto& [command, action] : actions) {
        if (command->parsed()) action();
      }
    } catch (const InputError& e) {
      const std::string what = e.what();
      if (what.find(flag) == std::string::npos && what.find(stopper) == std::string::npos) {
        fuzz::finding("refusal names neither " + std::string(flag) + " nor " + std::string(stopper), what);
      }
      throw;
    }
  });
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::quiet_logs();
  fuzz::default_job();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1 || size > 256) return 0;
  const std::string value(reinterpret_cast<const char*>(data) + 1, size - 1);
  const std::string missing = (fuzz::scratch_dir() / "missing.json").string();
  const std::string out = (fuzz::scratch_dir() / "out").string();
  switch (data[0] % 8) {
    case 0:  // stops reading the plan set it names
      run_kareus({"replay", "--plan", missing, "--straggler", value}, "--straggler", "missing.json");
      break;
    case 1:  // stops at the partition, after parsing the range
      run_kareus({"search", "--out", out, "--partition", "no_such_key", "--clocks", value}, "--clocks", "no_such_key");
      break;
    case 2:  // a range, then the knob grid's clocks every search builds from it
      fuzz::holds_contract("--clocks", [&] {
        const auto range = cli::parse_range(value, "--clocks");
        if (cli::range_values(range).size() > cli::kMaxRangeValues) fuzz::finding("--clocks", "too many values");
        search::GridOptions grid;
        grid.min_clock_mhz = range[0];
        grid.max_clock_mhz = range[1];
        grid.clock_step_mhz = range[2];
        search::grid_clocks_mhz(fuzz::default_job().gpu, grid);
      });
      break;
    case 3:  // profile's --sms: a range or a list
      fuzz::holds_contract("--sms", [&] {
        if (cli::parse_numbers(value, "--sms").size() > cli::kMaxRangeValues + value.size()) {
          fuzz::finding("--sms", "too many values");
        }
      });
      break;
    case 4:  // --target: what `kareus plan` picks its plan with
      fuzz::holds_contract("--target", [&] {
        static const std::array<TimeEnergy, 3> frontier{{{1.0, 10.0}, {2.0, 5.0}, {3.0, 4.0}}};
        const std::size_t chosen = plan::select_plan(frontier, plan::parse_target(value));
        if (chosen >= frontier.size()) fuzz::finding("--target", "chose a plan outside the frontier");
      });
      break;
    case 5:
      fuzz::holds_contract("--plans", [&] {
        for (std::size_t i : plan::evenly_spaced_plans(7, plan::parse_plan_count(value, "--plans"))) {
          if (i >= 7) fuzz::finding("--plans", "a plan outside the frontier");
        }
      });
      break;
    case 6:
      fuzz::holds_contract("--alignment", [&] { sim::parse_alignment(value); });
      break;
    case 7:
      fuzz::holds_contract("--layers-per-stage", [&] { workload::parse_layers_per_stage(value, "--layers-per-stage"); });
      break;
  }
  return 0;
}
