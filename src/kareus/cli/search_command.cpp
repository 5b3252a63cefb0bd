// `kareus search`: each partition's time–energy frontier over its knobs (SM clock, SMs for the
// collective, launch slot), by multi-pass MOBO or exhaustively, resumable from a journal.
#include <fmt/format.h>

#include <algorithm>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>

#include "kareus/cli/commands.hpp"
#include "kareus/cli/range_flags.hpp"
#include "kareus/cli/evaluator_flags.hpp"
#include "kareus/cli/search_flags.hpp"
#include "kareus/cli/workload_flags.hpp"
#include "kareus/core/error.hpp"
#include "kareus/core/io.hpp"
#include "kareus/planner/planner.hpp"
#include "kareus/search/partition_search.hpp"
#include "kareus/workload/partition.hpp"

namespace kareus::cli {
namespace {

struct SearchFlags {
  WorkloadFlags workload;
  std::string partition = "all";
  std::string evaluator = "sim";
  evaluate::NoiseOptions noise;
  PartitionSearchFlags search;
  long batch = 8;
  std::optional<std::size_t> initial;
  std::string journal;
  std::string out;
  std::string clocks = "900:1410:30";
  std::string sms;  // empty = per collective: 3:30:3 (TP), 1:20:1 (CP)
  int sequential_sms = search::kDefaultNanobatchingSms;
  bool baselines = false;
  std::optional<double> stop_threshold;
  bool serial = false;
};

std::filesystem::path journal_path(const SearchFlags& flags, const std::string& key, bool several) {
  if (flags.journal.empty()) return search::journal_path(flags.out, key);
  std::filesystem::path p = flags.journal;
  if (!several) return p;
  // One journal per partition beside the one named: runs/j.jsonl → runs/j.fwd_mlp.jsonl.
  return p.parent_path() / (p.stem().string() + "." + key + p.extension().string());
}

std::string duration(double s) {
  if (!std::isfinite(s) || s < 0) return "--:--";
  auto total = static_cast<long>(std::lround(s));
  if (total >= 3600) return fmt::format("{}:{:02}:{:02}", total / 3600, total / 60 % 60, total % 60);
  return fmt::format("{}:{:02}", total / 60, total % 60);
}

class ProgressPrinter {
 public:
  explicit ProgressPrinter(bool tty) : tty_(tty) {}

  void start(const std::string& key, std::size_t index, std::size_t count) {
    key_ = key;
    index_ = index;
    count_ = count;
    last_ = std::chrono::steady_clock::now() - std::chrono::hours(1);
  }

  void update(const search::SearchProgress& p, bool final = false) {
    auto now = std::chrono::steady_clock::now();
    if (!final && now - last_ < std::chrono::milliseconds(tty_ ? 200 : 5000)) return;
    last_ = now;
    const std::size_t left = p.budget > p.measurements ? p.budget - p.measurements : 0;
    const double eta = p.measured_now > 0 ? p.elapsed_s / static_cast<double>(p.measured_now) * static_cast<double>(left)
                                          : std::nan("");
    std::string stats = fmt::format("{}/{} measurements{}, hypervolume {:.4g} J·s, ETA {}", p.measurements, p.budget,
                                    p.failed ? fmt::format(" ({} failed)", p.failed) : "", p.hypervolume,
                                    final ? "done" : duration(eta));
    std::string head = fmt::format("search {} ({}/{})", key_, index_ + 1, count_);
    if (tty_) {
      constexpr int kWidth = 24;
      const double frac = p.budget ? std::min(1.0, static_cast<double>(p.measurements) / static_cast<double>(p.budget)) : 1.0;
      const int filled = static_cast<int>(frac * kWidth);
      std::fprintf(stderr, "\r\033[K%s [%s%s] %s", head.c_str(), std::string(static_cast<std::size_t>(filled), '#').c_str(),
                   std::string(static_cast<std::size_t>(kWidth - filled), '.').c_str(), stats.c_str());
      if (final) std::fputc('\n', stderr);
    } else {
      std::fprintf(stderr, "%s: %s\n", head.c_str(), stats.c_str());
    }
    std::fflush(stderr);
  }

 private:
  bool tty_;
  std::string key_;
  std::size_t index_ = 0, count_ = 0;
  std::chrono::steady_clock::time_point last_;
};

search::PartitionSearchOptions search_options(const SearchFlags& flags) {
  search::PartitionSearchOptions options;
  apply_search_flags(flags.search, flags.noise, options);
  if (flags.batch < 1) throw InputError({"", 0, 0, "--batch"}, "the batch size must be at least 1");
  if (flags.out.empty()) throw InputError({"", 0, 0, "--out"}, "an output directory is required");
  options.batch_size = static_cast<std::size_t>(flags.batch);
  options.initial_points = flags.initial;
  options.include_baseline_knobs = flags.baselines;
  options.stop_threshold = flags.stop_threshold;
  options.parallel = !flags.serial;
  const auto clocks = parse_range(flags.clocks, "--clocks");
  options.grid.min_clock_mhz = clocks[0];
  options.grid.max_clock_mhz = clocks[1];
  options.grid.clock_step_mhz = clocks[2];
  options.grid.sequential_sms = flags.sequential_sms;
  if (!flags.sms.empty()) {
    std::vector<int> levels;
    for (double s : range_values(parse_range(flags.sms, "--sms"))) levels.push_back(static_cast<int>(std::lround(s)));
    options.grid.sms = levels;
  }
  return options;
}

void print_header(const ResolvedWorkload& w, const evaluate::Evaluator& evaluator) {
  const bool model = evaluator.provenance() == evaluate::Provenance::kModel;
  fmt::print("{}\n", describe(w));
  fmt::print("Evaluator: {}\n", model ? fmt::format("{} (the simulated GPU model: a model, not a measurement)", evaluator.name())
                                      : fmt::format("{} (measured samples)", evaluator.name()));
  fmt::print("Energy: one GPU running the partition once (J); effective energy = energy − {} W × time\n",
             w.gpu.static_power_w);
  const std::string waits = engine::op_sync_where(w.engine);
  fmt::print("Engine: {} (host-bound: a frontier knob the host issues slower than the GPU runs it){}\n", w.engine.name,
             waits.empty() ? "" : fmt::format("; it waits for the GPU at each op of {}, so `kareus plan` adds a knob's "
                                              "host time there to the times here, which are the GPU's", waits));
  std::fflush(stdout);
}

nlohmann::ordered_json partition_json(const search::PartitionSearchResult& r, std::size_t host_bound,
                                      const std::filesystem::path& journal) {
  return {{"grid_size", r.grid_size},
          {"space", r.restricted ? "the evaluator's knobs" : "the grid"},
          {"space_size", r.space_size},
          {"unusable_knobs", r.unusable.size()},
          {"budget", r.budget},
          {"measurements", r.outcome.measurements.size()},
          {"measured_knobs", r.successful.size()},
          {"measured_again", search::measured_again(r.outcome.measurements)},
          {"measured_this_run", r.outcome.measured_now},
          {"failed", r.failed},
          {"stop", std::string(search::to_string(r.outcome.stop))},
          {"frontier_points", r.frontier.size()},
          {"effective_frontier_points", r.effective_frontier.size()},
          {"hypervolume", {{"value_j_s", r.hypervolume.hypervolume},
                           {"objectives", "time (s) x real energy (J) of one GPU"},
                           {"reference", {{"time_s", r.hypervolume.reference.time_s},
                                          {"energy_j", r.hypervolume.reference.energy_j}}}}},
          {"host_bound_frontier_knobs", host_bound},
          {"journal", journal.string()}};
}

// Measured = knobs of the space with a result; a failure is not measured. A table's space is the
// grid its knobs span, of which only they are available.
void print_partition(const search::PartitionSearchResult& r, std::size_t host_bound) {
  const std::size_t measured = r.successful.size();
  std::string space = r.restricted ? fmt::format("{:>5} knobs in the table", r.space_size) : fmt::format("{:>5} knobs", r.space_size);
  if (!r.unusable.empty()) space += fmt::format(" ({} of its records not of this partition's space)", r.unusable.size());
  fmt::print("  {:<14} {}, {:>4} measured ({:.1f}%){}, {:>3} on the frontier, {:>3} on the effective frontier, stop: {}{}\n",
             r.key, space, measured,
             100.0 * static_cast<double>(measured) / static_cast<double>(std::max<std::size_t>(1, r.space_size)),
             r.failed ? fmt::format(", {} failed", r.failed) : "", r.frontier.size(), r.effective_frontier.size(),
             search::to_string(r.outcome.stop), host_bound ? fmt::format(", {} frontier knobs host-bound", host_bound) : "");
}

nlohmann::ordered_json summary_json(const SearchFlags& flags, const ResolvedWorkload& w, const evaluate::Evaluator& evaluator,
                                    const nlohmann::json& identity, nlohmann::ordered_json partitions) {
  nlohmann::ordered_json summary;
  summary["format"] = "kareus-search-summary";
  summary["version"] = 1;
  summary["workload"] = nlohmann::ordered_json::parse(identity.dump());
  summary["evaluator"] = evaluator.name();
  summary["provenance"] = evaluator.provenance() == evaluate::Provenance::kModel ? "model" : "measurement";
  summary["mode"] = flags.search.mode;
  summary["seed"] = flags.search.seed;
  summary["batch"] = flags.batch;
  summary["measurement_noise"] = modelled_noise(flags.search, flags.noise);
  summary["energy_scope"] = "one GPU running the partition once";
  summary["static_power_w"] = w.gpu.static_power_w;
  summary["engine"] = w.engine.name;
  summary["partitions"] = std::move(partitions);
  return summary;
}

int run_search_command(const SearchFlags& flags) {
  // Everything is checked before any journal or output is touched.
  const ResolvedWorkload w = resolve_workload(flags.workload);
  const search::PartitionSearchOptions options = search_options(flags);
  const std::vector<workload::Partition> partitions = planner::job_partitions({w.model, w.parallel, ""});
  std::vector<workload::Partition> searched;
  if (flags.partition == "all") {
    searched = partitions;
  } else {
    searched.push_back(workload::find_partition(partitions, flags.partition));
  }
  // A table file without a partition column holds the one partition asked for.
  const std::optional<std::string> table_key = searched.size() == 1 ? std::optional(searched.front().key) : std::nullopt;
  const evaluate::Evaluator evaluator = make_evaluator(flags.evaluator, w.gpu, flags.noise, table_key);
  report_sample_use(evaluator, searched);
  const nlohmann::json identity = journal_identity(w);
  std::vector<search::PreparedSearch> prepared;
  std::vector<std::filesystem::path> journals;
  for (const workload::Partition& p : searched) {
    prepared.push_back(search::prepare_search(p, evaluator, options));
    journals.push_back(journal_path(flags, p.key, searched.size() > 1));
    search::Journal::check(journals.back(), {identity, p.key, evaluator.name()});
  }

  print_header(w, evaluator);
  ProgressPrinter printer(::isatty(STDERR_FILENO) != 0);
  nlohmann::ordered_json summary_parts = nlohmann::ordered_json::object();
  std::vector<std::pair<std::string, std::string>> outputs;
  for (std::size_t i = 0; i < prepared.size(); ++i) {
    const search::PreparedSearch& ps = prepared[i];
    printer.start(ps.partition->key, i, prepared.size());
    search::SearchProgress last;
    const search::PartitionSearchResult r = search::run_prepared_search(
        ps, evaluator, identity, journals[i], [&](const search::SearchProgress& p) { printer.update(last = p); });
    printer.update(last, true);
    std::size_t host_bound = 0;  // frontier knobs the engine's host issues slower than the GPU runs them
    for (const search::Measurement& m : r.frontier) host_bound += engine::host_time_s(w.engine, *ps.partition, m.knob) > m.time_s;
    outputs.emplace_back(r.key + ".frontier.csv", search::frontier_csv(r.frontier));
    outputs.emplace_back(r.key + ".effective.frontier.csv", search::frontier_csv(r.effective_frontier));
    summary_parts[r.key] = partition_json(r, host_bound, journals[i]);
    print_partition(r, host_bound);
  }
  const std::filesystem::path dir = flags.out;
  for (const auto& [name, content] : outputs) write_file_atomic(dir / name, content);
  write_file_atomic(dir / "summary.json", summary_json(flags, w, evaluator, identity, std::move(summary_parts)).dump(1) + "\n");
  fmt::print("Wrote {}/summary.json and {} frontier files\n", dir.string(), outputs.size());
  return 0;
}

}  // namespace

Action register_search(CLI::App& app) {
  auto flags = std::make_shared<SearchFlags>();
  CLI::App* cmd = app.add_subcommand("search", "Find each partition's time-energy frontier over its knobs");
  add_workload_flags(*cmd, flags->workload);
  add_engine_flag(*cmd, flags->workload.engine);
  cmd->add_option("--partition", flags->partition, "Partition key (see kareus partitions), or all")->capture_default_str();
  cmd->add_option("--evaluator", flags->evaluator, "sim (the simulated GPU), table:FILE (measured samples) or artifact:DIR (the Kareus artifact's profiling tree)")
      ->capture_default_str();
  add_noise_flags(*cmd, flags->noise);
  add_search_flags(*cmd, flags->search,
                   {.mode = "mobo (multi-pass Bayesian optimisation) or exhaustive",
                    .budget = "Measurements per partition, the journal's included (default: mobo 15% of the grid, at "
                              "least the initial design; exhaustive the whole grid; with a table evaluator, of its "
                              "knobs on the grid)",
                    .seed = "Seed of the initial design"});
  cmd->add_option("--batch", flags->batch, "Knobs chosen per MOBO batch (measured in parallel when the evaluator allows)")
      ->capture_default_str();
  cmd->add_option("--initial", flags->initial,
                  "Latin hypercube points of the initial design beyond its knob of every configuration (slot and "
                  "SMs) (default: none, or as many as the surrogate needs)");
  cmd->add_option("--journal", flags->journal,
                  "JSONL journal to record into and resume from (default: DIR/<key>.journal.jsonl; with --partition "
                  "all, FILE becomes one journal per key: STEM.<key>.EXT)");
  cmd->add_option("--out", flags->out, "Output directory: <key>.frontier.csv, <key>.effective.frontier.csv, summary.json")
      ->required();
  cmd->add_option("--clocks", flags->clocks, "SM clocks LO:HI:STEP in MHz (snapped to the GPU's)")->capture_default_str();
  cmd->add_option("--sms", flags->sms, "SM levels LO:HI:STEP for the collective (default 3:30:3 for TP, 1:20:1 for CP)");
  cmd->add_option("--sequential-sms", flags->sequential_sms, "SMs of the collective in the sequential knob")
      ->capture_default_str();
  cmd->add_flag("--baselines", flags->baselines,
                "Put the sequential and nanobatching knobs of every clock into the initial design (the frontier "
                "then contains the baselines'; they cost 2 knobs per clock)");
  cmd->add_option("--stop-threshold", flags->stop_threshold,
                  "Stop MOBO when the predicted relative hypervolume gain stays below this for two batches");
  cmd->add_flag("--serial", flags->serial, "Measure one knob at a time even when the evaluator allows more");
  return [flags] { return run_search_command(*flags); };
}

}  // namespace kareus::cli
