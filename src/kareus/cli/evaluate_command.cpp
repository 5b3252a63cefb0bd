// `kareus evaluate`: what one knob of one partition costs, with the timeline behind it when the
// evaluator is the simulated GPU.
#include <fmt/format.h>

#include <optional>

#include "kareus/cli/commands.hpp"
#include "kareus/cli/evaluator_flags.hpp"
#include "kareus/cli/workload_flags.hpp"
#include "kareus/core/error.hpp"
#include "kareus/evaluate/simulated.hpp"
#include "kareus/search/knob_space.hpp"
#include "kareus/workload/partition.hpp"

namespace kareus::cli {
namespace {

struct EvaluateFlags {
  WorkloadFlags workload;
  std::string partition;
  std::optional<double> freq_mhz;
  std::optional<int> sms;
  std::string slot{workload::kSequentialSlot};
  std::string evaluator = "sim";
};

void print_timeline(const evaluate::Timeline& t, const workload::Partition& p, int sms) {
  fmt::print(
      "\nTimeline (the collective holds {} SMs while it runs; HBM share < 1 = contention):\n", sms);
  fmt::print("  {:>9} {:>9}  {:<22} {:<11} {:>9} {:>9} {:>8}\n", "start ms", "end ms", "compute",
             "collective", "HBM share", "HBM GB/s", "power W");
  for (const auto& ph : t.phases) {
    fmt::print("  {:>9.4f} {:>9.4f}  {:<22} {:<11} {:>9.2f} {:>9.0f} {:>8.1f}\n", ph.start_s * 1e3,
               ph.end_s * 1e3, ph.op >= 0 ? p.ops[static_cast<std::size_t>(ph.op)].name : "-",
               ph.collective ? (ph.link_bytes_per_s > 0 ? "moving" : "launching") : "-",
               ph.hbm_share, ph.hbm_bytes_per_s / 1e9, ph.power_w);
  }
  fmt::print("  compute ends at {:.4f} ms", t.compute_end_s * 1e3);
  if (p.collective) {
    fmt::print("; collective {:.4f}-{:.4f} ms", t.collective_start_s * 1e3,
               t.collective_end_s * 1e3);
  }
  fmt::print("\n");
}

int run_evaluate(const EvaluateFlags& flags) {
  const ResolvedWorkload w = resolve_workload(flags.workload);
  auto partitions = workload::build_partitions(w.model, w.parallel);
  for (int s = 0; s < w.parallel.pp; ++s) {
    for (auto& extra : workload::non_partition_work(w.model, w.parallel, s)) {
      bool seen = false;
      for (const auto& p : partitions) seen = seen || p.key == extra.key;
      if (!seen) partitions.push_back(std::move(extra));
    }
  }
  const workload::Partition& partition = workload::find_partition(partitions, flags.partition);
  const workload::Knob knob{flags.freq_mhz.value_or(w.gpu.max_clock_mhz),
                            flags.sms.value_or(partition.collective ? search::kDefaultNanobatchingSms : 0), flags.slot};

  // A table file without a partition column holds the partition asked for.
  const evaluate::Evaluator evaluator = make_evaluator(flags.evaluator, w.gpu, {}, flags.partition);
  const auto* sim = dynamic_cast<const evaluate::SimulatedEvaluator*>(&evaluator.impl());
  const evaluate::EvalResult r = evaluator.evaluate(partition, knob);
  if (!r.ok()) throw InputError(fmt::format("{}: {}", evaluate::to_string(r.status), r.message));

  const bool model = evaluator.provenance() == evaluate::Provenance::kModel;
  fmt::print("{}\n", describe(w));
  fmt::print("{} at {} MHz, {} SMs for the collective, slot {}{}\n", partition.key, knob.freq_mhz,
             knob.sms, knob.slot,
             knob.sequential() && partition.collective
                 ? " (sequential: collective after the compute)"
                 : "");
  fmt::print("Evaluator: {} ({})\n", evaluator.name(),
             model ? "the simulated GPU model: a model, not a measurement" : "measured samples");
  const double static_j = w.gpu.static_power_w * r.time_s;
  fmt::print("  time            {:10.4f} ms\n", r.time_s * 1e3);
  fmt::print("  energy          {:10.4f} J per GPU (one of {} GPUs)\n", r.energy_j,
             w.parallel.gpus());
  fmt::print("    dynamic       {:10.4f} J (energy - static: the work's effective energy)\n",
             r.energy_j - static_j);
  fmt::print("    static        {:10.4f} J ({} W x time)\n", static_j, w.gpu.static_power_w);
  fmt::print("  average power   {:10.1f} W\n", r.energy_j / r.time_s);
  // The host's side of the same run: what issuing it costs the framework's one host thread.
  const double host_s = engine::host_time_s(w.engine, partition, knob);
  const double exposed_s = engine::exposed_host_time_s(w.engine, partition, engine::path_of(knob));
  const double loop_exposed_s = engine::exposed_host_time_s(w.engine, partition, engine::IssuePath::kLoop);
  if (exposed_s > 0) {
    const bool loop = engine::path_of(knob) == engine::IssuePath::kLoop && partition.collective;
    fmt::print("  host issue      {:10.4f} ms under engine {} (it waits for the GPU at each op of {}: the "
               "partition runs {:.4f} ms, the GPU idle for the host's share)\n",
               host_s * 1e3, w.engine.name, loop ? "this loop" : "the un-split modules", (r.time_s + exposed_s) * 1e3);
  } else if (loop_exposed_s > 0) {
    fmt::print("  host issue      {:10.4f} ms under engine {} (un-split; in an instruction that overlaps another "
               "partition it runs the nanobatched loop, which waits for the GPU at each op: {:.4f} ms more)\n",
               host_s * 1e3, w.engine.name, loop_exposed_s * 1e3);
  } else {
    fmt::print("  host issue      {:10.4f} ms under engine {} ({})\n", host_s * 1e3, w.engine.name,
               host_s > r.time_s ? "host-bound: the GPU waits for the host unless earlier work left it a lead"
                                 : "the GPU's time covers it");
  }
  if (sim) print_timeline(sim->timeline(partition, knob), partition, knob.sms);
  return 0;
}

}  // namespace

Action register_evaluate(CLI::App& app) {
  auto flags = std::make_shared<EvaluateFlags>();
  CLI::App* cmd = app.add_subcommand("evaluate", "Time and energy of one partition under one knob");
  add_workload_flags(*cmd, flags->workload);
  add_engine_flag(*cmd, flags->workload.engine);
  cmd->add_option("--partition", flags->partition, "Partition key (see kareus partitions)")
      ->required();
  cmd->add_option("--freq", flags->freq_mhz, "SM clock in MHz (default: the GPU's highest)");
  cmd->add_option(
      "--sms", flags->sms,
      fmt::format("SMs for the collective, 1..SMs-1 (default {}, NCCL's channel count; 0 without a collective)",
                  search::kDefaultNanobatchingSms));
  cmd->add_option("--slot", flags->slot, "Launch slot, or none for the sequential schedule")
      ->capture_default_str();
  cmd->add_option("--evaluator", flags->evaluator,
                  "sim (the simulated GPU), table:FILE (measured samples) or artifact:DIR (the Kareus artifact's "
                  "profiling tree)")
      ->capture_default_str();
  return [flags] { return run_evaluate(*flags); };
}

}  // namespace kareus::cli
