// `kareus export`: a plan in another tool's format.
#include <fmt/format.h>

#include <optional>

#include "kareus/cli/commands.hpp"
#include "kareus/plan/export.hpp"
#include "kareus/plan/plan.hpp"

namespace kareus::cli {

Action register_export(CLI::App& app) {
  struct Flags {
    std::string plan, format, out;
    std::optional<std::size_t> index;
  };
  auto flags = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand("export", "Write a plan in the Kareus artifact's or Zeus's format");
  cmd->add_option("--plan", flags->plan, "plan.json (kareus-plan), or a plan set with --index")->required();
  cmd->add_option("--index", flags->index, "Which plan of a plan set (plans.json)");
  cmd->add_option("--format", flags->format,
                  "kareus-artifact (freqs_ and scheds_pipeline_00000.py, in the grammar of the artifact's scheduler) or "
                  "zeus-pfo (the frequencies Zeus's PFO server serves; with TP > 1 run it with "
                  "ZEUS_PFO_SCHEDULER=PointSolution3D)")
      ->required();
  cmd->add_option("--out", flags->out, "Directory to write into")->required();
  return [flags] {
    plan::Plan p = plan::read_plan(flags->plan, flags->index);
    for (const std::string& name : plan::export_plan(p, flags->format, flags->out, plan::plan_source(flags->plan, flags->index))) {
      fmt::print("Wrote {}/{}\n", flags->out, name);
    }
    return 0;
  };
}

}  // namespace kareus::cli
