// `kareus profile`: measures each partition's knobs on this machine's GPUs (one rank per GPU under
// mpirun; rank 0 searches, every rank measures), journalled for resuming, and writes the
// measurements in the table evaluator's format. `--p-static` measures instead the power of a GPU
// blocked in a P2P receive, `--stage-sweep` whole pipeline stages per clock (Perseus's profile).
// `--device fake` runs the same protocols on fake GPUs driven by the simulated model (tests,
// demos: no GPU needed, and nothing is measured).
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>

#include "kareus/cli/commands.hpp"
#include "kareus/cli/evaluator_flags.hpp"
#include "kareus/cli/range_flags.hpp"
#include "kareus/cli/search_flags.hpp"
#include "kareus/cli/workload_flags.hpp"
#include "kareus/core/error.hpp"
#include "kareus/core/io.hpp"
#include "kareus/evaluate/simulated.hpp"
#include "kareus/planner/planner.hpp"
#include "kareus/hardware/gpu.hpp"
#include "kareus/profile/p_static.hpp"
#include "kareus/profile/profiler.hpp"
#include "kareus/profile/run.hpp"
#include "kareus/profile/stage_sweep.hpp"

namespace kareus::cli {
namespace {

struct ProfileFlags {
  WorkloadFlags workload;
  std::string partition = "all";
  PartitionSearchFlags search;
  std::string clocks = "900:1410:30";
  std::string sms;  // empty: the search's default levels
  std::optional<std::size_t> slots;
  int sequential_sms = search::kDefaultNanobatchingSms;
  std::string device = "nvml";
  std::string collective = "nccl";
  double window_s = 5, warmup_s = 1, cool_down_s = 1;
  std::string out;
  bool compare_sim = false;
  double fake_rank_slowdown = 0;
  evaluate::NoiseOptions noise;  // fake devices only
  std::vector<std::string> fake_faults;
  bool p_static = false;
  std::optional<double> p_static_clock_mhz;
  bool stage_sweep = false;
};

// P_static on every rank: world rank 0 waits in a receive from rank 1. Rank 0 writes
// <out>/p_static.json and <out>/gpu.json (the GPU description with the measured static power, for
// `kareus plan --gpu <out>/gpu.json`).
int run_p_static(const ProfileFlags& flags, const ResolvedWorkload& w, profile::Profiler& profiler,
                 const std::vector<double>& clocks, const std::function<void()>& header) {
  if (profiler.world().size() < 2) {
    throw InputError({"", 0, 0, "--p-static"}, "P_static needs two ranks, one waiting for the other (mpirun -np 2)");
  }
  profile::PStaticOptions options;
  options.clock_mhz = flags.p_static_clock_mhz.value_or(clocks.back());
  options.wait_s = profiler.measurement().window_s;
  options.settle_s = profiler.measurement().cool_down_s;
  options.idle = profiler.measurement().idle;
  if (profiler.leader()) {
    header();
    fmt::print("P_static: rank 0's GPU waits in a P2P receive while rank 1 idles {:g} s, at {:g} MHz\n",
               options.wait_s, options.clock_mhz);
    std::fflush(stdout);
  }
  profile::PStaticResult r;
  try {
    r = profile::measure_p_static(profiler.world(), profiler.executor(), profiler.controller(), profiler.monitor(),
                                  options);
  } catch (const std::exception& e) {
    // The other ranks wait in a collective call and cannot be told: end the run.
    spdlog::error("profile: rank {} failed measuring P_static: {}", profiler.world().rank(), e.what());
    profiler.world().abort(3);
  }
  if (!profiler.leader()) {
    profiler.session().serve();  // until rank 0 closes
    profiler.close();
    return 0;
  }
  profiler.close();
  const std::filesystem::path out(flags.out);
  std::filesystem::create_directories(out);
  const bool fake = profiler.fake_gpu() != nullptr;
  nlohmann::ordered_json doc{{"p_static_w", r.power_w},
                             {"window_s", r.time_s},
                             {"energy_j", r.energy_j},
                             {"clock_mhz", options.clock_mhz},
                             {"device", profiler.session().device_name()},
                             {"receiver_rank", options.receiver},
                             {"sender_rank", options.sender},
                             {"simulated", fake}};
  write_file_atomic(out / "p_static.json", doc.dump(2) + "\n");
  hardware::GpuSpec gpu = w.gpu;
  gpu.static_power_w = r.power_w;
  nlohmann::ordered_json spec = hardware::to_json(gpu);
  if (spec.contains("source")) {
    spec["source"] = fmt::format("{} P_static {:.1f} W {} by kareus profile --p-static on {} at {:g} MHz.",
                                 spec["source"].get<std::string>(), r.power_w, fake ? "simulated" : "measured",
                                 profiler.session().device_name(), options.clock_mhz);
  }
  write_file_atomic(out / "gpu.json", spec.dump(2) + "\n");
  fmt::print("P_static = {:.2f} W ({:.4f} J over {:.3f} s){}\n", r.power_w, r.energy_j, r.time_s,
             fake ? ", simulated" : "");
  fmt::print("wrote {0}/p_static.json and {0}/gpu.json (kareus plan --gpu {0}/gpu.json ..., or --p-blocking {1:.2f} "
             "for kareus frontier)\n",
             flags.out, r.power_w);
  return 0;
}

// The search's options from the flags: its mode and budget, the grid's clocks and SM levels; one
// knob measured at a time (the ranks measure it together).
search::PartitionSearchOptions search_options(const ProfileFlags& flags, const std::vector<double>& clocks) {
  search::PartitionSearchOptions options;
  apply_search_flags(flags.search, flags.noise, options);
  options.parallel = false;
  if (flags.clocks.find(':') == std::string::npos) throw InputError({"", 0, 0, "--clocks"}, "expected LO:HI:STEP");
  options.grid.min_clock_mhz = clocks.front();
  options.grid.max_clock_mhz = clocks.back();
  options.grid.clock_step_mhz = clocks.size() > 1 ? clocks[1] - clocks[0] : 1;
  options.grid.sequential_sms = flags.sequential_sms;
  if (!flags.sms.empty()) {
    std::vector<int> levels;
    for (double s : parse_numbers(flags.sms, "--sms")) levels.push_back(static_cast<int>(std::lround(s)));
    options.grid.sms = levels;
  }
  return options;
}

// The layer partitions, then each stage's non-partition work; --slots keeps each one's first N.
std::vector<workload::Partition> profiled_partitions(const ProfileFlags& flags, const ResolvedWorkload& w) {
  std::vector<workload::Partition> partitions = planner::job_partitions({w.model, w.parallel, ""});
  if (flags.slots) {
    if (*flags.slots < 1) throw InputError({"", 0, 0, "--slots"}, "keep at least one launch slot");
    for (auto& p : partitions) {
      if (p.slots.size() > *flags.slots) p.slots.resize(*flags.slots);
    }
  }
  return partitions;
}

// The partitions --partition names (comma-separated keys, or all).
std::vector<const workload::Partition*> chosen_partitions(const std::string& keys,
                                                          const std::vector<workload::Partition>& partitions) {
  std::vector<const workload::Partition*> chosen;
  if (keys == "all") {
    for (const auto& p : partitions) chosen.push_back(&p);
    return chosen;
  }
  std::size_t start = 0;
  for (;;) {
    const std::size_t end = keys.find(',', start);
    chosen.push_back(&workload::find_partition(
        partitions, keys.substr(start, end == std::string::npos ? std::string::npos : end - start)));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return chosen;
}

profile::ProfilerOptions profiler_options(const ProfileFlags& flags) {
  profile::ProfilerOptions options;
  auto device = profile::parse_device_kind(flags.device);
  if (!device) throw InputError({"", 0, 0, "--device"}, fmt::format("expected nvml or fake, got '{}'", flags.device));
  auto collective = profile::parse_collective_kind(flags.collective);
  if (!collective) {
    throw InputError({"", 0, 0, "--collective"}, fmt::format("expected nccl or copy, got '{}'", flags.collective));
  }
  if (!(flags.fake_rank_slowdown >= 0)) throw InputError({"", 0, 0, "--fake-rank-slowdown"}, "must not be negative");
  options.device = *device;
  options.collective = *collective;
  options.measurement.window_s = flags.window_s;
  options.measurement.warmup_s = flags.warmup_s;
  options.measurement.cool_down_s = flags.cool_down_s;
  options.fake_rank_slowdown = flags.fake_rank_slowdown;
  options.fake_faults = flags.fake_faults;
  evaluate::check_noise(flags.noise);
  if (flags.noise.sigma != 0 && options.device != profile::DeviceKind::kFake) {
    throw InputError({"", 0, 0, "--noise"}, "applies to --device fake only: a GPU's measurements have their own");
  }
  options.fake_noise = flags.noise;
  return options;
}

// Rank 0's whole stages per clock (Perseus's profile), the other ranks serving it.
int run_sweep(const ProfileFlags& flags, const ResolvedWorkload& w, profile::Profiler& profiler,
              const std::vector<workload::Partition>& partitions, const std::vector<double>& clocks,
              const nlohmann::json& identity) {
  profile::StageSweepRequest request{clocks, flags.sequential_sms, flags.out, identity};
  fmt::print("Per stage, instruction and clock: the whole instruction (its layers' partitions and the stage's "
             "other work, sequential), time = the slowest rank's, energy per GPU\n");
  std::fflush(stdout);
  const profile::StageSweepOutcome outcome =
      profile::run_stage_sweep(profiler.session(), w.model, w.parallel, partitions, request);
  profiler.close();
  for (const auto& m : outcome.measurements) {
    fmt::print("  stage {} {:<8} {:>6g} MHz  {:10.6f} s  {:10.4f} J\n", m.stage, schedule::to_string(m.type),
               m.freq_mhz, m.time_s, m.energy_j);
  }
  fmt::print("{} measured now; wrote {} (kareus frontier --profile {} --stages {} ...)\n", outcome.measured_now,
             profile::stage_profile_path(flags.out).string(), profile::stage_profile_path(flags.out).string(),
             w.parallel.pp);
  return 0;
}

// --compare-sim: each measured knob beside the simulated GPU's figures for it.
std::string sim_comparison_csv(const profile::ProfileOutcome& outcome, const hardware::GpuSpec& gpu,
                               const std::vector<workload::Partition>& partitions) {
  const evaluate::SimulatedEvaluator sim(gpu);
  std::string csv = "partition,freq_mhz,sms,slot,time_s,energy_j,sim_time_s,sim_energy_j,sim_time_error,sim_energy_error\n";
  for (const auto& r : outcome.results) {
    const workload::Partition& p = workload::find_partition(partitions, r.key);
    for (const auto& m : r.successful) {
      const evaluate::EvalResult s = sim.evaluate(p, m.knob);
      csv += fmt::format("{},{:g},{},{},{:.9g},{:.9g},{:.9g},{:.9g},{:.4f},{:.4f}\n", r.key, m.knob.freq_mhz, m.knob.sms,
                         m.knob.slot, m.time_s, m.energy_j, s.time_s, s.energy_j, s.time_s / m.time_s - 1,
                         s.energy_j / m.energy_j - 1);
    }
  }
  return csv;
}

int run_profile_command(const ProfileFlags& flags) {
  const ResolvedWorkload w = resolve_workload(flags.workload);
  const profile::ProfilerOptions profiling = profiler_options(flags);
  if (flags.p_static && flags.stage_sweep) {
    throw InputError({"", 0, 0, "--p-static"}, "measures P_static alone; run --stage-sweep separately");
  }
  const std::vector<double> clocks = parse_numbers(flags.clocks, "--clocks");
  const search::PartitionSearchOptions options = search_options(flags, clocks);
  const std::vector<workload::Partition> partitions = profiled_partitions(flags, w);
  const std::vector<const workload::Partition*> chosen = chosen_partitions(flags.partition, partitions);
  for (const auto* p : chosen) search::prepare_search(*p, w.gpu, options);  // a bad grid fails before any GPU work

  // What the partitions' costs depend on: the journals resume under kareus search and plan.
  const nlohmann::json identity = journal_identity(w);
  profile::Profiler profiler(w.model, w.parallel, w.gpu, partitions, identity, profiling);
  auto header = [&] {
    fmt::print("{}\n", describe(w));
    fmt::print("Measuring on {} ({} rank{}){}\n", profiler.session().device_name(), profiler.world().size(),
               profiler.world().size() == 1 ? "" : "s",
               profiling.device == profile::DeviceKind::kFake ? ": fake GPUs driven by the simulated model, not a measurement" : "");
  };
  if (flags.p_static) return run_p_static(flags, w, profiler, clocks, header);
  if (!profiler.leader()) {
    profiler.session().serve();
    profiler.close();
    return 0;
  }
  header();
  if (flags.stage_sweep) return run_sweep(flags, w, profiler, partitions, clocks, identity);
  fmt::print("Per knob: time = the slowest rank's, energy = per GPU (mean over the ranks), one run of the partition\n");
  std::fflush(stdout);
  const profile::ProfileOutcome outcome = profile::run_profile(
      profiler.session(), {chosen, options, flags.out, identity},
      [](const std::string& key, const search::SearchProgress& p) {
        spdlog::debug("profile {}: {}/{} measurements", key, p.measurements, p.budget);
      });
  profiler.close();
  // A knob measured again (--remeasure) is one knob, more measurements: both are said.
  std::size_t again_now = 0;
  for (const auto& r : outcome.results) {
    const auto& ms = r.outcome.measurements;
    const std::size_t again = search::measured_again(ms);
    for (std::size_t n = ms.size() - r.outcome.measured_now; n < ms.size(); ++n) again_now += ms[n].repeat > 0 ? 1 : 0;
    fmt::print("  {:<14} {:>5} knobs, {:>4} measured{}{}, {:>3} on the frontier\n", r.key, r.grid_size, r.successful.size(),
               again ? fmt::format(" ({} measurements again)", again) : "", r.failed ? fmt::format(", {} failed", r.failed) : "",
               r.frontier.size());
  }
  if (flags.compare_sim) {
    write_file_atomic(std::filesystem::path(flags.out) / "comparison.csv", sim_comparison_csv(outcome, w.gpu, partitions));
  }
  fmt::print("{} knobs measured now{}; wrote {}/measurements.csv, ranks.csv{} and a journal per partition\n",
             outcome.measured_now - again_now, again_now ? fmt::format(", {} measured again", again_now) : "", flags.out,
             flags.compare_sim ? ", comparison.csv" : "");
  return 0;
}

}  // namespace

Action register_profile(CLI::App& app) {
  auto flags = std::make_shared<ProfileFlags>();
  CLI::App* cmd = app.add_subcommand(
      "profile",
      "Measure each partition's knobs on this machine's GPUs (under mpirun: one rank per GPU), resumable");
  cmd->footer(
      "Run one process per GPU of the TP x CP group, e.g. mpirun -np 8 kareus profile --out prof ...; rank 0 "
      "searches and every rank measures. A knob is measured Zeus-style: SM clock locked (needs root or "
      "CAP_SYS_ADMIN), warm-up, a window of whole runs filling --window seconds read with the energy counter, "
      "cool-down. Rerun with the same flags to resume a killed run from the journals. Plan from the result with "
      "kareus plan --evaluator table:OUT/measurements.csv.");
  add_workload_flags(*cmd, flags->workload);
  cmd->add_option("--partition", flags->partition, "Partition keys, comma-separated (see kareus partitions), or all")
      ->capture_default_str();
  add_search_flags(*cmd, flags->search,
                   {.mode = "mobo (multi-pass Bayesian optimisation) or exhaustive",
                    .budget = "Measurements per partition (default: mobo 15% of the grid, exhaustive all)",
                    .seed = "Seed of the search"});
  cmd->add_option("--clocks", flags->clocks, "SM clocks LO:HI:STEP in MHz (snapped to the GPU's)")->capture_default_str();
  cmd->add_option("--sms", flags->sms, "SM levels of the collective, LO:HI:STEP or A,B,C (default: the search's)");
  cmd->add_option("--slots", flags->slots, "Keep only each partition's first N launch slots (and the sequential knob)");
  cmd->add_option("--sequential-sms", flags->sequential_sms, "SMs of the collective in the sequential knob")
      ->capture_default_str();
  cmd->add_option("--device", flags->device, "nvml (this machine's NVIDIA GPUs) or fake (simulated, for tests)")
      ->capture_default_str();
  cmd->add_option("--collective", flags->collective,
                  "nccl (across the ranks) or copy (one GPU: an on-device copy with the collective's SMs and bytes)")
      ->capture_default_str();
  cmd->add_option("--window", flags->window_s, "Seconds of whole runs measured per knob")->capture_default_str();
  cmd->add_option("--warmup", flags->warmup_s, "Seconds of runs at the knob's clock before the window")
      ->capture_default_str();
  cmd->add_option("--cool-down", flags->cool_down_s, "Seconds idle after each window")->capture_default_str();
  cmd->add_option("--out", flags->out, "Output directory: journals, measurements.csv, ranks.csv")->required();
  cmd->add_flag("--compare-sim", flags->compare_sim,
                "Also write comparison.csv: each measured knob beside the simulated GPU's prediction and its error");
  cmd->add_flag("--p-static", flags->p_static,
                "Measure P_static instead: rank 0's GPU blocked in a P2P receive while rank 1 idles for --window "
                "seconds (needs 2 ranks); writes OUT/p_static.json and OUT/gpu.json (the GPU with that static power)");
  cmd->add_option("--p-static-clock", flags->p_static_clock_mhz, "SM clock of the P_static wait (default: the top of --clocks)");
  cmd->add_flag("--stage-sweep", flags->stage_sweep,
                "Measure whole pipeline stages instead (Perseus): per stage, instruction and clock of --clocks, the "
                "stage's whole forward or backward with the sequential knob; writes OUT/stage_profile.csv "
                "(stage,instruction,frequency,time,energy) for kareus frontier --profile");
  add_noise_flags(*cmd, flags->noise);
  cmd->add_option("--fake-rank-slowdown", flags->fake_rank_slowdown,
                  "Fake devices only: rank r runs (1 + r x this) times slower (tests)")
      ->group("");
  cmd->add_option("--fake-fault", flags->fake_faults,
                  "Fake devices only: RANK:CALL@N:error=CODE|hang|lost|kill, a fault of that rank's GPU (tests)")
      ->group("");
  return [flags] { return run_profile_command(*flags); };
}

}  // namespace kareus::cli
