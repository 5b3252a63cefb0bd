// One plan of an iteration's frontier: an option per instruction of the DAG, with its true time and
// energy. Its own header so that what reads plans (the plan document, the runtime) needs no solver.
#pragma once

#include <cstdint>
#include <vector>

#include "kareus/core/pareto.hpp"

namespace kareus::pipeline {

// One plan, evaluated on the true options it assigns.
struct FrontierPoint {
  double planned_time_s = 0;  // the solver's makespan
  double time_s = 0;          // true iteration time
  double energy_j = 0;        // true iteration energy, one GPU per stage
  double model_energy_j = 0;  // the cost model's energy of the planned durations
  std::vector<std::uint16_t> assignment;  // per DAG node: index into its table options

  TimeEnergy time_energy() const { return {time_s, energy_j}; }
};

}  // namespace kareus::pipeline
