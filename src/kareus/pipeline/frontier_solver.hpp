// The iteration time–energy frontier of a pipeline by Phillips–Dessouky.
//
// Every instruction starts at its slowest candidate option; each step finds a minimum s–t cut of the
// critical sub-DAG (flow lower bound = model saving of lengthening an instruction one unit, upper
// bound = model cost of shortening it one unit) and shortens the makespan by exactly one time unit,
// until some critical path cannot be shortened. While the critical sub-DAG and its bounds stay the
// same the previous cut is still minimal, so it is reused without another max-flow.
//
// Each step's planned durations become plans evaluated on the true discrete options they assign:
// every instruction takes the option of least effective energy that fits its planned duration
// (and, as a second plan when it differs, the fastest option within that same time unit, which
// matters where several clocks share a unit); then instructions with slack in the real schedule
// move to slower options that still fit it (and, as a third plan, fit the planned makespan when
// that is longer than the real one, which fills the times between consecutive steps). The point's time is the critical path of the
// real option times; its energy `Σ E + P·(S·T − Σ t)`: one GPU per stage, idle time at P.
//
// Thread-safety: a FrontierSolver is single-threaded; distinct solvers are independent.
// Example:
//   FrontierSolver solver(table, schedule, {.p_blocking_w = 83.64});
//   for (auto plans = solver.next(); !plans.empty(); plans = solver.next()) use(plans);
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "kareus/core/pareto.hpp"
#include "kareus/pipeline/dag.hpp"
#include "kareus/pipeline/min_cut.hpp"
#include "kareus/pipeline/operation_cost.hpp"
#include "kareus/pipeline/option_table.hpp"
#include "kareus/pipeline/schedule.hpp"

namespace kareus::pipeline {

struct SolverOptions {
  double p_blocking_w = 0;
  double unit_time_s = 1e-3;
  CostModelKind cost_model = CostModelKind::kHull;
  // Move instructions with slack in the real schedule to slower options (never changes the time).
  bool reclaim_slack = true;
  // Once no plan is faster by a whole unit, continue in units ten times finer.
  bool refine_fast_end = true;
  // Rounds of Pareto local search over one-option moves after Phillips–Dessouky (see
  // solve_frontier); 0 keeps its plans only.
  int local_search_rounds = 2;
};

// One plan, evaluated on the true options it assigns.
struct FrontierPoint {
  double planned_time_s = 0;  // the solver's makespan
  double time_s = 0;          // true iteration time
  double energy_j = 0;        // true iteration energy, one GPU per stage
  double model_energy_j = 0;  // the cost model's energy of the planned durations
  std::vector<std::uint16_t> assignment;  // per DAG node: index into its table options

  TimeEnergy time_energy() const { return {time_s, energy_j}; }
};

struct SolverStats {
  long steps = 0;
  long cut_computations = 0;  // max-flow solves; the other steps reused the previous cut
  double initial_time_s = 0;  // planned makespan of the slowest plan
  double fastest_time_s = 0;  // true makespan with every instruction at its fastest option
  long local_search_expansions = 0;  // plans whose neighbours the local search evaluated
};

class FrontierSolver {
 public:
  // Throws InputError when the table does not cover the schedule's stages or P_blocking makes an
  // operation's every effective energy negative.
  FrontierSolver(const OptionTable& table, const PipelineSchedule& schedule, SolverOptions options);

  // The plans of the slowest makespan first, then of one unit faster per call, then the fastest
  // plan there is (every instruction at its fastest option, slack reclaimed); then empty.
  std::vector<FrontierPoint> next();

  // A plan one option away from another: `node` takes table option `option`; the plan's true time
  // and energy.
  struct Move {
    std::size_t node = 0;
    std::uint16_t option = 0;
    double time_s = 0, energy_j = 0;
  };
  // The moves from `plan` (a plan of this solver) that can pay: each instruction one candidate
  // slower, and each one that every critical path runs through one candidate faster; less those
  // whose (time, energy) `dominated` rejects.
  std::vector<Move> neighbours(const FrontierPoint& plan,
                               const std::function<bool(double time_s, double energy_j)>& dominated) const;

  const InstructionDag& dag() const { return dag_; }
  const SolverStats& stats() const { return stats_; }
  double planned_time_s() const { return static_cast<double>(makespan_) * unit_time_s_; }
  // Current planned duration of every node, in units.
  std::span<const long> durations() const { return durations_; }
  // Sum of the model costs of the current durations, in the solver's integer cost units.
  std::int64_t model_cost_units() const;

 private:
  struct Decision {
    std::vector<std::size_t> shorten, lengthen;
  };
  static constexpr int kRefineFactor = 10;
  void build_model(double unit_time_s);
  void refine();
  bool step();
  std::vector<FrontierPoint> next_plans();
  // Which option each instruction takes for its planned duration (see the class comment).
  enum class Variant { kFrugal, kTight, kFastest };
  std::vector<std::size_t> choose(Variant variant) const;
  // The plan of `chosen` options with slack reclaimed up to max(real makespan, allowed_time_s),
  // stamped with the step's model energy.
  FrontierPoint realize(std::vector<std::size_t> chosen, double allowed_time_s, double model_energy_j) const;
  // The cost model's energy of the current durations.
  double model_energy_j() const;
  // Sets the point's planned time and model energy to the current step's.
  void stamp(FrontierPoint& point, double model_energy_j) const;
  std::int64_t upper(std::size_t node) const;  // integer shortening cost; kUnbounded at min
  std::int64_t lower(std::size_t node) const;  // integer lengthening saving; 0 at max

  const OptionTable& table_;
  SolverOptions options_;
  InstructionDag dag_;
  std::vector<OperationCost> costs_;           // per (stage, type)
  std::vector<std::size_t> cost_of_;           // per node
  std::vector<std::span<const Candidate>> candidates_of_;  // per node: costs_[cost_of_[v]].options()
  std::vector<std::vector<std::int64_t>> slope_;  // per cost: round(scale·(c(lo+k) − c(lo+k+1)))
  double cost_scale_ = 1e9;                    // integer cost units per joule
  std::vector<long> durations_;
  long makespan_ = 0;
  double unit_time_s_ = 0;  // the current unit: the user's, or finer once refined
  bool started_ = false, finished_ = false, refined_ = false, force_cut_ = true;
  // The activity-on-arc form of the whole DAG, fixed once: vertex 0 = start, 1 = end, instruction
  // v is the arc 2+2v -> 3+2v; arcs: N instruction arcs, N start arcs, N end arcs, then one
  // zero-length arc per DAG edge. Each step switches on the critical ones.
  MinCutSolver cut_solver_;
  std::vector<ActiveArc> active_;       // room for every arc; a step writes its critical arcs first
  std::vector<ActiveArc> last_active_;  // the critical arcs of the last max flow
  Decision last_decision_;
  struct Realized {
    std::vector<std::size_t> chosen;  // options before slack reclamation
    FrontierPoint point;
  };
  Realized last_realized_[2];  // the last frugal and tight plans
  SolverStats stats_;
};

struct SolverProgress {
  long steps = 0;
  double planned_time_s = 0;
  const SolverStats* stats = nullptr;
  // During the local search (round >= 1): plans of this round expanded so far, of how many.
  int local_search_round = 0;
  std::size_t expanded = 0, to_expand = 0;
};

struct Frontier {
  std::vector<FrontierPoint> points;  // Pareto-optimal in true (time, energy), time ascending
  SolverStats stats;
  long total_points = 0;  // plans evaluated, before dropping dominated ones
};

// Runs the solver to the end, keeps the Pareto-optimal plans, then improves the front by
// `local_search_rounds` rounds of Pareto local search (plans found there keep the planned time
// and model energy of the step they descend from). `progress`, when set, is called about every
// 256 steps and every 64 local search expansions.
Frontier solve_frontier(const OptionTable& table, const PipelineSchedule& schedule,
                        const SolverOptions& options,
                        const std::function<void(const SolverProgress&)>& progress = {});

// True time and energy of an assignment (option index per DAG node) of `table` under `dag`.
TimeEnergy evaluate_assignment(const OptionTable& table, const InstructionDag& dag,
                               std::span<const std::uint16_t> assignment, double p_blocking_w);

// Iteration energy of one GPU per stage: Σ option energies + P·(stages·T − Σ option times).
double iteration_energy_j(double sum_energy_j, double sum_time_s, int num_stages,
                          double iteration_time_s, double p_blocking_w);

}  // namespace kareus::pipeline
