// `kareus replay`: runs a plan's instruction stream through the runtime against simulated GPUs,
// one per stage (runtime/replay.hpp), and prints what was measured beside what was planned. With
// --straggler F@iteration:N the plan file is a whole frontier (plans.json): from iteration N on
// another pipeline takes F times the fastest plan's time, and every stage switches to the
// least-energy plan that meets it; the output sets each iteration's energy against staying on the
// fastest plan and waiting.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "kareus/cli/commands.hpp"
#include "kareus/core/error.hpp"
#include "kareus/plan/select.hpp"
#include "kareus/plan/validate.hpp"
#include "kareus/runtime/replay.hpp"

namespace kareus::cli {
namespace {

struct ReplayFlags {
  std::string plan;
  std::optional<std::size_t> index;
  std::string gpu = "fake";
  int iterations = 1;
  std::string energy_log;
  std::string straggler;
};

struct Straggler {
  double slowdown = 1;  // the straggler's iteration time over our fastest plan's
  long iteration = 0;   // from which iteration on
};

Straggler parse_straggler(const std::string& text) {
  const std::string form = "expected SLOWDOWN@iteration:N, e.g. 1.2@iteration:3";
  auto at = text.find("@iteration:");
  if (at == std::string::npos)
    throw InputError({"", 0, 0, "--straggler"}, fmt::format("'{}': {}", text, form));
  Straggler straggler;
  try {
    std::size_t used = 0;
    straggler.slowdown = std::stod(text.substr(0, at), &used);
    if (used != at) throw std::invalid_argument("trailing text");
    std::string iteration = text.substr(at + 11);
    straggler.iteration = std::stol(iteration, &used);
    if (used != iteration.size()) throw std::invalid_argument("trailing text");
  } catch (const std::logic_error&) {
    throw InputError({"", 0, 0, "--straggler"}, fmt::format("'{}': {}", text, form));
  }
  if (!(straggler.slowdown >= 1) || !std::isfinite(straggler.slowdown) || straggler.iteration < 0) {
    throw InputError(
        {"", 0, 0, "--straggler"},
        fmt::format("'{}': the slowdown must be at least 1 and the iteration at least 0", text));
  }
  return straggler;
}

// What replay_plans measured, beside what was planned.
void print_report(const runtime::ReplayReport& r, const std::vector<plan::Plan>& plans, std::size_t start_index,
                  const std::optional<Straggler>& straggler, const ReplayFlags& flags, const std::string& source) {
  const plan::Plan& first = plans[start_index];
  fmt::print("Replay of {} on {} fake GPUs, one per stage (simulated: a model, not a measurement)\n", source,
             first.num_stages);
  fmt::print(
      "Fake GPUs draw P_blocking = {} W when idle and each instruction's planned power at its "
      "planned clock,\nso measured equals planned when every clock reaches the GPU in time.\n",
      first.p_blocking_w);
  fmt::print("Energy: {}\n", first.energy_scope);
  if (!straggler) {
    const plan::Plan& plan = plans.front();
    fmt::print("  {:>9} {:>12} {:>14} {:>17} {:>19}\n", "iteration", "time (s)", "energy (J)", "planned time (s)",
               "planned energy (J)");
    for (std::size_t it = 0; it < r.iterations.size(); ++it) {
      fmt::print("  {:>9} {:>12.4f} {:>14.1f} {:>17.4f} {:>19.1f}\n", it, r.iterations[it].time_s,
                 r.iterations[it].energy_j, plan.time_s, plan.energy_j);
    }
  } else {
    // Staying on the fastest plan: its energy, plus idling at P_blocking on every stage until the
    // straggler is done.
    fmt::print(
        "Straggler: from iteration {} on another pipeline takes {:.4g} x {:.4f} s = {:.4f} s per "
        "iteration;\nthis pipeline switches to the least-energy plan of the {} in {} that meets "
        "it.\n",
        straggler->iteration, straggler->slowdown, first.time_s, r.straggler_s, plans.size(), flags.plan);
    fmt::print("  {:>9} {:>5} {:>14} {:>10} {:>12} {:>23} {:>11}\n", "iteration", "plan", "plan time (s)", "time (s)",
               "energy (J)", "on fastest plan (J)", "saved");
    for (std::size_t it = 0; it < r.iterations.size(); ++it) {
      const runtime::ReplayIteration& i = r.iterations[it];
      double saved_pct = 100 * (i.on_start_plan_j - i.energy_j) / i.on_start_plan_j;
      if (std::abs(saved_pct) < 0.005) saved_pct = 0;  // rounding noise prints as 0.00%, not -0.00%
      fmt::print("  {:>9} {:>5} {:>14.4f} {:>10.4f} {:>12.1f} {:>23.1f} {:>10.2f}%\n", it, i.plan_index,
                 plans[i.plan_index].time_s, i.time_s, i.energy_j, i.on_start_plan_j, saved_pct);
    }
  }
  fmt::print("Per stage, mean over {} iteration{}:\n", r.iterations.size(), r.iterations.size() == 1 ? "" : "s");
  // No set latencies here: on fakes they are thread hand-offs, not device calls, and printing
  // them would make the output vary from run to run.
  fmt::print("  {:>5} {:>10} {:>12} {:>14} {:>14}\n", "stage", "busy (s)", "energy (J)", "instructions",
             "clock changes");
  for (std::size_t s = 0; s < r.stages.size(); ++s) {
    const runtime::ReplayStage& st = r.stages[s];
    fmt::print("  {:>5} {:>10.4f} {:>12.1f} {:>14} {:>14}\n", s, st.busy_s, st.energy_j, st.instructions,
               st.clock_changes);
  }
  const char* what = straggler ? "Measured energy matches the plans' (idle time at P_blocking)"
                               : "Measured time and energy match the plan";
  if (r.worst_relative <= 1e-6) {
    fmt::print("{} (within {:.1e}).\n", what, r.worst_relative);
  } else {
    fmt::print("Measured time or energy differs from the plan{} by up to {:.3g}%.\n", straggler ? "s" : "",
               r.worst_relative * 100);
  }
  if (!flags.energy_log.empty()) fmt::print("Wrote the energy log {}\n", flags.energy_log);
}

int run_replay(const ReplayFlags& flags) {
  if (flags.iterations < 1) throw InputError({"", 0, 0, "--iterations"}, "must be at least 1");
  std::optional<Straggler> straggler;
  if (!flags.straggler.empty()) straggler = parse_straggler(flags.straggler);
  if (straggler && flags.index) {
    throw InputError({"", 0, 0, "--index"}, "--straggler replays a whole plan set, switching between its plans; drop --index");
  }
  std::vector<plan::Plan> plans;
  std::size_t start_index = 0;
  const std::string source = straggler ? flags.plan : plan::plan_source(flags.plan, flags.index);
  if (straggler) {
    plans = plan::read_plan_set(flags.plan);
    plan::validate_set(plans, flags.plan);
    std::vector<TimeEnergy> points;
    for (const auto& p : plans) points.push_back({p.time_s, p.energy_j});
    start_index = plan::select_plan(points, {plan::Target::Kind::kMaxThroughput, 0});
  } else {
    plans.push_back(plan::read_plan(flags.plan, flags.index));
    plan::validate(plans.front(), source);
  }
  runtime::ReplayOptions options;
  options.iterations = flags.iterations;
  options.source = source;
  if (straggler) options.straggler = runtime::ReplayStraggler{straggler->slowdown, straggler->iteration};
  if (!flags.energy_log.empty()) options.energy_log = flags.energy_log;
  print_report(runtime::replay_plans(plans, start_index, options), plans, start_index, straggler, flags, source);
  return 0;
}

}  // namespace

Action register_replay(CLI::App& app) {
  auto flags = std::make_shared<ReplayFlags>();
  CLI::App* cmd = app.add_subcommand(
      "replay", "Run a plan's instruction stream through the runtime against simulated GPUs");
  cmd->add_option(
         "--plan", flags->plan,
         "A kareus-plan file, or a plan set (plans.json) with --index (or with --straggler)")
      ->required();
  cmd->add_option("--index", flags->index, "Which plan of a plan set to replay");
  cmd->add_option("--gpu", flags->gpu, "Devices to replay on: fake (one simulated GPU per stage)")
      ->check(CLI::IsMember({"fake"}))
      ->capture_default_str();
  cmd->add_option("--iterations", flags->iterations, "Training iterations to run")
      ->capture_default_str();
  cmd->add_option("--energy-log", flags->energy_log,
                  "Write the energy monitor's CSV log (one row per iteration) to this file");
  cmd->add_option(
      "--straggler", flags->straggler,
      "SLOWDOWN@iteration:N: from iteration N on another data-parallel pipeline takes "
      "SLOWDOWN x the fastest plan's time; --plan is then a whole plan set (plans.json), "
      "and the replay switches to the least-energy plan meeting that time and shows the "
      "energy saved against staying on the fastest plan");
  return [flags] { return run_replay(*flags); };
}

}  // namespace kareus::cli
