// One partition as the simulated GPU runs it: this nanobatch's compute ops in a row, the other
// nanobatch's collective beside them (launching, then moving), on one time axis; and which knob a
// plan runs a partition at, to pick what to draw.
//
// Thread-safety: pure functions.
// Example:
//   auto knob = most_used_knob(plan, "fwd_mlp");
//   std::string svg = partition_gantt_svg(partition, *knob, sim.timeline(partition, *knob));
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "kareus/evaluate/simulated.hpp"
#include "kareus/plan/plan.hpp"

namespace kareus::report {

// The knob (slot and SMs) `plan` runs partition `key` with in most instructions (a recomputed
// forward's included), at the clock it runs that knob at most often; nullopt when no instruction
// names the key.
std::optional<workload::Knob> most_used_knob(const plan::Plan& plan, std::string_view key);

std::string partition_gantt_svg(const workload::Partition& partition, const workload::Knob& knob,
                                const evaluate::Timeline& timeline);

}  // namespace kareus::report
