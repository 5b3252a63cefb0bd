// `kareus compare`: Megatron-LM, Perseus, Nanobatching+Perseus and Kareus on the same evaluator,
// for one job or for the ten configurations of the Kareus evaluation. A method the evaluator
// cannot cost (a table without a baseline's knobs, as the Kareus artifact's tree lacks the
// sequential one) is left out with the reason, in stdout and compare.json; the iso figures are
// then against the first baseline that ran (Perseus, else Nanobatching+Perseus, else Megatron-LM).
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <optional>
#include <span>

#include "kareus/cli/commands.hpp"
#include "kareus/cli/evaluator_flags.hpp"
#include "kareus/cli/job_flags.hpp"
#include "kareus/cli/schedule_flags.hpp"
#include "kareus/cli/search_flags.hpp"
#include "kareus/cli/solver_flags.hpp"
#include "kareus/core/csv.hpp"
#include "kareus/core/error.hpp"
#include "kareus/core/io.hpp"
#include "kareus/planner/cluster.hpp"
#include "kareus/planner/comparison.hpp"
#include "kareus/planner/planner.hpp"
#include "kareus/report/html_report.hpp"
#include "kareus/report/plot.hpp"

namespace kareus::cli {
namespace {

struct CompareFlags {
  WorkloadFlags workload;
  std::string preset;
  bool all = false;
  std::string evaluator = "sim";
  evaluate::NoiseOptions noise;
  PartitionSearchFlags search = {
      .mode = "exhaustive", .budget = std::nullopt, .seed = 0, .measurement_noise = std::nullopt,
      .remeasure = std::nullopt};
  std::string out = "kareus-compare";
  double overhead = 1.0;
  ScheduleFlags schedule;
  std::vector<double> stragglers;
  bool no_relaxation_plans = false;
};

std::string optional_pct(const std::optional<double>& v) { return v ? fmt::format("{:.3f}", *v) : ""; }
nlohmann::json optional_json(const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(); }

// A config's name as a file name in --out: letters, digits, '.', '_' and '-' kept, every other run
// of characters one '-' (a job's own name holds spaces, ':' and the '/' of "15/13 layers", which
// would make a folder); the evaluation configs' names are kept as they are.
std::string file_stem(const std::string& name) {
  std::string out;
  for (char c : name) {
    const bool kept = std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
    if (kept) {
      out += c;
    } else if (!out.empty() && out.back() != '-') {
      out += '-';
    }
  }
  while (!out.empty() && out.back() == '-') out.pop_back();
  return out.empty() ? std::string("config") : out;
}

std::string method_name(planner::Method m) { return std::string(planner::to_string(m)); }

// What a config's figures rest on, one line each: methods left out, and a reference other than Perseus.
std::vector<std::string> config_notes(const planner::JobComparison& c) {
  std::vector<std::string> notes;
  for (const planner::LeftOut& l : c.left_out) notes.push_back(fmt::format("{} left out: {}", method_name(l.method), l.reason));
  if (!c.reference) {
    notes.push_back("no iso figures: no baseline could run");
  } else if (*c.reference != planner::Method::kPerseus) {
    notes.push_back(fmt::format("iso figures against {}'s frontier (Perseus left out)", method_name(*c.reference)));
  }
  return notes;
}

std::string compare_csv(const std::vector<planner::JobComparison>& comparisons) {
  std::string csv = "config,method,max_throughput_time_s,max_throughput_energy_j,iso_time_energy_reduction_pct,"
                    "iso_energy_time_reduction_pct,cluster_gpus,cluster_energy_j\n";
  for (const auto& c : comparisons) {
    for (const auto& m : c.methods) {
      csv += fmt::format("{},{},{:.6f},{:.3f},{},{},{},{:.1f}\n", csv_field(c.config), csv_field(method_name(m.method)),
                         m.points.front().time_s, m.points.front().energy_j, optional_pct(m.iso_time_energy_reduction_pct),
                         optional_pct(m.iso_energy_time_reduction_pct), c.shape.gpus(), m.cluster_energy_j);
    }
  }
  return csv;
}

std::string straggler_csv(const std::vector<planner::JobComparison>& comparisons) {
  std::string csv = "config,method,slowdown,iteration_time_s,others_time_s,cluster_gpus,cluster_energy_j,"
                    "cluster_energy_blocking_j,saving_pct\n";
  for (const auto& c : comparisons) {
    for (const auto& m : c.methods) {
      for (const auto& it : m.stragglers) {
        csv += fmt::format("{},{},{:.3f},{:.6f},{:.6f},{},{:.1f},{:.1f},{:.3f}\n", csv_field(c.config),
                           method_name(m.method), it.slowdown, it.iteration_time_s, it.others_plan.time_s,
                           c.shape.gpus(), it.cluster_energy_j, it.cluster_energy_blocking_j, it.saving_pct());
      }
    }
  }
  return csv;
}

nlohmann::json method_json(const planner::MethodComparison& m) {
  nlohmann::json stragglers = nlohmann::json::array();
  for (const auto& it : m.stragglers) {
    stragglers.push_back({{"slowdown", it.slowdown},
                          {"iteration_time_s", it.iteration_time_s},
                          {"others_time_s", it.others_plan.time_s},
                          {"cluster_energy_j", it.cluster_energy_j},
                          {"cluster_energy_blocking_j", it.cluster_energy_blocking_j},
                          {"saving_pct", it.saving_pct()}});
  }
  nlohmann::json frontier = nlohmann::json::array();
  for (const auto& p : m.points) frontier.push_back({p.time_s, p.energy_j});
  nlohmann::json entry = {{"method", method_name(m.method)},
                          {"max_throughput_time_s", m.points.front().time_s},
                          {"max_throughput_energy_j", m.points.front().energy_j},
                          {"iso_time_energy_reduction_pct", optional_json(m.iso_time_energy_reduction_pct)},
                          {"iso_energy_time_reduction_pct", optional_json(m.iso_energy_time_reduction_pct)},
                          {"iso_time_energy_reduction_pct_10_points", optional_json(m.iso_time_energy_reduction_pct_10)},
                          {"iso_energy_time_reduction_pct_10_points", optional_json(m.iso_energy_time_reduction_pct_10)},
                          {"measurements", m.measurements},
                          {"cluster_energy_j", m.cluster_energy_j},
                          {"stragglers", std::move(stragglers)},
                          {"frontier", std::move(frontier)}};
  if (m.sequential_share) {
    entry["max_throughput_sequential_share"] = *m.sequential_share;
  } else {
    entry["clocks_mhz"] = m.clocks_mhz;
  }
  return entry;
}

nlohmann::json config_json(const planner::JobComparison& c, const ScheduleFlags& schedule) {
  nlohmann::json left_out = nlohmann::json::array();
  for (const auto& l : c.left_out) left_out.push_back({{"method", method_name(l.method)}, {"reason", l.reason}});
  nlohmann::json methods = nlohmann::json::array();
  for (const auto& m : c.methods) methods.push_back(method_json(m));
  return {{"config", c.config},
          {"schedule", schedule.schedule},
          {"virtual_stages", schedule.virtual_stages},
          {"energy_scope", c.energy_scope},
          {"cluster_energy_scope", c.cluster_energy_scope},
          {"reference", c.reference ? nlohmann::json(method_name(*c.reference)) : nlohmann::json()},
          {"left_out", std::move(left_out)},
          {"methods", std::move(methods)}};
}

// The HTML report's section of one config, its frontier plot drawn (empty when nothing ran).
report::CompareSection config_section(const planner::JobComparison& c) {
  report::CompareSection section;
  section.config = c.config;
  section.energy_scope = c.energy_scope;
  section.reference = c.reference ? method_name(*c.reference) : "";
  section.notes = config_notes(c);
  std::vector<report::PlotSeries> series;
  std::optional<report::IsoSavings> iso;
  for (const auto& m : c.methods) {
    series.push_back({method_name(m.method), m.points, m.points.size() == 1});
    section.methods.push_back({method_name(m.method), m.points.front(), m.iso_time_energy_reduction_pct,
                               m.iso_energy_time_reduction_pct, m.measurements});
    if (m.method == planner::Method::kKareus && c.reference) {
      iso = report::IsoSavings{"Kareus", section.reference, m.iso_time_energy_reduction_pct, m.iso_energy_time_reduction_pct};
    }
  }
  if (!series.empty()) {
    section.frontier_svg =
        report::frontier_plot_svg({fmt::format("{} ({})", c.config, c.energy_scope), std::move(series), std::nullopt, iso});
  }
  return section;
}

int run_compare(CompareFlags& flags) {
  if (flags.all && !flags.preset.empty()) throw InputError({"", 0, 0, "--all"}, "--all and --preset contradict each other");
  std::vector<std::string> presets;
  if (flags.all) presets = planner::evaluation_config_names();
  if (!flags.preset.empty()) presets = {flags.preset};
  ResolvedJobs resolved = resolve_jobs(flags.workload, presets, flags.all ? "--all" : "--preset");
  evaluate::Evaluator evaluator = make_evaluator(flags.evaluator, resolved.gpu, flags.noise);
  planner::PlannerOptions options;
  options.overhead_factor = flags.overhead;
  options.engine = resolved.engine;
  options.schedule = schedule_kind(flags.schedule);
  options.virtual_stages = flags.schedule.virtual_stages;
  options.relaxation_plans = !flags.no_relaxation_plans;
  apply_search_flags(flags.search, flags.noise, options.search);
  planner::check_slowdowns(flags.stragglers);
  // Every job's schedule before the first job runs (with --all, the tenth would fail after nine).
  for (const planner::Job& job : resolved.jobs) planner::check_schedule(job, options);

  std::vector<planner::JobComparison> comparisons;
  for (const planner::Job& job : resolved.jobs) {
    spdlog::info("{}: running the four methods", job.name);
    report_sample_use(evaluator, planner::job_partitions(job, options.schedule));
    comparisons.push_back(planner::compare_methods(job, evaluator, options, flags.stragglers));
  }

  nlohmann::json doc = {{"evaluator", evaluator.name()}, {"provenance", provenance_note(evaluator)},
                        {"gpu", resolved.gpu.name}, {"engine", options.engine.name},
                        {"relaxation_plans", options.relaxation_plans}, {"configs", nlohmann::json::array()}};
  std::vector<report::CompareSection> sections;
  std::vector<std::string> notes;
  for (const planner::JobComparison& c : comparisons) {
    doc["configs"].push_back(config_json(c, flags.schedule));
    sections.push_back(config_section(c));
    for (const std::string& note : sections.back().notes) notes.push_back(c.config + ": " + note);
  }
  const std::string html = report::compare_report_html(
      {"Kareus against its baselines",
       {{"configs", std::to_string(comparisons.size())},
        {"evaluator", evaluator.name()},
        {"GPU", resolved.gpu.display_name},
        {"engine", options.engine.display_name},
        {"Kareus's partition search", flags.search.mode},
        {"how far to trust it", report::trust_note(evaluator.provenance())}},
       provenance_note(evaluator)},
      sections);
  const std::string csv = compare_csv(comparisons), stragglers = straggler_csv(comparisons);
  const std::filesystem::path dir = flags.out;
  write_file_atomic(dir / "compare.csv", csv);
  write_file_atomic(dir / "compare.json", doc.dump(1) + "\n");
  if (!flags.stragglers.empty()) write_file_atomic(dir / "stragglers.csv", stragglers);
  bool plots = false;
  for (const report::CompareSection& s : sections) {
    if (!s.frontier_svg.empty()) write_file_atomic(dir / (file_stem(s.config) + ".svg"), s.frontier_svg), plots = true;
  }
  write_file_atomic(dir / "report.html", html);
  fmt::print("{}{}", csv, flags.stragglers.empty() ? "" : stragglers);
  for (const std::string& note : notes) fmt::print("{}\n", note);
  fmt::print("({}; engine {}; iso figures against Perseus's frontier{}; max_throughput_energy_j covers one GPU per stage, "
             "cluster_energy_j every GPU of the job, TP x CP x PP x DP; wrote {}/compare.csv, compare.json, "
             "report.html{}{})\n",
             provenance_note(evaluator), options.engine.name, notes.empty() ? "" : " unless said above", dir.string(),
             flags.stragglers.empty() ? "" : ", stragglers.csv", plots ? " and one SVG per config" : "");
  return 0;
}

}  // namespace

Action register_compare(CLI::App& app) {
  auto flags = std::make_shared<CompareFlags>();
  CLI::App* cmd = app.add_subcommand("compare", "Megatron-LM, Perseus, Nanobatching+Perseus and Kareus on one evaluator");
  add_workload_flags(*cmd, flags->workload);
  add_engine_flag(*cmd, flags->workload.engine);
  cmd->add_option("--preset", flags->preset, "One Kareus evaluation configuration");
  cmd->add_flag("--all", flags->all, "Every Kareus evaluation configuration (data/configs/kareus-osdi26.json)");
  cmd->add_option("--evaluator", flags->evaluator, "sim, table:FILE or artifact:DIR")->capture_default_str();
  add_noise_flags(*cmd, flags->noise);
  add_search_flags(*cmd, flags->search,
                   {.mode = "Kareus's per-partition search: exhaustive or mobo",
                    .budget = "Measurements per partition for mobo",
                    .seed = "Seed of the search"});
  cmd->add_option("--out", flags->out, "Output directory")->capture_default_str();
  add_schedule_flags(*cmd, flags->schedule);
  cmd->add_option("--overhead", flags->overhead, "Overhead factor (see kareus plan)")->capture_default_str();
  add_no_relaxation_plans_flag(*cmd, flags->no_relaxation_plans);
  cmd->add_option("--straggler", flags->stragglers,
                  "Slowdowns of one pipeline of the --dp pipelines, e.g. 1.05,1.2: the others wait for it on "
                  "their fastest plan, or follow the frontier to the least-energy plan that meets its time "
                  "(stragglers.csv, whole-job energy)")
      ->delimiter(',');
  return [flags] { return run_compare(*flags); };
}

}  // namespace kareus::cli
