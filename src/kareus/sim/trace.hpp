// A simulated iteration as a Chrome / Perfetto trace (the JSON "Trace Event Format"): one process
// per GPU (pipeline stage) with its instructions on one track and its P2P sends on another, a
// power counter track per GPU, and instructions named after their clock so that Perfetto gives
// each clock its own colour (chrome://tracing reads the `cname` set from the clock too).
//
// Thread-safety: a pure function.
// Example:
//   write_file_atomic("trace.json", chrome_trace(plan, simulate(plan, {})).dump());
#pragma once

#include <nlohmann/json.hpp>

#include "kareus/plan/plan.hpp"
#include "kareus/sim/simulator.hpp"

namespace kareus::sim {

nlohmann::json chrome_trace(const plan::Plan& plan, const SimulationResult& result);

}  // namespace kareus::sim
