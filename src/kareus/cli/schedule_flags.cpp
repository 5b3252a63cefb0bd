#include "kareus/cli/schedule_flags.hpp"

#include <fmt/format.h>

#include "kareus/core/error.hpp"

namespace kareus::cli {

void add_schedule_flags(CLI::App& cmd, ScheduleFlags& flags, std::string_view virtual_stages_help) {
  cmd.add_option("--schedule", flags.schedule,
                 "Pipeline schedule: 1f1b, gpipe, interleaved (Megatron-LM's, with --virtual-stages) or zb-h1 "
                 "(zero bubble H1: B and W planned with clocks of their own)")
      ->capture_default_str();
  cmd.add_option("--virtual-stages", flags.virtual_stages,
                 virtual_stages_help.empty()
                     ? std::string("Model chunks per stage for --schedule interleaved (a stage's layers must divide by it)")
                     : std::string(virtual_stages_help))
      ->capture_default_str();
}

schedule::ScheduleKind schedule_kind(const ScheduleFlags& flags) {
  const auto kind = schedule::parse_schedule_kind(flags.schedule);
  if (!kind) throw InputError({"", 0, 0, "--schedule"}, fmt::format("expected one of {}", schedule::schedule_kind_names()));
  return *kind;
}

}  // namespace kareus::cli
