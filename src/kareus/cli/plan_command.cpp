// `kareus plan`: Kareus end to end, from a described training job to a chosen plan.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <optional>

#include "kareus/cli/commands.hpp"
#include "kareus/cli/evaluator_flags.hpp"
#include "kareus/cli/job_flags.hpp"
#include "kareus/cli/schedule_flags.hpp"
#include "kareus/cli/search_flags.hpp"
#include "kareus/cli/solver_flags.hpp"
#include "kareus/core/error.hpp"
#include "kareus/core/io.hpp"
#include "kareus/interop/perseus_profile.hpp"
#include "kareus/planner/baselines.hpp"
#include "kareus/planner/host_bound.hpp"
#include "kareus/planner/plan_job.hpp"
#include "kareus/planner/planner.hpp"
#include "kareus/plan/select.hpp"
#include "kareus/evaluate/simulated.hpp"
#include "kareus/report/html_report.hpp"
#include "kareus/report/partition_gantt.hpp"
#include "kareus/report/plot.hpp"

namespace kareus::cli {
namespace {

struct PlanFlags {
  WorkloadFlags workload;
  std::string preset;
  std::string evaluator = "sim";
  evaluate::NoiseOptions noise;
  PartitionSearchFlags search = {
      .mode = "exhaustive", .budget = std::nullopt, .seed = 0, .measurement_noise = std::nullopt,
      .remeasure = std::nullopt};
  std::string target = "max-throughput";
  std::string out = "kareus-out";
  double overhead = 1.0;
  ScheduleFlags schedule;
  std::string unit_time = "auto";
  bool no_relaxation_plans = false;
  std::string journal_dir;
  std::string stage_options;
  std::string plans = "200";
  bool no_baselines = false;
  std::string gantt_partition;  // empty: the heaviest
};

// The chosen plan's partitions that the host issues slower than the GPU runs them.
nlohmann::json host_bound_json(const std::vector<planner::HostBoundPartition>& list) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& p : list) {
    out.push_back({{"key", p.key}, {"freq_mhz", p.knob.freq_mhz}, {"sms", p.knob.sms}, {"slot", p.knob.slot},
                   {"gpu_time_s", p.gpu_time_s}, {"host_time_s", p.host_time_s},
                   {"host_bound", p.host_bound()}, {"exposed_host_s", p.exposed_host_s}});
  }
  return out;
}

// What the host does to the plan's partitions: which it cannot issue as fast as the GPU runs them,
// and how much the engine's waiting for the GPU adds to those it exposes.
std::string host_bound_line(const std::vector<planner::HostBoundPartition>& list, const engine::EngineSpec& engine) {
  std::string keys;
  std::size_t exposed = 0;
  const planner::HostBoundPartition* most = nullptr;  // the largest exposed share of a partition's time
  for (const auto& p : list) {
    if (p.host_bound()) {
      keys += fmt::format("{}{} ({:.3f} ms host, {:.3f} ms GPU)", keys.empty() ? "" : ", ", p.key, p.host_time_s * 1e3,
                          p.gpu_time_s * 1e3);
    }
    if (p.exposed_host_s > 0) {
      ++exposed;
      if (!most || p.exposed_host_s / p.gpu_time_s > most->exposed_host_s / most->gpu_time_s) most = &p;
    }
  }
  std::string line = keys.empty() ? fmt::format("Engine {}: the host issues every partition of the plan faster than the GPU runs it", engine.name)
                                  : fmt::format("Engine {}: host-bound partitions: {}", engine.name, keys);
  if (most) {
    line += fmt::format("; it waits for the GPU at each op of {}, which adds the host's time to {} "
                        "partition knob(s) of the plan (at most {:.0f}%: {} at {:g} MHz, {:.3f} ms on {:.3f} ms)",
                        engine::op_sync_where(engine), exposed, 100 * most->exposed_host_s / most->gpu_time_s,
                        most->key, most->knob.freq_mhz, most->exposed_host_s * 1e3, most->gpu_time_s * 1e3);
  }
  return line;
}

nlohmann::json optional_json(const std::optional<double>& x) { return x ? nlohmann::json(*x) : nlohmann::json(); }

// summary.json's "baselines": each baseline's frontier ends, and what the chosen plan saves.
nlohmann::json baselines_json(const planner::BaselineComparison& b) {
  nlohmann::json methods = nlohmann::json::array();
  for (const auto& f : b.baselines) {
    methods.push_back({{"method", planner::to_string(f.method)},
                       {"fastest_time_s", f.points.front().time_s},
                       {"fastest_energy_j", f.points.front().energy_j},
                       {"lowest_energy_time_s", f.points.back().time_s},
                       {"lowest_energy_j", f.points.back().energy_j}});
  }
  nlohmann::json out = {{"methods", std::move(methods)},
                        {"left_out", b.left_out},
                        {"vs_perseus_same_time_energy_saving_pct", optional_json(b.vs_perseus_same_time_energy_pct)},
                        {"perseus_fastest_time_s", optional_json(b.perseus_fastest_s)},
                        {"iso_time_energy_reduction_pct_vs_perseus", optional_json(b.iso_time_energy_reduction_pct)},
                        {"iso_energy_time_reduction_pct_vs_perseus", optional_json(b.iso_energy_time_reduction_pct)},
                        {"run_time_s", b.run_time_s}};
  if (b.vs_megatron) {
    out["vs_megatron"] = {{"energy_saving_pct", b.vs_megatron->energy_saving_pct},
                          {"time_saving_pct", b.vs_megatron->time_saving_pct}};
  }
  return out;
}

void print_baselines(const planner::BaselineComparison& b, const plan::Plan& chosen) {
  // Why a baseline could not run is a diagnostic (summary.json keeps it too).
  for (const std::string& reason : b.left_out) spdlog::info("baseline left out: {}", reason);
  if (b.baselines.empty()) return;
  fmt::print("Against the baselines (same evaluator, engine and measurements; costing them took {:.2f} s):\n", b.run_time_s);
  for (const auto& f : b.baselines) {
    fmt::print("  {:<22} {:>10.4f} s {:>12.1f} J{}\n", planner::to_string(f.method), f.points.front().time_s,
               f.points.front().energy_j, f.points.size() > 1 ? "  (fastest plan)" : "");
  }
  if (b.vs_megatron) {
    fmt::print("  the chosen plan: {:.1f}% less energy than Megatron-LM, {:.1f}% {}\n", b.vs_megatron->energy_saving_pct,
               std::abs(b.vs_megatron->time_saving_pct), b.vs_megatron->time_saving_pct >= 0 ? "faster" : "slower");
  }
  if (b.vs_perseus_same_time_energy_pct) {
    fmt::print("  against Perseus at its time ({:.4f} s or less): {:.1f}% less energy\n", chosen.time_s,
               *b.vs_perseus_same_time_energy_pct);
  } else if (b.perseus_fastest_s) {
    fmt::print("  Perseus has no plan as fast as the chosen one (its fastest: {:.4f} s)\n", *b.perseus_fastest_s);
  }
  if (b.iso_time_energy_reduction_pct || b.iso_energy_time_reduction_pct) {
    auto pct = [](const std::optional<double>& x) { return x ? fmt::format("{:.1f}%", *x) : std::string("-"); };
    fmt::print("  Kareus's frontier against Perseus's: {} less energy at Perseus's fastest time, {} less time at its "
               "lowest energy (kareus compare's iso figures)\n",
               pct(b.iso_time_energy_reduction_pct), pct(b.iso_energy_time_reduction_pct));
  }
}

// The report's picture of one partition's overlap at the chosen plan's knob for it: the one the
// user names, else the one taking the most time per layer. Only the simulated GPU has a timeline.
std::pair<std::string, std::string> partition_section(const planner::Job& job, const plan::Plan& chosen,
                                                      const evaluate::Evaluator& evaluator, const std::string& wanted) {
  const auto* sim = dynamic_cast<const evaluate::SimulatedEvaluator*>(&evaluator.impl());
  const std::vector<workload::Partition> partitions = planner::job_partitions(job, chosen.schedule);
  const workload::Partition* pick = nullptr;
  std::optional<workload::Knob> knob;
  double heaviest_s = -1;
  for (const workload::Partition& p : partitions) {
    if (!wanted.empty() && p.key != wanted) continue;
    const auto k = report::most_used_knob(chosen, p.key);
    if (!k) continue;
    const evaluate::EvalResult r = evaluator.evaluate(p, *k);
    if (r.ok() && r.time_s * p.count > heaviest_s) heaviest_s = r.time_s * p.count, pick = &p, knob = k;
  }
  if (!wanted.empty() && !pick) {
    throw InputError({"", 0, 0, "--gantt-partition"}, fmt::format("the plan runs no partition '{}'", wanted));
  }
  if (!pick) return {"One partition's overlap", "<p>(the plan carries no partition knobs)</p>"};
  const std::string title = fmt::format("One partition's overlap: {}{}", pick->key, wanted.empty() ? " (the heaviest)" : "");
  if (!sim) return {title, "<p>(a table of measurements has no timeline to draw)</p>"};
  return {title, report::partition_gantt_svg(*pick, *knob, sim->timeline(*pick, *knob))};
}

// How far the frontier can be from the exact one on the composed options.
std::string frontier_exactness(const planner::JobPlan& p) {
  return fmt::format("local search {}; every plan within {:.3f}% of the least energy any plan of its time can spend "
                     "on these options (worst at {:.4f} s; the linear relaxation's bound)",
                     p.kareus.local_search_converged ? "converged" : "not converged",
                     100 * p.bound_gap.relative, p.bound_gap.time_s);
}

nlohmann::json summary_json(const planner::Job& job, const planner::JobPlan& p, const evaluate::Evaluator& evaluator,
                            const planner::PlannerOptions& options, const PlanFlags& flags) {
  const planner::MethodResult& k = p.kareus;
  nlohmann::json summary = {{"workload", job.name},
                            {"model", job.model.name},
                            {"gpu", evaluator.gpu().name},
                            {"engine", options.engine.name},
                            {"evaluator", evaluator.name()},
                            {"provenance", provenance_note(evaluator)},
                            {"p_static_w", k.p_static_w},
                            {"energy_scope", plan::energy_scope_for(job.parallel.pp)},
                            {"target", plan::to_string(p.target)},
                            {"schedule", flags.schedule.schedule},
                            {"virtual_stages", flags.schedule.virtual_stages},
                            {"time_s", p.chosen_plan.time_s},
                            {"energy_j", p.chosen_plan.energy_j},
                            {"frontier_points", k.frontier.size()},
                            {"local_search_converged", k.local_search_converged},
                            {"relaxation_plans", !flags.no_relaxation_plans},
                            {"bound_gap", p.bound_gap.relative},
                            {"bound_gap_time_s", p.bound_gap.time_s},
                            {"unit_time_s", k.unit_time_s},
                            {"measurements", k.measurements},
                            {"grid_knobs", k.grid_knobs},
                            {"unusable_table_knobs", k.unusable_knobs},
                            {"overhead_factor", flags.overhead},
                            {"host_bound_partitions", host_bound_json(p.host_bound)},
                            {"run_time_s", p.run_time_s}};
  if (p.baselines) summary["baselines"] = baselines_json(*p.baselines);
  return summary;
}

// Every method's frontier, the chosen plan ringed, and Kareus's iso figures against Perseus drawn.
std::string frontier_svg(const planner::Job& job, const planner::JobPlan& p) {
  const std::vector<TimeEnergy> points = p.kareus.points();
  report::FrontierPlot plot{fmt::format("{} ({})", job.name, plan::energy_scope_for(job.parallel.pp)),
                            {{"Kareus", points, false, {}, false}}, points[p.chosen], {}};
  if (p.baselines) {
    for (const auto& b : p.baselines->baselines) {
      plot.methods.push_back({std::string(planner::to_string(b.method)), b.points, false, {}, false});
    }
    if (planner::find_baseline(*p.baselines, planner::Method::kPerseus)) {
      plot.iso = report::IsoSavings{"Kareus", "Perseus", p.baselines->iso_time_energy_reduction_pct,
                                    p.baselines->iso_energy_time_reduction_pct};
    }
  }
  return report::frontier_plot_svg(plot);
}

std::string report_html(const planner::Job& job, const planner::JobPlan& p, const evaluate::Evaluator& evaluator,
                        const planner::PlannerOptions& options, const PlanFlags& flags, const std::string& svg) {
  const auto bound = std::count_if(p.host_bound.begin(), p.host_bound.end(), [](const auto& h) { return h.host_bound(); });
  const auto exposed = std::count_if(p.host_bound.begin(), p.host_bound.end(), [](const auto& h) { return h.exposed_host_s > 0; });
  std::string host_bound = bound == 0 ? std::string("none: the host issues every partition faster than the GPU runs it")
                                      : std::to_string(bound) + " (summary.json)";
  if (exposed > 0) host_bound += fmt::format("; host time added by the engine's waiting loop to {} (summary.json)", exposed);
  return report::html_report(
      {fmt::format("Kareus plan: {}", job.name),
       {{"workload", job.name},
        {"engine", options.engine.display_name},
        {"host-bound partitions", host_bound},
        {"target", plan::to_string(p.target)},
        {"iteration time", fmt::format("{:.4f} s", p.chosen_plan.time_s)},
        {"iteration energy", fmt::format("{:.1f} J ({})", p.chosen_plan.energy_j, plan::energy_scope_for(job.parallel.pp))},
        {"frontier points", std::to_string(p.kareus.frontier.size())},
        {"how near exact", frontier_exactness(p)},
        {"measurements", fmt::format("{} of {} knobs", p.kareus.measurements, p.kareus.grid_knobs)},
        {"how far to trust it", report::trust_note(evaluator.provenance())}},
       provenance_note(evaluator)},
      svg, report::clock_timeline_svg(p.chosen_plan),
      {{"Overlap decisions", report::overlap_decisions_html(p.chosen_plan, p.set_plans)},
       partition_section(job, p.chosen_plan, evaluator, flags.gantt_partition)});
}

// The composed table in the profile format `kareus frontier --profile` reads (knobs left out).
std::string stage_options_csv(const pipeline::OptionTable& table) {
  std::vector<interop::PerseusProfileRow> rows;
  for (int stage = 0; stage < table.num_stages(); ++stage) {
    for (schedule::OptionSlot slot : schedule::kAllOptionSlots) {  // with zb-h1 also B and W
      for (const pipeline::StageOption& o : table.at(stage, slot)) {
        rows.push_back({stage, std::string(schedule::to_string(slot)), o.freq_mhz, o.time_s, o.energy_j});
      }
    }
  }
  return interop::format_perseus_profile(rows);
}

void print_plan(const planner::Job& job, const planner::JobPlan& p, const evaluate::Evaluator& evaluator,
                const planner::PlannerOptions& options, const std::filesystem::path& dir) {
  const std::vector<TimeEnergy> points = p.kareus.points();
  fmt::print("Kareus plan for {}\n({}; energy: {})\n", job.name, provenance_note(evaluator),
             plan::energy_scope_for(job.parallel.pp));
  fmt::print("  {:<16} {:>12} {:>14}\n", "plan", "time (s)", "energy (J)");
  fmt::print("  {:<16} {:>12.4f} {:>14.1f}\n", "fastest", points.front().time_s, points.front().energy_j);
  fmt::print("  {:<16} {:>12.4f} {:>14.1f}\n", "lowest energy", points.back().time_s, points.back().energy_j);
  fmt::print("  {:<16} {:>12.4f} {:>14.1f}\n", "chosen", p.chosen_plan.time_s, p.chosen_plan.energy_j);
  if (p.baselines) print_baselines(*p.baselines, p.chosen_plan);
  fmt::print("{}\n", host_bound_line(p.host_bound, options.engine));
  fmt::print("How near exact: {}\n", frontier_exactness(p));
  fmt::print(
      "{} frontier points (unit {} s) from {} measurements in {:.2f} s; wrote {}/frontier.csv, plan.json, "
      "plans.json, summary.json, report.html, frontier.svg, timeline.svg\n",
      points.size(), p.kareus.unit_time_s, p.kareus.measurements, p.run_time_s, dir.string());
}

int run_plan(PlanFlags& flags) {
  planner::PlanRequest request{.target = plan::parse_target(flags.target),
                               .set_plans = plan::parse_plan_count(flags.plans, "--plans"),
                               .baselines = !flags.no_baselines};
  if (!(flags.overhead > 0)) throw InputError({"", 0, 0, "--overhead"}, "must be positive");
  if (!flags.stage_options.empty() && flags.schedule.virtual_stages > 1) {
    throw InputError({"", 0, 0, "--stage-options"},
                     "the profile format has one row set per stage; an interleaved plan's chunks have options of "
                     "their own (the embedding in the first, the LM head in the last), which it cannot hold");
  }
  ResolvedJobs resolved = resolve_jobs(
      flags.workload, flags.preset.empty() ? std::vector<std::string>{} : std::vector<std::string>{flags.preset}, "--preset");
  const planner::Job& job = resolved.jobs.front();
  planner::PlannerOptions options;
  options.overhead_factor = flags.overhead;
  options.schedule = schedule_kind(flags.schedule);
  options.virtual_stages = flags.schedule.virtual_stages;
  options.engine = resolved.engine;
  std::optional<evaluate::Evaluator> served =
      make_evaluator(flags.evaluator, resolved.gpu, job.model, job.parallel, options.schedule, flags.noise);
  if (!served) return 0;  // a rank other than 0 under mpirun: it measured for rank 0, which reports
  const evaluate::Evaluator& evaluator = *served;
  report_sample_use(evaluator, planner::job_partitions(job, options.schedule));
  options.unit_time_s = unit_time(flags.unit_time);
  options.relaxation_plans = !flags.no_relaxation_plans;
  apply_search_flags(flags.search, flags.noise, options.search);
  if (!flags.journal_dir.empty()) options.journal_dir = flags.journal_dir;
  options.progress = [](const std::string& line) { spdlog::debug("{}", line); };
  const planner::JobPlan p = planner::plan_job(job, evaluator, options, request);

  // Everything is computed before anything is written; each file lands atomically.
  std::string csv = "time_s,energy_j\n";
  for (const auto& point : p.kareus.points()) csv += fmt::format("{:.9g},{:.9g}\n", point.time_s, point.energy_j);
  const std::string svg = frontier_svg(job, p);
  const std::string html = report_html(job, p, evaluator, options, flags, svg);
  const std::filesystem::path dir = flags.out;
  write_file_atomic(dir / "frontier.csv", csv);
  plan::write_plan(p.chosen_plan, dir / "plan.json");
  plan::write_plan_set(p.set_plans, p.set_indices, dir / "plans.json");
  write_file_atomic(dir / "summary.json", summary_json(job, p, evaluator, options, flags).dump(1) + "\n");
  write_file_atomic(dir / "report.html", html);
  // The report's pictures alone, for papers and slides.
  if (!svg.empty()) write_file_atomic(dir / "frontier.svg", svg);
  write_file_atomic(dir / "timeline.svg", report::clock_timeline_svg(p.chosen_plan));
  if (!flags.stage_options.empty()) write_file_atomic(flags.stage_options, stage_options_csv(p.kareus.table));
  print_plan(job, p, evaluator, options, dir);
  return 0;
}

}  // namespace

Action register_plan(CLI::App& app) {
  auto flags = std::make_shared<PlanFlags>();
  CLI::App* cmd = app.add_subcommand("plan", "Plan clocks and communication overlap for a training job (Kareus)");
  add_workload_flags(*cmd, flags->workload);
  add_engine_flag(*cmd, flags->workload.engine);
  cmd->add_option("--preset", flags->preset,
                  "One of the Kareus evaluation configurations instead of workload flags "
                  "(data/configs/kareus-osdi26.json; an unknown name lists them)");
  cmd->add_option("--evaluator", flags->evaluator,
                  "sim (the simulated GPU), table:FILE (measured samples), artifact:DIR (the Kareus artifact's "
                  "profiling tree) or gpu (measured now on this machine's GPUs)")
      ->capture_default_str();
  add_noise_flags(*cmd, flags->noise);
  add_search_flags(*cmd, flags->search,
                   {.mode = "Per-partition search: exhaustive or mobo",
                    .budget = "Measurements per partition (default: mobo 15% of its grid, exhaustive all of it)",
                    .seed = "Seed of the search"});
  cmd->add_option("--target", flags->target, "max-throughput, min-energy, deadline:SECONDS or energy:JOULES")
      ->capture_default_str();
  cmd->add_option("--out", flags->out, "Output directory")->capture_default_str();
  add_schedule_flags(*cmd, flags->schedule);
  cmd->add_option("--overhead", flags->overhead,
                  "Factor on each instruction's time and energy for work the partitions do not cover "
                  "(the Kareus artifact used 1.15)")
      ->capture_default_str();
  add_unit_time_flag(*cmd, flags->unit_time);
  add_no_relaxation_plans_flag(*cmd, flags->no_relaxation_plans);
  cmd->add_option("--stage-options", flags->stage_options,
                  "Also write the composed stage option table to FILE, in the profile format of "
                  "`kareus frontier --profile` (P_blocking is summary.json's p_static_w; with zb-h1 also "
                  "backward_input and backward_weight rows; not with --virtual-stages)");
  cmd->add_option("--journal-dir", flags->journal_dir, "Keep each partition's measurements in DIR/<key>.journal.jsonl");
  cmd->add_option("--gantt-partition", flags->gantt_partition,
                  "The partition whose overlap the report draws (its compute beside the other nanobatch's "
                  "collective, at the chosen plan's knob; default: the one taking the most time)");
  cmd->add_flag("--no-baselines", flags->no_baselines,
                "Skip costing Megatron-LM, Perseus and Nanobatching+Perseus beside the plan (on the simulated GPU "
                "they take about a second)");
  cmd->add_option("--plans", flags->plans,
                  "How many frontier plans plans.json holds, evenly spaced in the frontier's order, "
                  "besides the chosen one: 'all' or a count")
      ->capture_default_str();
  return [flags] { return run_plan(*flags); };
}

}  // namespace kareus::cli
