// Pipeline schedules: the order in which each stage (one GPU) runs the instructions of the
// microbatches of one training iteration.
//
// Example:
//   PipelineSchedule s = PipelineSchedule::make(ScheduleKind::kInterleaved1F1B, /*stages=*/4,
//                                               /*microbatches=*/8, /*virtual_stages=*/2);
//   for (const Instruction& i : s.stage_order(0)) ...   // i.chunk: which of the GPU's chunks
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "kareus/schedule/instruction.hpp"

namespace kareus::schedule {

enum class ScheduleKind { k1F1B, kGPipe, kInterleaved1F1B, kZeroBubbleH1 };

// "1f1b", "gpipe", "interleaved", "zb-h1".
std::string_view to_string(ScheduleKind kind);
std::optional<ScheduleKind> parse_schedule_kind(std::string_view text);
// The names parse_schedule_kind accepts, for help texts and errors: "1f1b, gpipe, interleaved, zb-h1".
std::string_view schedule_kind_names();

// True for schedules whose backward is split into B and W instructions (ZB-H1).
bool splits_backward(ScheduleKind kind);

class PipelineSchedule {
 public:
  // 1F1B as Perseus and Merak order it: stage s runs min(S-s-1, M) warm-up forwards, then
  // alternates forward and backward, then drains the remaining backwards. GPipe: every forward,
  // then every backward, in microbatch order.
  //
  // Interleaved 1F1B (Megatron-LM's forward_backward_pipelining_with_interleaving): the model is
  // split into S·V chunks, GPU s runs chunks s, S+s, ..., (V-1)·S+s. Its k-th forward runs chunk
  // (k mod S·V) div S on microbatch (k div S·V)·S + k mod S, its k-th backward the chunks in
  // reverse; warm-up is (S-s-1)·2 + (V-1)·S forwards (all of them when M = S), then one forward
  // and one backward alternate. M must be a multiple of S, as Megatron requires.
  //
  // ZB-H1 (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024): the backward is split into
  // B (input gradient) and W (weight gradient). Stage s runs the warm-up forwards of 1F1B, then
  // s rounds of F B, then F B W while forwards remain, then B W, then the W it deferred. Without
  // the W's it is 1F1B; the deferred W's fill the cool-down bubble, and at most as many
  // microbatches are in flight as in 1F1B.
  //
  // Throws InputError when stages, microbatches or virtual stages < 1, when virtual stages are not
  // 1 for a schedule without chunks or < 2 for interleaved, or M is not a multiple of S there.
  static PipelineSchedule make(ScheduleKind kind, int num_stages, int num_microbatches,
                               int virtual_stages = 1);

  ScheduleKind kind() const { return kind_; }
  int num_stages() const { return static_cast<int>(order_.size()); }
  int num_microbatches() const { return num_microbatches_; }
  int num_chunks() const { return num_chunks_; }  // model chunks per stage (V)
  std::span<const Instruction> stage_order(int stage) const {
    return order_.at(static_cast<std::size_t>(stage));
  }
  std::size_t num_instructions() const;

 private:
  ScheduleKind kind_ = ScheduleKind::k1F1B;
  int num_microbatches_ = 0;
  int num_chunks_ = 1;
  std::vector<std::vector<Instruction>> order_;
};

}  // namespace kareus::schedule
