// `kareus simulate`: replays one iteration of a plan on its pipeline's GPUs with the P2P transfers
// between stages, the clock-switch latency of each change and optional jitter (see
// sim/simulator.hpp), prints realised beside planned time and energy, and writes the iteration as
// a Chrome / Perfetto trace.
#include <fmt/format.h>

#include <optional>

#include "kareus/cli/commands.hpp"
#include "kareus/cli/workload_flags.hpp"
#include "kareus/core/error.hpp"
#include "kareus/core/io.hpp"
#include "kareus/plan/plan.hpp"
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
};

std::string signed_percent(double now, double before) {
  return before > 0 ? fmt::format("{:+.3f}%", 100.0 * (now - before) / before) : "n/a";
}

int run_simulate(const SimulateFlags& flags) {
  const plan::Plan plan = plan::read_plan(flags.plan, flags.index);
  const sim::ClusterSpec cluster = sim::load_cluster_preset(flags.cluster);
  sim::SimulationOptions options;
  options.clock_switch_latency_s =
      flags.switch_latency_ms ? *flags.switch_latency_ms * 1e-3 : cluster.clock_switch_latency_s;
  options.jitter = flags.jitter;
  options.seed = flags.seed;
  options.plan_source = flags.index ? fmt::format("{} plans[{}]", flags.plan, *flags.index) : flags.plan;
  std::string transfers = "none (--no-p2p)";
  if (!flags.no_p2p) {
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
  }
  const sim::SimulationResult r = sim::simulate(plan, options);
  if (!flags.trace.empty()) write_file_atomic(flags.trace, sim::chrome_trace(plan, r).dump() + "\n");

  if (flags.json) {
    nlohmann::json out = {{"planned_time_s", r.planned_time_s}, {"planned_energy_j", r.planned_energy_j},
                          {"time_s", r.time_s},                 {"energy_j", r.energy_j},
                          {"energy_scope", plan.energy_scope},  {"clock_changes", r.clock_changes},
                          {"late_clock_changes", r.late_clock_changes},
                          {"transfers", r.transfers.size()},    {"transfer_bytes", options.transfer_bytes},
                          {"clock_switch_latency_s", options.clock_switch_latency_s},
                          {"jitter", options.jitter},           {"seed", options.seed},
                          {"cluster", cluster.name}};
    fmt::print("{}\n", out.dump(1));
    return 0;
  }
  fmt::print("Simulated iteration of {} ({}, {} stages, {} microbatches) on {}\n", flags.plan,
             pipeline::to_string(plan.schedule), plan.num_stages, plan.num_microbatches, cluster.display_name);
  fmt::print("Energy: {}\n", plan.energy_scope);
  fmt::print("  {:<12} {:>14} {:>14} {:>10}\n", "", "planned", "realised", "change");
  fmt::print("  {:<12} {:>14.6f} {:>14.6f} {:>10}\n", "time (s)", r.planned_time_s, r.time_s,
             signed_percent(r.time_s, r.planned_time_s));
  fmt::print("  {:<12} {:>14.2f} {:>14.2f} {:>10}\n", "energy (J)", r.planned_energy_j, r.energy_j,
             signed_percent(r.energy_j, r.planned_energy_j));
  fmt::print("P2P: {}\n", transfers);
  fmt::print("Clock changes: {} ({} still pending when their instruction started), switch latency {:.3g} ms; "
             "jitter {} (seed {})\n",
             r.clock_changes, r.late_clock_changes, options.clock_switch_latency_s * 1e3, options.jitter, options.seed);
  if (!flags.trace.empty()) fmt::print("Wrote {} (open it in Perfetto or chrome://tracing)\n", flags.trace);
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
  return [flags] { return run_simulate(*flags); };
}

}  // namespace kareus::cli
