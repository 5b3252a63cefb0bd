#include "kareus/workload/partition.hpp"

#include <fmt/format.h>

#include <map>

#include "kareus/core/error.hpp"

namespace kareus::workload {
namespace {

struct Segment {
  std::vector<ComputeOp> ops;
  std::optional<Collective> collective;  // the one that ends it
};

std::vector<Segment> cut_after_collectives(const std::vector<Step>& steps) {
  std::vector<Segment> segments(1);
  for (const Step& step : steps) {
    if (const auto* op = std::get_if<ComputeOp>(&step)) {
      if (segments.back().collective) segments.emplace_back();
      segments.back().ops.push_back(*op);
    } else {
      // Two collectives in a row would leave a partition with nothing to overlap; none of our
      // layers has that.
      KAREUS_CHECK(!segments.back().ops.empty() && !segments.back().collective,
                   "a layer has two collectives in a row");
      segments.back().collective = std::get<Collective>(step);
    }
  }
  return segments;
}

bool has_op(const std::vector<ComputeOp>& ops, std::string_view prefix) {
  for (const auto& op : ops) {
    if (op.name.starts_with(prefix)) return true;
  }
  return false;
}

// Segment names of the map: "attn" (QKV through the output projection), "mlp", or, when CP cuts
// the attention block, the initials of its GEMM/attention ops: "qkv", "ao", "o", "a".
std::string segment_name(const std::vector<ComputeOp>& ops) {
  const bool qkv = has_op(ops, "qkv"), fc = has_op(ops, "fc"),
             attention = has_op(ops, "flash_attention");
  if (qkv && fc) return "layer";
  if (fc) return "mlp";
  if (qkv && attention) return "attn";
  std::string name;
  for (const auto& op : ops) {
    if (op.name.starts_with("qkv")) name += "qkv";
    if (op.name.starts_with("flash_attention")) name += "a";
    if (op.name.starts_with("out_proj")) name += "o";
  }
  return name.empty() ? "misc" : name;
}

bool same_collective(const std::optional<Collective>& a, const std::optional<Collective>& b) {
  if (!a || !b) return !a && !b;
  return a->kind == b->kind && a->group == b->group && a->ranks == b->ranks && a->bytes == b->bytes;
}

void partitions_of(const std::vector<Step>& steps, Pass pass, std::vector<Partition>& out) {
  const std::vector<Segment> segments = cut_after_collectives(steps);
  const std::string prefix = pass == Pass::kForward ? "fwd_" : "bwd_";
  for (std::size_t i = 0; i < segments.size(); ++i) {
    const Segment& seg = segments[i];
    // The steady state of a stage: NB0 overlaps NB1's collective that ended the previous segment
    // (cyclically, the previous layer's last one); NB1 overlaps NB0's collective of this segment.
    const auto& previous = segments[(i + segments.size() - 1) % segments.size()].collective;
    const std::string name = prefix + segment_name(seg.ops);
    const std::vector<LaunchSlot> slots = launch_slots(seg.ops);
    auto make = [&](const std::optional<Collective>& collective, std::string key, int count) {
      Partition p;
      p.key = std::move(key);
      p.pass = pass;
      p.ops = seg.ops;
      p.collective = collective;
      if (collective) p.slots = slots;
      p.count = count;
      p.per_layer = true;
      return p;
    };
    if (same_collective(previous, seg.collective)) {
      out.push_back(make(seg.collective, name, 2));
    } else {
      out.push_back(make(previous, name + "_" + std::string(short_name(previous->kind)), 1));
      out.push_back(
          make(seg.collective, name + "_" + std::string(short_name(seg.collective->kind)), 1));
    }
  }
}

}  // namespace

const LaunchSlot* Partition::find_slot(std::string_view name) const {
  for (const auto& slot : slots) {
    if (slot.name == name) return &slot;
  }
  return nullptr;
}

std::vector<std::string> Partition::slot_names() const {
  std::vector<std::string> names;
  for (const auto& slot : slots) names.push_back(slot.name);
  names.emplace_back(kSequentialSlot);
  return names;
}

double Partition::flops() const {
  double total = 0;
  for (const auto& op : ops) total += op.flops;
  return total;
}

double Partition::hbm_bytes() const {
  double total = 0;
  for (const auto& op : ops) total += op.hbm_bytes + op.helper_bytes;
  return total;
}

std::vector<LaunchSlot> launch_slots(const std::vector<ComputeOp>& ops) {
  std::vector<LaunchSlot> slots;
  std::map<std::string_view, int> used;  // per family
  for (std::size_t i = 0; i < ops.size(); ++i) {
    // A memory-bound op joins the slot of the op before when both are of one family, as the Kareus
    // artifact groups them (interop/artifact_format.hpp), so that slot names mean the same launch point.
    const bool memory = is_memory_bound(ops[i].kind);
    const std::string_view family = slot_family(ops[i].kind);
    if (memory && !slots.empty() && slots.back().memory_bound && slot_family(ops[i - 1].kind) == family) {
      ++slots.back().op_count;
      continue;
    }
    slots.push_back({fmt::format("{}_{}", family, used[family]++), i, 1, memory});
  }
  return slots;
}

std::vector<Partition> build_partitions(const ModelSpec& model, const ParallelConfig& parallel) {
  const LayerOps layer = layer_ops(model, parallel);
  std::vector<Partition> partitions;
  partitions_of(layer.forward, Pass::kForward, partitions);
  partitions_of(layer.backward, Pass::kBackward, partitions);
  for (std::size_t i = 0; i < partitions.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      KAREUS_CHECK(partitions[i].key != partitions[j].key,
                   "two partitions got key " + partitions[i].key);
    }
  }
  return partitions;
}

std::vector<Partition> non_partition_work(const ModelSpec& model, const ParallelConfig& p,
                                          int stage) {
  KAREUS_CHECK(stage >= 0 && stage < p.pp, "stage outside the pipeline");
  constexpr double e = kBytesPerElement;
  const double t = static_cast<double>(p.microbatch_size) * p.seq_len / p.cp;  // whole microbatch
  const double h = static_cast<double>(model.hidden_size);
  const double v = static_cast<double>(model.vocab_size) / p.tp;  // vocab-parallel shard
  auto work = [](std::string key, Pass pass, std::vector<ComputeOp> ops,
                 std::optional<Collective> c) {
    Partition w;
    w.key = std::move(key);
    w.pass = pass;
    w.ops = std::move(ops);
    w.collective = std::move(c);
    w.count = 1;
    w.per_layer = false;
    return w;
  };
  auto tp_all_reduce = [&](std::string name, double bytes) -> std::optional<Collective> {
    if (p.tp == 1) return std::nullopt;
    return Collective{std::move(name), CollectiveKind::kAllReduce, ParallelGroup::kTensor, p.tp,
                      bytes};
  };
  std::vector<Partition> out;
  if (stage == 0) {
    // Vocab-parallel embedding: each TP rank looks up the tokens of its vocabulary shard and an
    // all-reduce sums the partial results.
    out.push_back(
        work("embedding_fwd", Pass::kForward,
             {{"embedding_lookup", OpKind::kElementwise, Pass::kForward, 0, e * 2 * t * h}},
             tp_all_reduce("embedding_all_reduce", e * t * h)));
    // Scatter-add of the output gradient into fp32 main grads (read-modify-write 4-byte rows).
    out.push_back(work(
        "embedding_bwd", Pass::kBackward,
        {{"embedding_grad", OpKind::kElementwise, Pass::kBackward, t * h, e * t * h + 8 * t * h}},
        std::nullopt));
  }
  if (stage == p.pp - 1) {
    // Vocab-parallel cross-entropy all-reduces per-token max, sum of exponentials and target logit
    // (fp32); the loss is computed in place over the logits shard.
    out.push_back(work(
        "head_fwd", Pass::kForward,
        {{"final_norm", OpKind::kNorm, Pass::kForward, 4 * t * h, e * (2 * t * h + h), e * h},
         {"lm_head", OpKind::kGemm, Pass::kForward, 2 * t * h * v, e * (t * h + h * v + t * v), e * h * v, t, v, h},
         {"cross_entropy", OpKind::kElementwise, Pass::kForward, 5 * t * v, e * 2 * t * v}},
        tp_all_reduce("cross_entropy_all_reduce", 3 * 4 * t)));
    // The LM head is column-parallel: its input gradient is all-reduced over TP.
    out.push_back(work(
        "head_bwd", Pass::kBackward,
        {{"cross_entropy_bwd", OpKind::kElementwise, Pass::kBackward, 2 * t * v, e * 2 * t * v},
         {"lm_head_bwd", OpKind::kGemm, Pass::kBackward, 4 * t * h * v,
          e * (2 * t * v + 2 * t * h + h * v) + 8 * h * v, e * h * v + 8 * h * v, t, v, h},
         {"final_norm_bwd", OpKind::kNorm, Pass::kBackward, 8 * t * h, e * (3 * t * h + h), e * h}},
        tp_all_reduce("lm_head_grad_all_reduce", e * t * h)));
  }
  return out;
}

Partition unsplit(const Partition& partition) {
  Partition whole = partition;
  if (!partition.per_layer) return whole;
  for (ComputeOp& op : whole.ops) op = scaled_tokens(op, 2);
  if (whole.collective) whole.collective->bytes *= 2;
  return whole;
}

const Partition& find_partition(const std::vector<Partition>& partitions, std::string_view key) {
  std::vector<std::string> keys;
  for (const auto& p : partitions) {
    if (p.key == key) return p;
    keys.push_back(p.key);
  }
  throw InputError(
      {"", 0, 0, "--partition"},
      fmt::format("unknown partition '{}'; this workload has: {}", key, fmt::join(keys, ", ")));
}

nlohmann::json cost_identity(const ModelSpec& model, const ParallelConfig& parallel, const std::string& gpu_name) {
  nlohmann::json id = {{"model", model.name},        {"gpu", gpu_name},
                       {"tp", parallel.tp},          {"cp", parallel.cp},
                       {"mbs", parallel.microbatch_size}, {"seq_len", parallel.seq_len}};
  // Only when set, so that journals written before the setting existed still resume.
  if (parallel.hidden_dropout > 0) id["hidden_dropout"] = parallel.hidden_dropout;
  return id;
}

}  // namespace kareus::workload
