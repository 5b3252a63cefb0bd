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
#include "kareus/core/csv.hpp"
#include "kareus/core/error.hpp"
#include "kareus/core/io.hpp"
#include "kareus/planner/cluster.hpp"
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
  PartitionSearchFlags search = {.mode = "exhaustive", .budget = std::nullopt, .seed = 0};
  std::string out = "kareus-compare";
  double overhead = 1.0;
  ScheduleFlags schedule;
  std::vector<double> stragglers;
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

// Share of the partition knobs of a plan's instructions that run their collective sequentially.
double sequential_share(const plan::Plan& p) {
  int total = 0, sequential = 0;
  for (const auto& stage : p.stages) {
    for (const auto& ins : stage) {
      if (!ins.knob.is_object() || !ins.knob.contains("partitions")) continue;
      for (const auto& part : ins.knob["partitions"]) {
        ++total;
        sequential += part.value("slot", "") == "none";
      }
    }
  }
  return total ? static_cast<double>(sequential) / total : 0.0;
}

int run_compare(CompareFlags& flags) {
  if (flags.all && !flags.preset.empty()) throw InputError({"", 0, 0, "--all"}, "--all and --preset contradict each other");
  std::vector<std::string> presets;
  if (flags.all) presets = planner::evaluation_config_names();
  if (!flags.preset.empty()) presets = {flags.preset};
  ResolvedJobs resolved = resolve_jobs(flags.workload, presets, flags.all ? "--all" : "--preset");
  const std::vector<planner::Job>& jobs = resolved.jobs;
  const hardware::GpuSpec& gpu = resolved.gpu;
  evaluate::Evaluator evaluator = make_evaluator(flags.evaluator, gpu, flags.noise);
  planner::PlannerOptions options;
  options.overhead_factor = flags.overhead;
  options.schedule = schedule_kind(flags.schedule);
  options.virtual_stages = flags.schedule.virtual_stages;
  options.engine = resolved.engine;
  for (double slowdown : flags.stragglers) {
    if (!(slowdown >= 1)) {
      throw InputError({"", 0, 0, "--straggler"}, fmt::format("a slowdown must be at least 1, got {}", slowdown));
    }
  }
  apply_search_flags(flags.search, options.search);
  // Every job's schedule before the first job runs (with --all, the tenth would fail after nine).
  for (const planner::Job& job : jobs) planner::check_schedule(job, options);

  std::string csv = "config,method,max_throughput_time_s,max_throughput_energy_j,iso_time_energy_reduction_pct,"
                    "iso_energy_time_reduction_pct,cluster_gpus,cluster_energy_j\n";
  std::string straggler_csv = "config,method,slowdown,iteration_time_s,others_time_s,cluster_gpus,cluster_energy_j,"
                              "cluster_energy_blocking_j,saving_pct\n";
  nlohmann::json report = {{"evaluator", evaluator.name()}, {"provenance", provenance_note(evaluator)},
                           {"gpu", gpu.name}, {"engine", options.engine.name},
                           {"configs", nlohmann::json::array()}};
  std::vector<std::pair<std::string, std::string>> plots;
  std::vector<report::CompareSection> sections;  // the HTML report's, one per config
  std::vector<std::string> notes;  // per config: methods left out, and the reference of the iso figures
  for (const planner::Job& job : jobs) {
    spdlog::info("{}: running the four methods", job.name);
    report_sample_use(evaluator, planner::job_partitions(job, options.schedule));
    // Every method the evaluator can cost; a table may lack a baseline's knobs (the Kareus
    // artifact never measures the sequential one), and then the method is left out, with why.
    std::vector<planner::MethodResult> results;
    nlohmann::json left_out = nlohmann::json::array();
    for (planner::Method m : planner::kAllMethods) {
      if (auto reason = planner::unsupported_reason(m, job, evaluator, options)) {
        left_out.push_back({{"method", planner::to_string(m)}, {"reason", *reason}});
        notes.push_back(fmt::format("{}: {} left out: {}", job.name, planner::to_string(m), *reason));
        continue;
      }
      results.push_back(planner::run_method(m, job, evaluator, options));
    }
    // Iso figures against Perseus's frontier, or the first baseline that ran when it did not.
    std::optional<planner::Method> reference;
    for (planner::Method m : {planner::Method::kPerseus, planner::Method::kNanobatching, planner::Method::kMegatron}) {
      if (!reference && std::any_of(results.begin(), results.end(), [&](const auto& r) { return r.method == m; })) reference = m;
    }
    std::vector<TimeEnergy> ref_points, ref10;
    if (reference) {
      for (const auto& r : results) {
        if (r.method == *reference) ref_points = r.points();
      }
      ref10 = sample_evenly(ref_points, 10);
    }
    const std::string reference_name = reference ? std::string(planner::to_string(*reference)) : "";
    if (reference && *reference != planner::Method::kPerseus) {
      notes.push_back(fmt::format("{}: iso figures against {}'s frontier (Perseus left out)", job.name, reference_name));
    } else if (!reference) {
      notes.push_back(fmt::format("{}: no iso figures: no baseline could run", job.name));
    }
    const planner::ClusterShape shape{.pipelines = job.parallel.dp,
                                      .gpus_per_stage = job.parallel.tp * job.parallel.cp,
                                      .stages = job.parallel.pp,
                                      .p_blocking_w = results.empty()
                                                          ? options.p_static_w.value_or(evaluator.gpu().static_power_w)
                                                          : results.front().p_static_w};
    const std::string cluster_scope =
        fmt::format("all {} GPUs of the job (TP {} x CP {} x PP {} x DP {}), one iteration", shape.gpus(),
                    job.parallel.tp, job.parallel.cp, job.parallel.pp, job.parallel.dp);
    nlohmann::json config = {{"config", job.name},
                             {"schedule", flags.schedule.schedule},
                             {"virtual_stages", flags.schedule.virtual_stages},
                             {"energy_scope", plan::energy_scope_for(job.parallel.pp)},
                             {"cluster_energy_scope", cluster_scope},
                             {"reference", reference ? nlohmann::json(reference_name) : nlohmann::json()},
                             {"left_out", std::move(left_out)},
                             {"methods", nlohmann::json::array()}};
    std::vector<report::PlotSeries> series;
    report::CompareSection section;
    section.config = job.name;
    section.energy_scope = plan::energy_scope_for(job.parallel.pp);
    section.reference = reference_name;
    for (const std::string& note : notes) {
      if (note.starts_with(job.name + ": ")) section.notes.push_back(note.substr(job.name.size() + 2));
    }
    std::optional<report::IsoSavings> iso;
    for (const planner::MethodResult& r : results) {
      const std::vector<TimeEnergy> points = r.points();
      const std::vector<TimeEnergy> points10 = sample_evenly(points, 10);
      std::optional<double> iso_time, iso_energy, iso_time10, iso_energy10;
      if (reference && r.method != *reference) {
        iso_time = iso_time_energy_reduction_pct(points, ref_points);
        iso_energy = iso_energy_time_reduction_pct(points, ref_points);
        iso_time10 = iso_time_energy_reduction_pct(points10, ref10);
        iso_energy10 = iso_energy_time_reduction_pct(points10, ref10);
      }
      const double cluster_j = planner::cluster_energy_j(points.front(), shape);
      csv += fmt::format("{},{},{:.6f},{:.3f},{},{},{},{:.1f}\n", csv_field(job.name), csv_field(planner::to_string(r.method)),
                         points.front().time_s, points.front().energy_j, optional_pct(iso_time), optional_pct(iso_energy),
                         shape.gpus(), cluster_j);
      nlohmann::json stragglers = nlohmann::json::array();
      for (double slowdown : flags.stragglers) {
        const planner::StragglerIteration it = planner::straggler_iteration(points, shape, slowdown);
        straggler_csv += fmt::format("{},{},{:.3f},{:.6f},{:.6f},{},{:.1f},{:.1f},{:.3f}\n", csv_field(job.name),
                                     planner::to_string(r.method), slowdown, it.iteration_time_s, it.others_plan.time_s,
                                     shape.gpus(), it.cluster_energy_j, it.cluster_energy_blocking_j, it.saving_pct());
        stragglers.push_back({{"slowdown", slowdown},
                              {"iteration_time_s", it.iteration_time_s},
                              {"others_time_s", it.others_plan.time_s},
                              {"cluster_energy_j", it.cluster_energy_j},
                              {"cluster_energy_blocking_j", it.cluster_energy_blocking_j},
                              {"saving_pct", it.saving_pct()}});
      }
      nlohmann::json frontier = nlohmann::json::array();
      for (const auto& p : points) frontier.push_back({p.time_s, p.energy_j});
      nlohmann::json entry = {
          {"method", planner::to_string(r.method)},
          {"max_throughput_time_s", points.front().time_s},
          {"max_throughput_energy_j", points.front().energy_j},
          {"iso_time_energy_reduction_pct", optional_json(iso_time)},
          {"iso_energy_time_reduction_pct", optional_json(iso_energy)},
          {"iso_time_energy_reduction_pct_10_points", optional_json(iso_time10)},
          {"iso_energy_time_reduction_pct_10_points", optional_json(iso_energy10)},
          {"measurements", r.measurements},
          {"cluster_energy_j", cluster_j},
          {"stragglers", std::move(stragglers)},
          {"frontier", std::move(frontier)}};
      if (r.method != planner::Method::kKareus) {
        entry["clocks_mhz"] = planner::method_clocks_mhz(r.method, job, evaluator, options);  // a table's may be few
      } else {
        entry["max_throughput_sequential_share"] = sequential_share(planner::make_plan(r, job, r.frontier.front()));
      }
      config["methods"].push_back(std::move(entry));
      series.push_back({std::string(planner::to_string(r.method)), points, points.size() == 1});
      section.methods.push_back({std::string(planner::to_string(r.method)), points.front(), iso_time, iso_energy,
                                 r.measurements});
      if (r.method == planner::Method::kKareus && reference) {
        iso = report::IsoSavings{"Kareus", reference_name, iso_time, iso_energy};
      }
    }
    report["configs"].push_back(std::move(config));
    if (!series.empty()) {  // every method left out: nothing to plot
      section.frontier_svg = report::frontier_plot_svg({fmt::format("{} ({})", job.name, section.energy_scope),
                                                        std::move(series), std::nullopt, iso});
      if (!section.frontier_svg.empty()) plots.emplace_back(file_stem(job.name) + ".svg", section.frontier_svg);
    }
    sections.push_back(std::move(section));
  }
  const std::string html = report::compare_report_html(
      {"Kareus against its baselines",
       {{"configs", std::to_string(jobs.size())},
        {"evaluator", evaluator.name()},
        {"GPU", gpu.display_name},
        {"engine", options.engine.display_name},
        {"Kareus's partition search", flags.search.mode},
        {"how far to trust it", report::trust_note(evaluator.provenance())}},
       provenance_note(evaluator)},
      sections);
  const std::filesystem::path dir = flags.out;
  write_file_atomic(dir / "compare.csv", csv);
  write_file_atomic(dir / "compare.json", report.dump(1) + "\n");
  if (!flags.stragglers.empty()) write_file_atomic(dir / "stragglers.csv", straggler_csv);
  for (const auto& [name, svg] : plots) write_file_atomic(dir / name, svg);
  write_file_atomic(dir / "report.html", html);
  fmt::print("{}", csv);
  if (!flags.stragglers.empty()) fmt::print("{}", straggler_csv);
  for (const std::string& note : notes) fmt::print("{}\n", note);
  fmt::print("({}; engine {}; iso figures against Perseus's frontier{}; max_throughput_energy_j covers one GPU per stage, "
             "cluster_energy_j every GPU of the job, TP x CP x PP x DP; wrote {}/compare.csv, compare.json, "
             "report.html{}{})\n",
             provenance_note(evaluator), options.engine.name, notes.empty() ? "" : " unless said above", dir.string(),
             flags.stragglers.empty() ? "" : ", stragglers.csv",
             plots.empty() ? "" : " and one SVG per config");
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
  cmd->add_option("--straggler", flags->stragglers,
                  "Slowdowns of one pipeline of the --dp pipelines, e.g. 1.05,1.2: the others wait for it on "
                  "their fastest plan, or follow the frontier to the least-energy plan that meets its time "
                  "(stragglers.csv, whole-job energy)")
      ->delimiter(',');
  return [flags] { return run_compare(*flags); };
}

}  // namespace kareus::cli
