// The solver's time unit where the user gives none, chosen from the option table.
//
// Phillips–Dessouky walks whole units, and per unit its model keeps only the option of least
// effective energy that fits (operation_cost.hpp): where several clocks of an operation fall into
// one unit the steps jump over the plans between them. At the former fixed 1 ms, 28% of the GPT-3
// and BLOOM A100 profiles' adjacent options share a unit, and BLOOM 8 × 12's front stayed 0.12%
// above a MIP's plans even with the local search converged; at 0.2 ms (0.3–4.5% shared) it is
// within 0.03%. So the unit is refined from 1 ms along 1, 0.5, 0.2, 0.1, ... ms until at most
// kSharedLimit of adjacent options share one. Each finer unit lengthens the walk, whose steps
// each cost about a pass over the DAG, so refinement stops where the walk's estimated steps ×
// instructions would pass kWalkBudget: large pipelines (GPT-3 8 × 48 and up) keep 1 ms, and the
// speed they were measured at. Never coarser than 1 ms: tables with options far apart keep the
// unit their fronts were measured at.
// Example:
//   UnitChoice unit = choose_unit(costs, walk_length_s, dag.num_nodes());
//   build_model(unit.unit_time_s);
#pragma once

#include <cstddef>
#include <span>
#include <string>

#include "kareus/pipeline/operation_cost.hpp"

namespace kareus::pipeline {

struct UnitChoice {
  enum class Reason {
    kGiven,       // SolverOptions::unit_time_s was set
    kResolves,    // the coarsest unit at which at most kSharedLimit of adjacent options share a unit
    kWalkBudget,  // a finer unit would resolve more, but its walk would pass kWalkBudget
    kFinest,      // the finest unit of the series, still above kSharedLimit
  };
  double unit_time_s = 0;
  Reason reason = Reason::kGiven;
  double shared = 0;             // fraction of adjacent modelled options of an operation sharing a unit
  double shared_at_coarsest = 0;  // the same at 1 ms
  double walk_steps = 0;         // estimated steps at unit_time_s: walk length / unit
  double finer_unit_s = 0, finer_walk_steps = 0;  // kWalkBudget: the unit refused, its estimated steps
  std::size_t instructions = 0;
};

// The unit series, coarsest first; the first is the former fixed default.
inline constexpr double kUnitSeries[] = {1e-3, 5e-4, 2e-4, 1e-4, 5e-5, 2e-5, 1e-5};
// "Rarely": one adjacent pair in twenty. BLOOM's A100 profile shares 7.3% at 0.5 ms (0.20% above
// the MIP's plans by default) and 0.3% at 0.2 ms (0.03%); GPT-3's 7.1% and 4.5%.
inline constexpr double kSharedLimit = 0.05;
// Estimated steps × DAG instructions. A step costs about 800 instructions per DAG instruction
// (forward pass, critical sub-DAG, its plans), so 1e6 is about 0.8 G instructions, a quarter of
// what the local search's default budget (1e7 expansions × instructions, ~320 each) may spend.
// 8 stages × 12 microbatches walk ~1,800–2,400 steps × 192 at 0.2 ms (3.5–4.6e5); × 48 would walk
// ~3,760 × 768 at 0.5 ms (2.9e6), so they keep 1 ms.
inline constexpr double kWalkBudget = 1e6;

// Fraction of adjacent options (per operation, time ascending) that share a unit at `unit_time_s`,
// quantised as OperationCost does; 0 when no operation has two.
double shared_unit_fraction(std::span<const OperationCost> costs, double unit_time_s);

// The unit for `costs` (the operations the DAG runs, each with its modelled options), a walk of
// `walk_length_s` (slowest planned makespan − fastest) and `instructions` DAG nodes.
UnitChoice choose_unit(std::span<const OperationCost> costs, double walk_length_s, std::size_t instructions);

// Why, in a few words: "given", or "chosen: 4.5% of adjacent options share a unit, 28.3% at 1 ms",
// or "chosen: 28.3% ...; 0.0005 s would walk ~3758 steps x 768 instructions, past 1e+06".
std::string describe(const UnitChoice& choice);

}  // namespace kareus::pipeline
