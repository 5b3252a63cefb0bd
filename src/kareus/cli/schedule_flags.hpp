// The pipeline-schedule flags of `kareus plan`, `compare` and `frontier`: --schedule NAME and
// --virtual-stages V (model chunks per stage for Megatron-LM's interleaved 1F1B). Whether V fits
// the schedule and the stages' layers is checked where the schedule is made
// (schedule::PipelineSchedule::make), so every command refuses the same values.
//
// Example:
//   add_schedule_flags(*cmd, flags->schedule);
//   ...after parsing: schedule::ScheduleKind kind = schedule_kind(flags.schedule);
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <string_view>

#include "kareus/schedule/schedule.hpp"

namespace kareus::cli {

struct ScheduleFlags {
  std::string schedule = "1f1b";
  int virtual_stages = 1;
};

// `virtual_stages_help` replaces --virtual-stages' help where a command splits stages its own way.
void add_schedule_flags(CLI::App& cmd, ScheduleFlags& flags, std::string_view virtual_stages_help = {});

// The kind --schedule names; InputError naming --schedule and the known names otherwise.
schedule::ScheduleKind schedule_kind(const ScheduleFlags& flags);

}  // namespace kareus::cli
