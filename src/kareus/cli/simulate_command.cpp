// `kareus simulate`: replays one iteration of a plan on its pipeline's GPUs with the P2P transfers
// between stages, the clock-switch latency of each change and optional jitter (see
// sim/simulator.hpp), under each alignment of clock requests against the GPU's work (Zeus's sync
// per instruction, GPU-timed, host-timed), prints realised beside planned time and energy, and
// writes the iteration as a Chrome / Perfetto trace.
#include <fmt/format.h>

#include <optional>
#include <string_view>
#include <vector>

#include "kareus/cli/commands.hpp"
#include "kareus/cli/workload_flags.hpp"
#include "kareus/core/error.hpp"
#include "kareus/core/io.hpp"
#include "kareus/engine/engine.hpp"
#include "kareus/plan/plan.hpp"
#include "kareus/plan/validate.hpp"
#include "kareus/sim/cluster.hpp"
#include "kareus/sim/simulator.hpp"
#include "kareus/sim/trace.hpp"
#include "kareus/workload/stage_transfer.hpp"

namespace kareus::cli {
namespace {

struct SimulateFlags {
  std::string plan;
  std::optional<std::size_t> index;
  WorkloadFlags workload;
  std::string cluster = "dgx-a100";
  bool no_p2p = false;
  std::optional<double> switch_latency_ms;
  double jitter = 0;
  std::uint64_t seed = 1;
  std::string trace;
  bool json = false;
  std::string alignment = "all";
  std::optional<std::string> engine;  // default: the plan's source.engine, else engine::kDefaultEngine
  int host_lead = 1;
};

// One alignment's replay, as the table and the JSON show it.
struct AlignedRun {
  sim::Alignment alignment;
  sim::SimulationResult result;
};

// The engine the plan's times were composed under, unless --engine overrides it.
engine::EngineSpec simulated_engine(const SimulateFlags& flags, const plan::Plan& plan) {
  if (flags.engine) return load_engine_flag(*flags.engine);
  if (plan.source.is_object() && plan.source.contains("engine") && plan.source["engine"].is_string()) {
    try {
      return engine::load_engine(plan.source["engine"].get<std::string>());
    } catch (const InputError& e) {  // named where the name came from, as --engine's refusals are
      throw InputError({flags.plan, 0, 0, "source.engine"}, e.what());
    }
  }
  return engine::load_engine(engine::kDefaultEngine);
}

// Host time the engine exposes at each instruction's start, which the plan's times include.
double exposed_host_s(const engine::EngineSpec& e) {
  return e.sync_per_instruction ? e.host.instruction_s + e.host.launch_latency_s : 0.0;
}

std::vector<AlignedRun> simulate_alignments(const plan::Plan& plan, sim::SimulationOptions options,
                                            const std::vector<sim::Alignment>& alignments) {
  std::vector<AlignedRun> runs;
  for (sim::Alignment a : alignments) {
    options.alignment = a;
    runs.push_back({a, sim::simulate(plan, options)});
  }
  return runs;
}

std::string signed_percent(double now, double before) {
  return before > 0 ? fmt::format("{:+.3f}%", 100.0 * (now - before) / before) : "n/a";
}

// The alignments --alignment asks for, the one the trace and the JSON's own figures show first.
// With every alignment that is sync: the alignment the plan's times were composed under, so the
// replay with nothing added is the plan.
std::vector<sim::Alignment> alignments_of(const SimulateFlags& flags) {
  if (flags.host_lead < 1) {
    throw InputError({"", 0, 0, "--host-lead"}, fmt::format("must be at least 1 instruction, got {}", flags.host_lead));
  }
  if (flags.alignment == "all") return {sim::Alignment::kSync, sim::Alignment::kGpuTimed, sim::Alignment::kHostTimed};
  return {sim::parse_alignment(flags.alignment)};
}

// The simulator's options from the flags, the cluster and the engine; `transfers` says in words
// what the P2P transfers are.
sim::SimulationOptions simulation_options(const SimulateFlags& flags, const plan::Plan& plan,
                                          const sim::ClusterSpec& cluster, const engine::EngineSpec& engine,
                                          std::string& transfers) {
  sim::SimulationOptions options;
  options.clock_switch_latency_s =
      flags.switch_latency_ms ? *flags.switch_latency_ms * 1e-3 : cluster.clock_switch_latency_s;
  options.jitter = flags.jitter;
  options.seed = flags.seed;
  options.plan_source = plan::plan_source(flags.plan, flags.index);
  options.exposed_host_s = exposed_host_s(engine);
  options.host_lead_instructions = flags.host_lead;
  transfers = "none (--no-p2p)";
  if (flags.no_p2p) return options;
  const ResolvedWorkload w = resolve_workload(flags.workload);
  if (w.parallel.pp != plan.num_stages) {
    throw InputError({"", 0, 0, "--pp"},
                     fmt::format("the plan has {} stages but the workload {}; give the plan's workload flags, or "
                                 "--no-p2p",
                                 plan.num_stages, w.parallel.pp));
  }
  options.transfer_bytes = workload::stage_transfer_bytes(w.model, w.parallel);
  const int gpus_per_stage = w.parallel.tp * w.parallel.cp;
  options.link = [cluster, gpus_per_stage](int a, int b) { return cluster.link_between(a, b, gpus_per_stage); };
  const sim::Link first = cluster.link_between(0, plan.num_stages > 1 ? 1 : 0, gpus_per_stage);
  transfers = fmt::format("{:.3g} MB per microbatch per GPU; stage 0 -> 1 over {} ({:.0f} GB/s, {:.0f} us)",
                          options.transfer_bytes / 1e6, first == cluster.intra_node ? "NVLink" : "the inter-node link",
                          first.bandwidth_bps / 1e9, first.latency_s * 1e6);
  return options;
}

nlohmann::json alignment_json(const AlignedRun& run) {
  const sim::SimulationResult& r = run.result;
  return {{"alignment", sim::to_string(run.alignment)}, {"time_s", r.time_s},
          {"energy_j", r.energy_j},                     {"clock_changes", r.clock_changes},
          {"late_clock_changes", r.late_clock_changes}, {"early_clock_changes", r.early_clock_changes}};
}

// The first run's figures, as before alignments, and with several, every run's under "alignments".
void print_json(const plan::Plan& plan, const std::vector<AlignedRun>& runs, const sim::SimulationOptions& options,
                const engine::EngineSpec& engine, const sim::ClusterSpec& cluster) {
  const sim::SimulationResult& r = runs.front().result;
  nlohmann::json out = {{"planned_time_s", r.planned_time_s}, {"planned_energy_j", r.planned_energy_j},
                        {"time_s", r.time_s},                 {"energy_j", r.energy_j},
                        {"energy_scope", plan.energy_scope},  {"alignment", sim::to_string(runs.front().alignment)},
                        {"clock_changes", r.clock_changes},   {"late_clock_changes", r.late_clock_changes},
                        {"early_clock_changes", r.early_clock_changes},
                        {"transfers", r.transfers.size()},    {"transfer_bytes", options.transfer_bytes},
                        {"clock_switch_latency_s", options.clock_switch_latency_s},
                        {"engine", engine.name},              {"exposed_host_s", options.exposed_host_s},
                        {"host_lead_instructions", options.host_lead_instructions},
                        {"jitter", options.jitter},           {"seed", options.seed},
                        {"cluster", cluster.name}};
  if (runs.size() > 1) {
    out["alignments"] = nlohmann::json::array();
    for (const AlignedRun& run : runs) out["alignments"].push_back(alignment_json(run));
  }
  fmt::print("{}\n", out.dump(1));
}

void print_alignment_table(const std::vector<AlignedRun>& runs, int host_lead) {
  const sim::SimulationResult& first = runs.front().result;
  fmt::print("  {:<20} {:>12} {:>10} {:>12} {:>10} {:>8} {:>6} {:>6}\n", "", "time (s)", "change", "energy (J)",
             "change", "changes", "late", "early");
  fmt::print("  {:<20} {:>12.6f} {:>10} {:>12.2f}\n", "plan", first.planned_time_s, "", first.planned_energy_j);
  for (const AlignedRun& run : runs) {
    const sim::SimulationResult& r = run.result;
    std::string name(sim::to_string(run.alignment));
    if (run.alignment == sim::Alignment::kHostTimed) name += fmt::format(" (lead {})", host_lead);
    fmt::print("  {:<20} {:>12.6f} {:>10} {:>12.2f} {:>10} {:>8} {:>6} {:>6}\n", name, r.time_s,
               signed_percent(r.time_s, r.planned_time_s), r.energy_j, signed_percent(r.energy_j, r.planned_energy_j),
               r.clock_changes, r.late_clock_changes, r.early_clock_changes);
  }
}

int run_simulate(const SimulateFlags& flags) {
  const std::vector<sim::Alignment> alignments = alignments_of(flags);
  const plan::Plan plan = plan::read_plan(flags.plan, flags.index);
  plan::validate(plan, plan::plan_source(flags.plan, flags.index));
  const sim::ClusterSpec cluster = sim::load_cluster_preset(flags.cluster);
  const engine::EngineSpec engine = simulated_engine(flags, plan);
  std::string transfers;
  const sim::SimulationOptions options = simulation_options(flags, plan, cluster, engine, transfers);
  const std::vector<AlignedRun> runs = simulate_alignments(plan, options, alignments);
  const std::string_view shown = sim::to_string(runs.front().alignment);
  if (!flags.trace.empty()) write_file_atomic(flags.trace, sim::chrome_trace(plan, runs.front().result).dump() + "\n");
  if (flags.json) {
    print_json(plan, runs, options, engine, cluster);
    return 0;
  }
  fmt::print("Simulated iteration of {} ({}, {} stages, {} microbatches) on {}\n", flags.plan,
             schedule::to_string(plan.schedule), plan.num_stages, plan.num_microbatches, cluster.display_name);
  fmt::print("Energy: {}\n", plan.energy_scope);
  fmt::print("Engine {}: {:.1f} us of host time exposed at each instruction's start ({})\n", engine.name,
             options.exposed_host_s * 1e6,
             engine.sync_per_instruction ? "it syncs per instruction; the plan's times include it" : "it never syncs");
  print_alignment_table(runs, flags.host_lead);
  fmt::print("P2P: {}\n", transfers);
  fmt::print("Clock switch latency {:.3g} ms; jitter {} (seed {}); late: started before its clock was in effect, "
             "early: ran at a later instruction's clock\n",
             options.clock_switch_latency_s * 1e3, options.jitter, options.seed);
  if (!flags.trace.empty()) fmt::print("Wrote {} ({}; open it in Perfetto or chrome://tracing)\n", flags.trace, shown);
  return 0;
}

}  // namespace

Action register_simulate(CLI::App& app) {
  auto flags = std::make_shared<SimulateFlags>();
  CLI::App* cmd = app.add_subcommand(
      "simulate", "Replay one iteration of a plan with P2P transfers, clock-switch latency and jitter; Perfetto trace");
  cmd->add_option("--plan", flags->plan, "A kareus-plan file, or a plan set (plans.json) with --index")->required();
  cmd->add_option("--index", flags->index, "Which plan of a plan set");
  add_workload_flags(*cmd, flags->workload);
  cmd->add_option("--cluster", flags->cluster,
                  "Cluster preset (data/clusters/) or a .json file: GPUs per node, links, clock-switch latency")
      ->capture_default_str();
  cmd->add_flag("--no-p2p", flags->no_p2p, "No transfer time between stages (the workload flags are then unused)");
  cmd->add_option("--switch-latency-ms", flags->switch_latency_ms,
                  "From a clock request to the new clock in effect (default: the cluster preset's)");
  cmd->add_option("--jitter", flags->jitter,
                  "Relative standard deviation of each instruction's duration (normal, clamped to 3 sigma)")
      ->capture_default_str();
  cmd->add_option("--seed", flags->seed, "Seed of the jitter")->capture_default_str();
  cmd->add_option("--trace", flags->trace, "Write the iteration as a Chrome/Perfetto trace JSON here");
  cmd->add_flag("--json", flags->json, "Print the figures as JSON instead of a table");
  cmd->add_option("--alignment", flags->alignment,
                  "When clocks are asked for: sync (Zeus's device sync per instruction), gpu-timed, host-timed, "
                  "or all (a row each; the trace and JSON figures are sync's)")
      ->capture_default_str();
  cmd->add_option("--engine", flags->engine,
                  "The engine the plan's times were composed under: an engine under data/engines/ or a .json file "
                  "(default: the plan's source.engine, else megatron-te-eager)");
  cmd->add_option("--host-lead", flags->host_lead, "host-timed: instructions the host issues ahead of the GPU")
      ->capture_default_str();
  return [flags] { return run_simulate(*flags); };
}

}  // namespace kareus::cli
