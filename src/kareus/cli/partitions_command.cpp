// `kareus partitions`: what Kareus plans for a workload: each partition's key, its compute ops
// with FLOPs and HBM bytes, its launch slots and the collective it overlaps, then each stage's
// work outside the layers.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "kareus/cli/commands.hpp"
#include "kareus/cli/workload_flags.hpp"
#include "kareus/workload/partition.hpp"

namespace kareus::cli {
namespace {

struct PartitionsFlags {
  WorkloadFlags workload;
  bool json = false;
};

std::string collective_line(const workload::Collective& c) {
  return fmt::format(
      "{} ({} over {} {} GPUs): {:.2f} MB buffer, {:.2f} MB sent per GPU in {} ring steps", c.name,
      workload::to_string(c.kind), workload::to_string(c.group) == "tp" ? "TP" : "CP", c.ranks,
      c.bytes / 1e6, c.wire_bytes() / 1e6, c.ring_steps());
}

void print_partition(const workload::Partition& p) {
  const std::string count =
      p.per_layer ? fmt::format("x{} per layer", p.count) : "once per microbatch";
  fmt::print("\n{} ({}, {})\n", p.key, workload::to_string(p.pass), count);
  fmt::print("  {:<22} {:<12} {:>10} {:>10}  {}\n", "op", "kind", "GFLOP", "HBM MB", "slot");
  for (std::size_t i = 0; i < p.ops.size(); ++i) {
    const auto& op = p.ops[i];
    std::string slot;
    for (const auto& s : p.slots) {
      if (s.first_op == i) slot = s.name;
    }
    fmt::print("  {:<22} {:<12} {:>10.2f} {:>10.2f}  {}\n", op.name, workload::to_string(op.kind),
               op.flops / 1e9, (op.hbm_bytes + op.helper_bytes) / 1e6, slot);
  }
  fmt::print("  {:<22} {:<12} {:>10.2f} {:>10.2f}\n", "total", "", p.flops() / 1e9,
             p.hbm_bytes() / 1e6);
  fmt::print("  launch slots: {}\n", fmt::join(p.slot_names(), ", "));
  if (p.collective) {
    fmt::print("  collective (other nanobatch): {}\n", collective_line(*p.collective));
  } else {
    fmt::print("  collective: none\n");
  }
}

nlohmann::json to_json(const workload::Partition& p) {
  nlohmann::json ops = nlohmann::json::array();
  for (const auto& op : p.ops) {
    ops.push_back({{"name", op.name},
                   {"kind", workload::to_string(op.kind)},
                   {"flops", op.flops},
                   {"hbm_bytes", op.hbm_bytes}});
    if (op.helper_bytes > 0) ops.back()["helper_bytes"] = op.helper_bytes;
  }
  nlohmann::json slots = nlohmann::json::array();
  for (const auto& s : p.slots)
    slots.push_back({{"name", s.name}, {"first_op", s.first_op}, {"ops", s.op_count}});
  nlohmann::json doc = {{"key", p.key},         {"pass", workload::to_string(p.pass)},
                        {"count", p.count},     {"per_layer", p.per_layer},
                        {"ops", ops},           {"slots", slots},
                        {"collective", nullptr}};
  if (p.collective) {
    const auto& c = *p.collective;
    doc["collective"] = {{"name", c.name},
                         {"kind", workload::to_string(c.kind)},
                         {"group", workload::to_string(c.group)},
                         {"ranks", c.ranks},
                         {"bytes", c.bytes},
                         {"wire_bytes", c.wire_bytes()}};
  }
  return doc;
}

int run_partitions(const PartitionsFlags& flags) {
  const ResolvedWorkload w = resolve_workload(flags.workload);
  const auto partitions = workload::build_partitions(w.model, w.parallel);
  const auto& p = w.parallel;
  if (flags.json) {
    nlohmann::json doc = {{"workload", describe(w)},
                          {"partitions", nlohmann::json::array()},
                          {"stages", nlohmann::json::array()}};
    for (const auto& part : partitions) doc["partitions"].push_back(to_json(part));
    for (int s = 0; s < p.pp; ++s) {
      nlohmann::json stage = {{"stage", s},
                              {"layers", p.layers_per_stage[static_cast<std::size_t>(s)]},
                              {"work", nlohmann::json::array()}};
      for (const auto& extra : workload::non_partition_work(w.model, p, s))
        stage["work"].push_back(to_json(extra));
      doc["stages"].push_back(stage);
    }
    fmt::print("{}\n", doc.dump(1));
    return 0;
  }
  fmt::print("{}\n", describe(w));
  fmt::print(
      "Partitions per nanobatch ({} sequences x {} tokens{}) on one GPU's TP/CP shard; each knob "
      "is\n"
      "(SM clock, SMs for the collective, launch slot), shared by every layer of a stage.\n",
      p.nanobatch_size(), p.seq_len,
      p.cp > 1 ? fmt::format(", {} tokens per CP rank", p.seq_len / p.cp) : "");
  for (const auto& part : partitions) print_partition(part);
  for (int s = 0; s < p.pp; ++s) {
    const auto extra = workload::non_partition_work(w.model, p, s);
    fmt::print("\nStage {}: {} layers{}\n", s, p.layers_per_stage[static_cast<std::size_t>(s)],
               extra.empty() ? ", no other work" : "; not overlapped, per microbatch:");
    for (const auto& e : extra) print_partition(e);
  }
  return 0;
}

}  // namespace

Action register_partitions(CLI::App& app) {
  auto flags = std::make_shared<PartitionsFlags>();
  CLI::App* cmd = app.add_subcommand(
      "partitions", "Show a workload's partitions: ops, FLOPs, bytes, slots, collectives");
  add_workload_flags(*cmd, flags->workload);
  cmd->add_flag("--json", flags->json, "Print JSON instead of tables");
  return [flags] { return run_partitions(*flags); };
}

}  // namespace kareus::cli
