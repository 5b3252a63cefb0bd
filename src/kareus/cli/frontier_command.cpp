// `kareus frontier`: the iteration time–energy frontier of a measured (or composed) option table.
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <optional>
#include <nlohmann/json.hpp>

#include "kareus/cli/commands.hpp"
#include "kareus/cli/schedule_flags.hpp"
#include "kareus/cli/solver_flags.hpp"
#include "kareus/core/error.hpp"
#include "kareus/core/io.hpp"
#include "kareus/pipeline/frontier_solver.hpp"
#include "kareus/pipeline/relaxation_bound.hpp"
#include "kareus/plan/plan.hpp"
#include "kareus/plan/select.hpp"
#include "kareus/planner/make_plan.hpp"
#include "kareus/report/plot.hpp"

namespace kareus::cli {
namespace {

struct FrontierFlags {
  std::string profile;
  int stages = 0;
  int microbatches = 0;
  double p_blocking_w = -1;
  ScheduleFlags schedule;
  std::string unit_time = "auto";
  std::string cost_model = "hull";
  bool csv = false;
  std::string out;
  std::string plans = "20";
  bool no_reclaim = false;
  int local_search_rounds = pipeline::SolverOptions{}.local_search_rounds;
  double local_search_budget = pipeline::SolverOptions{}.local_search_budget;
  bool bound = false;
  bool relaxation_plans = false;
};

// With a bound, each plan's lower bound (energy no plan of its time goes below) is the last column.
std::string frontier_csv(const pipeline::Frontier& frontier, const pipeline::RelaxationBound* bound) {
  std::string out = bound != nullptr ? "time_s,energy_j,planned_time_s,model_energy_j,bound_j\n"
                                     : "time_s,energy_j,planned_time_s,model_energy_j\n";
  for (const auto& p : frontier.points) {
    out += fmt::format("{:.9g},{:.9g},{:.9g},{:.9g}", p.time_s, p.energy_j, p.planned_time_s, p.model_energy_j);
    out += bound != nullptr ? fmt::format(",{:.9g}\n", bound->energy_j(p.time_s)) : "\n";
  }
  return out;
}

// How far the front can be from the exact one: its worst plan against the relaxation's bound.
std::string bound_line(const pipeline::Frontier& frontier, const pipeline::RelaxationBound& bound) {
  std::vector<TimeEnergy> plans;
  for (const auto& p : frontier.points) plans.push_back(p.time_energy());
  const pipeline::RelaxationBound::Gap worst = bound.worst_gap(plans);
  return fmt::format("Every plan within {:.3f}% of the least energy any plan of its time can spend (worst at {:.4f} s; "
                     "the linear relaxation's bound)\n",
                     100 * worst.relative, worst.time_s);
}

pipeline::SolverOptions solver_options(const FrontierFlags& flags) {
  auto cost_model = pipeline::parse_cost_model_kind(flags.cost_model);
  if (!cost_model) throw InputError({"", 0, 0, "--cost-model"}, "expected hull or exponential");
  if (flags.stages < 1) throw InputError({"", 0, 0, "--stages"}, "must be at least 1");
  if (flags.microbatches < 1) throw InputError({"", 0, 0, "--microbatches"}, "must be at least 1");
  if (!(flags.p_blocking_w >= 0)) throw InputError({"", 0, 0, "--p-blocking"}, "must be a power >= 0 W");
  const std::optional<double> unit_time_s = unit_time(flags.unit_time);
  if (flags.local_search_rounds < 0) throw InputError({"", 0, 0, "--local-search-rounds"}, "must be at least 0");
  if (!(flags.local_search_budget >= 0)) throw InputError({"", 0, 0, "--local-search-budget"}, "must be at least 0");
  return {.p_blocking_w = flags.p_blocking_w,
          .unit_time_s = unit_time_s,
          .cost_model = *cost_model,
          .reclaim_slack = !flags.no_reclaim,
          .local_search_rounds = flags.local_search_rounds,
          .local_search_budget = flags.local_search_budget,
          .relaxation_plans = flags.relaxation_plans,
          .bound = flags.bound};
}

// The profile's table, holding what the schedule's instructions run.
pipeline::OptionTable read_table(const FrontierFlags& flags, schedule::ScheduleKind kind) {
  pipeline::OptionTable table = pipeline::read_option_table(flags.profile, flags.stages);
  // A profile measures what its rows name; B and W are not split from a whole backward by any rule.
  if (schedule::splits_backward(kind) && !table.splits_backward()) {
    throw InputError({flags.profile, 0, 0, "instruction"},
                     fmt::format("{} splits each backward into B and W, which need rows of their own (instruction "
                                 "backward_input and backward_weight, every stage); a Perseus profile measures "
                                 "forward and backward only (kareus plan --schedule {} builds B and W from the workload)",
                                 flags.schedule.schedule, flags.schedule.schedule));
  }
  return table;
}

// The solver's progress on stderr, after its first two seconds: rewritten in place on a terminal.
class ProgressLine {
 public:
  void operator()(const pipeline::SolverProgress& p) {
    auto now = std::chrono::steady_clock::now();
    if (now - last_ < std::chrono::seconds(tty_ ? 1 : 5) || now - start_ < std::chrono::seconds(2)) return;
    last_ = now;
    double total = std::max(1e-12, p.stats->initial_time_s - p.stats->fastest_time_s);
    double pct = 100.0 * (p.stats->initial_time_s - p.planned_time_s) / total;
    std::string line =
        p.local_search_round == 0
            ? fmt::format("frontier: step {} ({:.0f}% of the way to the fastest plan), {} max-flow solves", p.steps,
                          std::min(100.0, pct), p.stats->cut_computations)
            : fmt::format("frontier: local search round {}, {} of {} plans expanded", p.local_search_round,
                          p.expanded, p.to_expand);
    std::fprintf(stderr, tty_ ? "\r%s" : "%s\n", line.c_str());
    reported_ = true;
  }
  void finish() const {
    if (reported_ && tty_) std::fprintf(stderr, "\n");
  }

 private:
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now(), last_ = start_;
  bool tty_ = ::isatty(STDERR_FILENO) != 0;
  bool reported_ = false;
};

// How the local search ended (pipeline/local_search.hpp); a search stopped before its wide moves' phase has none.
std::string local_search_line(const pipeline::SolverStats& stats, int rounds) {
  const std::string expansions =
      stats.wide_move_expansions > 0
          ? fmt::format("{} expansions, {} with wide moves", stats.local_search_expansions, stats.wide_move_expansions)
          : fmt::format("{} expansions", stats.local_search_expansions);
  if (rounds == 0) return "no local search";
  if (stats.local_search_converged) return fmt::format("local search converged in {} rounds ({})", stats.local_search_rounds, expansions);
  if (stats.local_search_rounds >= rounds) {
    return fmt::format("local search stopped after its {} rounds (--local-search-rounds; {}), not converged",
                       stats.local_search_rounds, expansions);
  }
  return fmt::format("local search stopped by its budget after {} rounds (--local-search-budget; {}), not converged",
                     stats.local_search_rounds, expansions);
}

void print_summary(const FrontierFlags& flags, const pipeline::Frontier& frontier, double solve_s,
                   const pipeline::RelaxationBound* bound) {
  const auto& fastest = frontier.points.front();
  const auto& frugal = frontier.points.back();
  const pipeline::SolverStats& stats = frontier.stats;
  fmt::print("Frontier of {} ({} stages, {} microbatches, {}, P_blocking {} W, unit {} s, {} cost model)\n", flags.profile,
             flags.stages, flags.microbatches, flags.schedule.schedule, flags.p_blocking_w, stats.unit.unit_time_s,
             flags.cost_model);
  fmt::print("Energy: {}\n", plan::energy_scope_for(flags.stages));
  fmt::print("  {:<22} {:>12} {:>14}\n", "plan", "time (s)", "energy (J)");
  fmt::print("  {:<22} {:>12.4f} {:>14.1f}\n", "fastest", fastest.time_s, fastest.energy_j);
  fmt::print("  {:<22} {:>12.4f} {:>14.1f}\n", "lowest energy", frugal.time_s, frugal.energy_j);
  fmt::print("{} Pareto plans of {} evaluated; unit {} s ({}); {} solver steps, {} max-flow solves, {}, {:.3f} s\n",
             frontier.points.size(), frontier.total_points, stats.unit.unit_time_s, describe(stats.unit), stats.steps,
             stats.cut_computations, local_search_line(stats, flags.local_search_rounds), solve_s);
  if (bound != nullptr) fmt::print("{}", bound_line(frontier, *bound));
}

// frontier.csv, plans.json (evenly spaced plans) and frontier.svg under --out; each file lands whole.
void write_outputs(const FrontierFlags& flags, const pipeline::OptionTable& table, const schedule::PipelineSchedule& schedule,
                   const pipeline::Frontier& frontier, std::optional<std::size_t> plan_count,
                   const pipeline::RelaxationBound* bound) {
  const std::filesystem::path dir = flags.out;
  schedule::InstructionDag dag(schedule);
  planner::PlanContext context{schedule_kind(flags.schedule), flags.microbatches, flags.p_blocking_w,
                            frontier.stats.unit.unit_time_s, {{"profile", flags.profile}, {"cost_model", flags.cost_model}}};
  const std::vector<std::size_t> in_set = plan::evenly_spaced_plans(frontier.points.size(), plan_count);
  std::vector<plan::Plan> plans;
  for (std::size_t i : in_set) plans.push_back(planner::make_plan(table, dag, frontier.points[i], context));
  std::vector<TimeEnergy> points, lower;
  for (const auto& p : frontier.points) {
    points.push_back(p.time_energy());
    if (bound != nullptr) lower.push_back({p.time_s, bound->energy_j(p.time_s)});
  }
  std::vector<report::PlotSeries> series{{"true (time, energy) of each plan", points, false}};
  if (bound != nullptr) series.push_back({"least energy any plan of its time can spend (--bound)", lower, false});
  const std::string svg = report::render_svg(
      series,
      {fmt::format("Iteration time–energy frontier: {} stages, {} microbatches ({})", flags.stages, flags.microbatches,
                   plan::energy_scope_for(flags.stages)),
       "iteration time (s)", "iteration energy (J)"});
  write_file_atomic(dir / "frontier.csv", frontier_csv(frontier, bound));
  plan::write_plan_set(plans, in_set, dir / "plans.json");
  if (!svg.empty()) {
    write_file_atomic(dir / "frontier.svg", svg);
  } else {
    spdlog::info("gnuplot is not installed; no frontier.svg written");
  }
  if (!flags.csv) fmt::print("Wrote {}/frontier.csv, plans.json{}\n", dir.string(), svg.empty() ? "" : ", frontier.svg");
}

int run_frontier(const FrontierFlags& flags) {
  const schedule::ScheduleKind kind = schedule_kind(flags.schedule);
  const pipeline::SolverOptions options = solver_options(flags);
  pipeline::OptionTable table = read_table(flags, kind);
  std::optional<schedule::PipelineSchedule> schedule;
  try {
    schedule = schedule::PipelineSchedule::make(kind, flags.stages, flags.microbatches, flags.schedule.virtual_stages);
  } catch (const InputError& e) {
    throw InputError({"", 0, 0, "--schedule"}, e.what());
  }
  // The profile's instructions run a whole stage; an interleaved GPU runs a chunk of it at a time.
  table = pipeline::chunk_option_table(std::move(table), flags.schedule.virtual_stages);
  const auto plan_count = plan::parse_plan_count(flags.plans, "--plans");  // checked before solving

  const auto start = std::chrono::steady_clock::now();
  ProgressLine progress;
  pipeline::Frontier frontier;
  try {
    frontier = pipeline::solve_frontier(table, *schedule, options, std::ref(progress));
  } catch (const InputError& e) {
    // The solver names the stage and instruction at fault; the user also needs the file.
    const InputLocation& at = e.location();
    if (!at.file.empty() || at.line > 0 || !at.field.empty()) throw;
    throw InputError({flags.profile, 0, 0, ""}, e.what());
  }
  progress.finish();
  const double solve_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // With --bound, and with --relaxation-plans unless it ran no local search.
  std::optional<pipeline::RelaxationBound> bound = std::move(frontier.bound);
  const pipeline::RelaxationBound* in_files = flags.bound ? &*bound : nullptr;
  if (flags.csv) {
    std::fputs(frontier_csv(frontier, in_files).c_str(), stdout);
  } else {
    print_summary(flags, frontier, solve_s, bound ? &*bound : nullptr);
  }
  if (!flags.out.empty()) write_outputs(flags, table, *schedule, frontier, plan_count, in_files);
  return 0;
}

}  // namespace

Action register_frontier(CLI::App& app) {
  auto flags = std::make_shared<FrontierFlags>();
  CLI::App* cmd = app.add_subcommand(
      "frontier", "Iteration time-energy frontier of a per-stage option table (Perseus profile format)");
  cmd->add_option("--profile", flags->profile,
                  "CSV with columns stage,instruction,frequency,time,energy (s, J, per GPU; instruction forward, "
                  "backward, or for zb-h1 also backward_input and backward_weight); "
                  "further columns are carried as the option's knob")
      ->required();
  cmd->add_option("--stages", flags->stages, "Number of pipeline stages S")->required();
  cmd->add_option("--microbatches", flags->microbatches, "Microbatches per iteration M")->required();
  cmd->add_option("--p-blocking", flags->p_blocking_w,
                  "Power (W) of a GPU blocked on communication; idle time is charged at it")
      ->required();
  add_schedule_flags(*cmd, flags->schedule,
                     "Model chunks per stage for --schedule interleaved; each runs the profile's stage "
                     "instruction divided by this (its layers split evenly)");
  add_unit_time_flag(*cmd, flags->unit_time);
  cmd->add_option("--cost-model", flags->cost_model,
                  "hull (exact on the options' convex hull) or exponential (Perseus's fit)")
      ->capture_default_str();
  cmd->add_flag("--csv", flags->csv, "Print only the frontier as CSV on stdout");
  cmd->add_option("--out", flags->out, "Write frontier.csv, plans.json and frontier.svg to this directory");
  cmd->add_option("--plans", flags->plans,
                  "How many frontier plans plans.json holds: 'all' or a count, evenly spaced")
      ->capture_default_str();
  cmd->add_flag("--no-reclaim", flags->no_reclaim,
                "Do not move instructions with slack to slower options (with --local-search-rounds 0: "
                "Perseus's plain assignment)");
  cmd->add_option("--local-search-rounds", flags->local_search_rounds,
                  "At most this many rounds of Pareto local search over one-option moves after "
                  "Phillips-Dessouky, then cut moves too once those converge, then wide moves (each instruction "
                  "up to 16 candidates either way); it stops earlier once no plan of the front has a move that "
                  "enters it "
                  "(the summary says which); 0 keeps Phillips-Dessouky's plans only")
      ->capture_default_str();
  cmd->add_option("--local-search-budget", flags->local_search_budget,
                  "Budget of the local search in expansions times instructions: a round starts only if it "
                  "fits. The default converges on small pipelines and stops large ones early (the summary says "
                  "so); 1e15 with --local-search-rounds 1000000 runs to convergence, minutes on large pipelines")
      ->capture_default_str();
  cmd->add_flag("--bound", flags->bound,
                "Also bound the front from below: the least energy any plan of each time can spend (the dual "
                "of the linear relaxation over the options' convex hulls); the summary gives the worst plan's "
                "gap to it, the CSV a bound_j column, frontier.svg its curve");
  cmd->add_flag("--relaxation-plans", flags->relaxation_plans,
                "After the local search, offer the front the relaxation's optimum where each two of the bound's "
                "lines meet, rounded to a plan: each instruction at its option of least effective energy no slower "
                "than its duration there. They beat the default budget's front near the fastest plans (BLOOM "
                "8 x 24: by up to 0.92% at a deadline) and cost the bound's computation; the summary then gives "
                "the worst plan's gap to the bound (not with --local-search-rounds 0). kareus plan and compare "
                "always offer them");
  return [flags] { return run_frontier(*flags); };
}

}  // namespace kareus::cli
