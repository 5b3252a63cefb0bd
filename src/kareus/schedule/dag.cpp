#include "kareus/schedule/dag.hpp"

#include <algorithm>

#include "kareus/core/error.hpp"

namespace kareus::schedule {

InstructionDag::InstructionDag(const PipelineSchedule& schedule) {
  const int num_stages = schedule.num_stages();
  const int chunks = schedule.num_chunks();
  const auto num_microbatches = static_cast<std::size_t>(schedule.num_microbatches());
  // Node of (stage, chunk, pass, microbatch); pass 0 forward, 1 backward or B, 2 W.
  constexpr std::size_t kNone = static_cast<std::size_t>(-1);
  std::vector<std::size_t> index(static_cast<std::size_t>(num_stages * chunks) * 3 * num_microbatches, kNone);
  auto pass_of = [](const Instruction& ins) -> std::size_t {
    if (ins.type == InstructionType::kForward) return 0;
    return ins.part == BackwardPart::kWeightGradient ? 2 : 1;
  };
  auto node_at = [&](int stage, int chunk, std::size_t pass, int microbatch) -> std::size_t& {
    return index[((static_cast<std::size_t>(stage * chunks + chunk)) * 3 + pass) * num_microbatches +
                 static_cast<std::size_t>(microbatch)];
  };
  for (int s = 0; s < num_stages; ++s) {
    stage_offset_.push_back(instructions_.size());
    for (const Instruction& ins : schedule.stage_order(s)) {
      KAREUS_CHECK(ins.stage == s && ins.chunk >= 0 && ins.chunk < chunks && ins.microbatch >= 0 &&
                       static_cast<std::size_t>(ins.microbatch) < num_microbatches,
                   "a schedule's instruction is outside its stages, chunks or microbatches");
      std::size_t& slot = node_at(s, ins.chunk, pass_of(ins), ins.microbatch);
      KAREUS_CHECK(slot == kNone, "a schedule runs an instruction twice");
      slot = instructions_.size();
      instructions_.push_back(ins);
    }
  }

  std::vector<std::pair<std::size_t, std::size_t>> edges;
  auto depend = [&](std::size_t from, std::size_t to) {
    KAREUS_CHECK(from != kNone, "a schedule lacks an instruction another depends on");
    edges.emplace_back(from, to);
  };
  for (int s = 0; s < num_stages; ++s) {
    std::size_t first = stage_offset_[static_cast<std::size_t>(s)];
    std::size_t count = schedule.stage_order(s).size();
    for (std::size_t k = 1; k < count; ++k) edges.emplace_back(first + k - 1, first + k);
  }
  for (std::size_t v = 0; v < instructions_.size(); ++v) {
    const Instruction& ins = instructions_[v];
    const int s = ins.stage, c = ins.chunk, m = ins.microbatch;
    switch (pass_of(ins)) {
      case 0:
        if (s > 0) depend(node_at(s - 1, c, 0, m), v);
        else if (c > 0) depend(node_at(num_stages - 1, c - 1, 0, m), v);
        break;
      case 1:
        if (s + 1 < num_stages) depend(node_at(s + 1, c, 1, m), v);
        else if (c + 1 < chunks) depend(node_at(0, c + 1, 1, m), v);
        else depend(node_at(s, c, 0, m), v);
        break;
      default: depend(node_at(s, c, 1, m), v); break;
    }
  }
  std::sort(edges.begin(), edges.end());
  edges.erase(std::unique(edges.begin(), edges.end()), edges.end());

  const std::size_t n = instructions_.size();
  succ_offset_.assign(n + 1, 0);
  pred_offset_.assign(n + 1, 0);
  for (auto [from, to] : edges) {
    edge_from_.push_back(from);
    edge_to_.push_back(to);
    ++succ_offset_[from + 1];
    ++pred_offset_[to + 1];
  }
  for (std::size_t i = 0; i < n; ++i) {
    succ_offset_[i + 1] += succ_offset_[i];
    pred_offset_[i + 1] += pred_offset_[i];
  }
  pred_edges_.resize(edges.size());
  std::vector<std::size_t> fill(pred_offset_.begin(), pred_offset_.end() - 1);
  for (std::size_t e = 0; e < edges.size(); ++e) pred_edges_[fill[edge_to_[e]]++] = e;
  for (std::size_t e : pred_edges_) pred_node_.push_back(edge_from_[e]);

  // Kahn's algorithm; a cycle would mean the schedule deadlocks, which the builders never produce.
  std::vector<std::size_t> in_degree(n);
  for (std::size_t i = 0; i < n; ++i) in_degree[i] = pred_offset_[i + 1] - pred_offset_[i];
  std::vector<std::size_t> ready;
  for (std::size_t i = n; i-- > 0;) {
    if (in_degree[i] == 0) ready.push_back(i);
  }
  while (!ready.empty()) {
    std::size_t node = ready.back();
    ready.pop_back();
    topo_.push_back(node);
    for (std::size_t e = succ_offset_[node]; e < succ_offset_[node + 1]; ++e) {
      if (--in_degree[edge_to_[e]] == 0) ready.push_back(edge_to_[e]);
    }
  }
  KAREUS_CHECK(topo_.size() == n, "the pipeline schedule's dependency graph has a cycle");
  for (std::size_t i = 0; i < n; ++i) {
    if (succ_offset_[i] == succ_offset_[i + 1]) sinks_.push_back(i);
  }
}

}  // namespace kareus::schedule
