#include "kareus/pipeline/dag.hpp"

#include <algorithm>

#include "kareus/core/error.hpp"

namespace kareus::pipeline {

InstructionDag::InstructionDag(const PipelineSchedule& schedule) {
  const int num_stages = schedule.num_stages();
  const int num_microbatches = schedule.num_microbatches();
  // node_index[stage][type][microbatch]
  std::vector<std::vector<std::size_t>> index(static_cast<std::size_t>(num_stages) * 2,
                                              std::vector<std::size_t>(num_microbatches));
  auto slot = [&](int stage, InstructionType type) -> std::vector<std::size_t>& {
    return index[static_cast<std::size_t>(stage) * 2 + static_cast<std::size_t>(type)];
  };
  for (int s = 0; s < num_stages; ++s) {
    stage_offset_.push_back(instructions_.size());
    for (const Instruction& ins : schedule.stage_order(s)) {
      slot(s, ins.type)[static_cast<std::size_t>(ins.microbatch)] = instructions_.size();
      instructions_.push_back(ins);
    }
  }

  std::vector<std::pair<std::size_t, std::size_t>> edges;
  for (int s = 0; s < num_stages; ++s) {
    std::size_t first = stage_offset_[static_cast<std::size_t>(s)];
    std::size_t count = schedule.stage_order(s).size();
    for (std::size_t k = 1; k < count; ++k) edges.emplace_back(first + k - 1, first + k);
    for (int m = 0; m < num_microbatches; ++m) {
      auto mb = static_cast<std::size_t>(m);
      if (s > 0) edges.emplace_back(slot(s - 1, InstructionType::kForward)[mb], slot(s, InstructionType::kForward)[mb]);
      if (s + 1 < num_stages) {
        edges.emplace_back(slot(s + 1, InstructionType::kBackward)[mb], slot(s, InstructionType::kBackward)[mb]);
      } else {
        edges.emplace_back(slot(s, InstructionType::kForward)[mb], slot(s, InstructionType::kBackward)[mb]);
      }
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

}  // namespace kareus::pipeline
