#include "kareus/pipeline/schedule.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "kareus/core/error.hpp"

namespace kareus::pipeline {

std::string_view to_string(ScheduleKind kind) {
  return kind == ScheduleKind::k1F1B ? "1f1b" : "gpipe";
}

std::optional<ScheduleKind> parse_schedule_kind(std::string_view text) {
  if (text == "1f1b") return ScheduleKind::k1F1B;
  if (text == "gpipe") return ScheduleKind::kGPipe;
  return std::nullopt;
}

PipelineSchedule PipelineSchedule::make(ScheduleKind kind, int num_stages, int num_microbatches) {
  if (num_stages < 1) throw InputError(fmt::format("stages must be at least 1, got {}", num_stages));
  if (num_microbatches < 1) {
    throw InputError(fmt::format("microbatches must be at least 1, got {}", num_microbatches));
  }
  PipelineSchedule schedule;
  schedule.kind_ = kind;
  schedule.num_microbatches_ = num_microbatches;
  schedule.order_.resize(static_cast<std::size_t>(num_stages));
  for (int s = 0; s < num_stages; ++s) {
    auto& order = schedule.order_[static_cast<std::size_t>(s)];
    auto forward = [&](int m) { order.push_back({s, InstructionType::kForward, m}); };
    auto backward = [&](int m) { order.push_back({s, InstructionType::kBackward, m}); };
    if (kind == ScheduleKind::kGPipe) {
      for (int m = 0; m < num_microbatches; ++m) forward(m);
      for (int m = 0; m < num_microbatches; ++m) backward(m);
      continue;
    }
    const int warmup = std::min(num_stages - s - 1, num_microbatches);
    int next_forward = 0, next_backward = 0;
    for (; next_forward < warmup; ++next_forward) forward(next_forward);
    while (next_forward < num_microbatches) {
      forward(next_forward++);
      backward(next_backward++);
    }
    while (next_backward < num_microbatches) backward(next_backward++);
  }
  return schedule;
}

}  // namespace kareus::pipeline
