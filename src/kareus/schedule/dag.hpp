// The dependency DAG of a pipeline schedule, activity on node: node k is the k-th instruction in
// stage-major order (stage 0's instructions in its run order, then stage 1's, ...). Edges: each
// instruction depends on the one before it on its stage; a forward on the forward of the same
// microbatch on the previous virtual stage (chunk c of stage s follows chunk c of stage s-1, and
// chunk c of stage 0 follows chunk c-1 of the last stage); a backward (or, split, its input
// gradient B) on the backward of the same microbatch on the next virtual stage, and the last
// virtual stage's on its own forward; a weight gradient W on its own B. Nothing waits for a W but
// its stage's next instruction. Built directly from those rules.
//
// Thread-safety: immutable after construction; share freely.
// Example:
//   InstructionDag dag(schedule);
//   auto finish = dag.earliest_finish(durations);   // longest path
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "kareus/schedule/schedule.hpp"

namespace kareus::schedule {

class InstructionDag {
 public:
  explicit InstructionDag(const PipelineSchedule& schedule);

  std::size_t num_nodes() const { return instructions_.size(); }
  std::size_t num_edges() const { return edge_to_.size(); }
  const Instruction& instruction(std::size_t node) const { return instructions_[node]; }
  std::span<const Instruction> instructions() const { return instructions_; }
  std::size_t node_of(int stage, std::size_t position) const {
    return stage_offset_[static_cast<std::size_t>(stage)] + position;
  }

  // Edge e goes edge_from(e) -> edge_to(e); successors of n are edges
  // successor_begin(n)..successor_begin(n+1), predecessors likewise through predecessor_edge().
  std::size_t edge_from(std::size_t e) const { return edge_from_[e]; }
  std::size_t edge_to(std::size_t e) const { return edge_to_[e]; }
  std::size_t successor_begin(std::size_t n) const { return succ_offset_[n]; }
  std::size_t predecessor_begin(std::size_t n) const { return pred_offset_[n]; }
  std::size_t predecessor_edge(std::size_t k) const { return pred_edges_[k]; }
  std::span<const std::size_t> topological_order() const { return topo_; }

  // Earliest finish of every node when node n takes durations[n] (longest path from the start).
  template <typename T>
  std::vector<T> earliest_finish(std::span<const T> durations) const {
    std::vector<T> finish(num_nodes());
    earliest_finish_into(durations, std::span<T>(finish));
    return finish;
  }
  // The same into `finish` (num_nodes() long), for callers that reuse their buffers.
  template <typename T>
  void earliest_finish_into(std::span<const T> durations, std::span<T> finish) const {
    for (std::size_t n : topo_) {
      T start{};
      for (std::size_t k = pred_offset_[n]; k < pred_offset_[n + 1]; ++k) start = std::max(start, finish[pred_node_[k]]);
      finish[n] = start + durations[n];
    }
  }

  // Longest path after every node's finish to the end (0 for nodes without successors); a node is
  // critical when its earliest finish plus this equals the makespan.
  template <typename T>
  std::vector<T> longest_after(std::span<const T> durations) const {
    std::vector<T> after(num_nodes());
    longest_after_into(durations, std::span<T>(after));
    return after;
  }
  template <typename T>
  void longest_after_into(std::span<const T> durations, std::span<T> after) const {
    for (auto it = topo_.rbegin(); it != topo_.rend(); ++it) {
      T longest{};
      for (std::size_t e = succ_offset_[*it]; e < succ_offset_[*it + 1]; ++e) {
        const std::size_t w = edge_to_[e];
        longest = std::max(longest, durations[w] + after[w]);
      }
      after[*it] = longest;
    }
  }

  // The latest of the earliest finishes: only nodes without successors need looking at.
  template <typename T>
  T latest_finish(std::span<const T> finish) const {
    T latest{};
    for (std::size_t n : sinks_) latest = std::max(latest, finish[n]);
    return latest;
  }

  template <typename T>
  T makespan(std::span<const T> durations) const {
    return latest_finish<T>(earliest_finish(durations));
  }

 private:
  std::vector<Instruction> instructions_;
  std::vector<std::size_t> stage_offset_;
  std::vector<std::size_t> edge_from_, edge_to_;  // sorted by source node
  std::vector<std::size_t> succ_offset_;          // CSR over edges
  std::vector<std::size_t> pred_offset_, pred_edges_;
  std::vector<std::size_t> pred_node_;  // edge_from(pred_edges_[k]), spared the indirection
  std::vector<std::size_t> topo_;
  std::vector<std::size_t> sinks_;  // nodes without successors
};

}  // namespace kareus::schedule
