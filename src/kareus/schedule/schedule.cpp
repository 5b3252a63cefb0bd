#include "kareus/schedule/schedule.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "kareus/core/error.hpp"

namespace kareus::schedule {
namespace {

constexpr std::array<std::pair<ScheduleKind, std::string_view>, 4> kNames = {{
    {ScheduleKind::k1F1B, "1f1b"},
    {ScheduleKind::kGPipe, "gpipe"},
    {ScheduleKind::kInterleaved1F1B, "interleaved"},
    {ScheduleKind::kZeroBubbleH1, "zb-h1"},
}};

using Order = std::vector<Instruction>;

void one_f_one_b(Order& order, int stage, int num_stages, int num_microbatches) {
  const int warmup = std::min(num_stages - stage - 1, num_microbatches);
  int next_forward = 0, next_backward = 0;
  auto forward = [&] { order.push_back({stage, InstructionType::kForward, next_forward++}); };
  auto backward = [&] { order.push_back({stage, InstructionType::kBackward, next_backward++}); };
  while (next_forward < warmup) forward();
  while (next_forward < num_microbatches) {
    forward();
    backward();
  }
  while (next_backward < num_microbatches) backward();
}

void gpipe(Order& order, int stage, int num_microbatches) {
  for (int m = 0; m < num_microbatches; ++m) order.push_back({stage, InstructionType::kForward, m});
  for (int m = 0; m < num_microbatches; ++m) order.push_back({stage, InstructionType::kBackward, m});
}

// Megatron's order: the k-th forward (backward) of the stage, k < M·V, in groups of S·V.
void interleaved(Order& order, int stage, int num_stages, int num_microbatches, int chunks) {
  const int total = num_microbatches * chunks;
  const int group = num_stages * chunks;
  auto at = [&](int k, InstructionType type) {
    int chunk = (k % group) / num_stages;
    if (type == InstructionType::kBackward) chunk = chunks - 1 - chunk;
    order.push_back({stage, type, (k / group) * num_stages + k % num_stages, chunk});
  };
  const int warmup = num_microbatches == num_stages
                         ? total
                         : std::min((num_stages - stage - 1) * 2 + (chunks - 1) * num_stages, total);
  for (int k = 0; k < warmup; ++k) at(k, InstructionType::kForward);
  for (int k = 0; k < total - warmup; ++k) {
    at(warmup + k, InstructionType::kForward);
    at(k, InstructionType::kBackward);
  }
  for (int k = total - warmup; k < total; ++k) at(k, InstructionType::kBackward);
}

void zero_bubble_h1(Order& order, int stage, int num_stages, int num_microbatches) {
  int next_forward = 0, next_b = 0, next_w = 0;
  auto forward = [&] { order.push_back({stage, InstructionType::kForward, next_forward++}); };
  auto b = [&] {
    order.push_back({stage, InstructionType::kBackward, next_b++, 0, BackwardPart::kInputGradient});
  };
  auto w = [&] {
    order.push_back({stage, InstructionType::kBackward, next_w++, 0, BackwardPart::kWeightGradient});
  };
  const int warmup = std::min(num_stages - stage - 1, num_microbatches);
  while (next_forward < warmup) forward();
  // Stage s holds back s weight gradients: the later the stage, the longer its cool-down bubble.
  for (int k = 0; k < stage && next_forward < num_microbatches; ++k) {
    forward();
    b();
  }
  while (next_forward < num_microbatches) {
    forward();
    b();
    w();
  }
  while (next_b < num_microbatches) {
    b();
    w();
  }
  while (next_w < num_microbatches) w();
}

}  // namespace

std::string_view to_string(ScheduleKind kind) {
  for (const auto& [k, name] : kNames) {
    if (k == kind) return name;
  }
  return "?";
}

std::optional<ScheduleKind> parse_schedule_kind(std::string_view text) {
  for (const auto& [kind, name] : kNames) {
    if (name == text) return kind;
  }
  return std::nullopt;
}

std::string_view schedule_kind_names() { return "1f1b, gpipe, interleaved, zb-h1"; }

bool splits_backward(ScheduleKind kind) { return kind == ScheduleKind::kZeroBubbleH1; }

std::size_t PipelineSchedule::num_instructions() const {
  std::size_t n = 0;
  for (const Order& order : order_) n += order.size();
  return n;
}

PipelineSchedule PipelineSchedule::make(ScheduleKind kind, int num_stages, int num_microbatches,
                                        int virtual_stages) {
  if (num_stages < 1) throw InputError(fmt::format("stages must be at least 1, got {}", num_stages));
  if (num_microbatches < 1) {
    throw InputError(fmt::format("microbatches must be at least 1, got {}", num_microbatches));
  }
  if (kind == ScheduleKind::kInterleaved1F1B) {
    if (virtual_stages < 2) {
      throw InputError(fmt::format("the interleaved schedule needs at least 2 virtual stages, got {}",
                                   virtual_stages));
    }
    if (num_microbatches % num_stages != 0) {
      throw InputError(fmt::format("the interleaved schedule needs microbatches ({}) to be a multiple of "
                                   "the stages ({}), as Megatron-LM does",
                                   num_microbatches, num_stages));
    }
  } else if (virtual_stages != 1) {
    throw InputError(fmt::format("virtual stages ({}) apply to the interleaved schedule only, not {}",
                                 virtual_stages, to_string(kind)));
  }
  PipelineSchedule schedule;
  schedule.kind_ = kind;
  schedule.num_microbatches_ = num_microbatches;
  schedule.num_chunks_ = virtual_stages;
  schedule.order_.resize(static_cast<std::size_t>(num_stages));
  for (int s = 0; s < num_stages; ++s) {
    Order& order = schedule.order_[static_cast<std::size_t>(s)];
    switch (kind) {
      case ScheduleKind::k1F1B: one_f_one_b(order, s, num_stages, num_microbatches); break;
      case ScheduleKind::kGPipe: gpipe(order, s, num_microbatches); break;
      case ScheduleKind::kInterleaved1F1B:
        interleaved(order, s, num_stages, num_microbatches, virtual_stages);
        break;
      case ScheduleKind::kZeroBubbleH1: zero_bubble_h1(order, s, num_stages, num_microbatches); break;
    }
  }
  return schedule;
}

}  // namespace kareus::schedule
