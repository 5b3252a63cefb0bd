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
// The parts live in one file each: phillips_dessouky.cpp (the cost models and steps),
// plan_realization.cpp (plans on the true options, slack reclamation, the fastest plan's fit),
// local_search.hpp with plan_moves.cpp (a plan's moves) and local_search.cpp (the rounds),
// plan_front.hpp (the Pareto set of plans), solve_frontier.cpp (solve_frontier: those on threads),
// unit_choice.cpp (the unit where the options do not give one).
//
// Thread-safety: a FrontierSolver is single-threaded, with two exceptions: evaluate() may run on a
// second thread while advance() runs (that is how solve_frontier turns steps into plans on one core
// while the next steps run on another), and dag(), candidates(), candidate_index(), options() and
// num_stages() (what the local search reads) on any threads at any time. Distinct solvers are
// independent.
// Example:
//   FrontierSolver solver(table, schedule, {.p_blocking_w = 83.64});
//   for (auto plans = solver.next(); !plans.empty(); plans = solver.next()) use(plans);
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "kareus/core/pareto.hpp"
#include "kareus/schedule/dag.hpp"
#include "kareus/pipeline/frontier_point.hpp"
#include "kareus/pipeline/min_cut.hpp"
#include "kareus/pipeline/operation_cost.hpp"
#include "kareus/pipeline/option_table.hpp"
#include "kareus/pipeline/relaxation_bound.hpp"
#include "kareus/schedule/schedule.hpp"
#include "kareus/pipeline/unit_choice.hpp"

namespace kareus::pipeline {

struct SolverOptions {
  double p_blocking_w = 0;
  // Unset: chosen from the option table (unit_choice.hpp), 1 ms or finer; SolverStats::unit says
  // which and why.
  std::optional<double> unit_time_s = std::nullopt;
  CostModelKind cost_model = CostModelKind::kHull;
  // Move instructions with slack in the real schedule to slower options (never changes the time).
  bool reclaim_slack = true;
  // Once no plan is faster by a whole unit, continue in units five times finer.
  bool refine_fast_end = true;
  // Pareto local search over one-option moves after Phillips–Dessouky (see solve_frontier): it runs
  // until no plan of the front has a move that enters the front, or this many rounds are spent, or
  // the next round would take its expansions times the DAG's instructions past the budget
  // (SolverStats says which). 0 rounds keeps Phillips–Dessouky's plans only. The default budget
  // lets small pipelines (the default job's 32 instructions) converge and stops GPT-3 at 8 × 12
  // (192 instructions, at its 0.2 ms unit) after 13 rounds of the 180 it needs (with the cut
  // and wide moves), at 8 × 48 (768, 1 ms) after 2.
  int local_search_rounds = 1000;
  double local_search_budget = 1e7;
  // Once one-option moves converge, the local search goes on with the cut move too (see
  // local_search.hpp) until no plan has either that enters the front.
  bool cut_moves = true;
  // Once those converge too, it goes on with wide moves (local_search.hpp): each instruction up to
  // this many candidates either way, until no plan has one that enters the front; 0 leaves them
  // out. Sixteen: on the composed table of llama3.2-3b-tp8-mbs8-seq4096, 8 left it 0.091% above
  // HiGHS's plans, 12, 16 and 24 0.047% (bench/results/frontier_mip.md).
  std::size_t wide_move_reach = 16;
  // The relaxation's bound (relaxation_bound.hpp), computed beside the steps and the search, and
  // its optimum where each two of its lines meet rounded to a plan, offered to the front after the
  // local search: near the fastest plans,
  // where the budget leaves the search furthest from the exact front, they beat it (a PP 8 × 64
  // table's fastest plan by 1.2%). Frontier::bound keeps the bound. Off by default in the solver:
  // the bound costs several times the budgeted solve on long pipelines (the solve with them takes
  // 1.3–1.7× as long on GPT-3 and BLOOM, 5× on kareus plan's PP 8 and 16 tables); the planner turns
  // it on (planner.hpp). Not with 0 rounds.
  bool relaxation_plans = false;
  // The relaxation's bound in Frontier::bound without its plans (a certificate): it depends on the
  // table alone and is computed beside the steps and the search, as with them.
  bool bound = false;
};

struct SolverStats {
  UnitChoice unit;  // the time unit the steps walked (before the fast end's finer one), and why
  long steps = 0;
  long cut_computations = 0;  // max-flow solves; the other steps reused the previous cut
  double initial_time_s = 0;  // planned makespan of the slowest plan
  double fastest_time_s = 0;  // true makespan with every instruction at its fastest option
  long local_search_expansions = 0;  // plans whose neighbours the local search evaluated
  int local_search_rounds = 2;        // rounds run
  bool local_search_converged = false;  // no plan of the front has a move that enters it
  long wide_move_expansions = 0;        // of the expansions, those with wide moves
};

// The activity-on-arc flow topology of `dag`: vertex 0 the start, 1 the end, instruction v the arc
// 2+2v -> 3+2v; arcs: the N instruction arcs (arc v), N start arcs 0 -> 2+2v (N + v), N end arcs
// 3+2v -> 1 (2N + v), then one zero-length arc per DAG edge e (3N + e). Phillips–Dessouky's steps
// and the local search's cut move switch on the critical ones.
MinCutSolver activity_flow_topology(const schedule::InstructionDag& dag);

class FrontierSolver {
  struct Model;

 public:
  // Throws InputError when the table does not cover the schedule's stages or P_blocking makes an
  // operation's every effective energy negative.
  FrontierSolver(const OptionTable& table, const schedule::PipelineSchedule& schedule, SolverOptions options);

  // The plans of the slowest makespan first, then of one unit faster per call, then the fastest
  // plans there are (every instruction at its fastest option, slack reclaimed; and the last step's
  // plans fitted to that time, see fitted); then empty.
  // Equivalent to evaluate(*advance()) until advance() ends.
  std::vector<FrontierPoint> next();

  // One step's planned durations, before they are turned into plans: in full for the first step
  // of a model (and the closing one), else as the change from the step before.
  struct PlannedStep {
    std::vector<long> durations;  // per node, in the step's unit; empty for a change
    std::vector<std::size_t> shortened, lengthened;  // a change: nodes one unit shorter, longer
    long makespan = 0;            // in the step's unit
    bool fastest = false;         // the closing plan: every instruction at its fastest option
    const Model* model = nullptr;  // the step's cost model (its unit, options and costs)
  };
  // Runs the next Phillips–Dessouky step (the first call: none, the slowest plan); nullopt after
  // the closing plan.
  std::optional<PlannedStep> advance();
  // The plans of a step. Steps must be evaluated in the order advance() returned them: most are a
  // change from the step before, and a plan equal to the last one is restamped, not evaluated again.
  std::vector<FrontierPoint> evaluate(const PlannedStep& step);

  // Every node's candidates (the same in every model) and the index among them of table option
  // `option` of node `node`: what the local search (local_search.hpp) moves between.
  std::span<const std::span<const Candidate>> candidates() const { return first_model_->candidates_of; }
  std::size_t candidate_index(std::size_t node, std::size_t option) const {
    return node_cost_[node]->candidate_of(option);
  }
  // Per node, per candidate k: the least, over candidates k and slower, of effective energy plus
  // every stage's idle power (P_blocking times the stages) times the candidate's time. A plan with
  // the node at any of them pays at least that for it and the time it spans: the local search's
  // bound on slower moves.
  std::span<const std::span<const double>> least_energy_from() const { return least_energy_from_of_; }
  const SolverOptions& options() const { return options_; }
  int num_stages() const { return table_.num_stages(); }

  // The relaxation's optimum rounded to a plan (relaxation_bound.hpp): each node at its candidate
  // of least effective energy no slower than durations[node], slack reclaimed. No slower than the
  // relaxation's makespan; above its energy only by what each node loses to the options beside its
  // duration, and what the reclaim wins back. Safe to call while the steps run.
  FrontierPoint relaxation_plan(std::span<const double> durations) const;

  const schedule::InstructionDag& dag() const { return dag_; }
  const SolverStats& stats() const { return stats_; }
  double planned_time_s() const { return static_cast<double>(makespan_) * model().unit_time_s; }
  // Current planned duration of every node, in units.
  std::span<const long> durations() const { return durations_; }
  // Sum of the model costs of the current durations, in the solver's integer cost units.
  std::int64_t model_cost_units() const;

 private:
  struct Decision {
    std::vector<std::size_t> shorten, lengthen;
  };
  // The cost model in one time unit: the user's, or the finer one once refined.
  struct Model {
    double unit_time_s = 0;
    double cost_scale = 1e9;                    // integer cost units per joule
    std::vector<OperationCost> costs;           // per (stage, slot) the DAG runs
    std::vector<std::vector<std::int64_t>> slope;  // per cost: round(scale·(c(lo+k) − c(lo+k+1)))
    std::vector<std::span<const Candidate>> candidates_of;  // per node: costs[cost_of_[v]].options()
  };
  // Five, not ten: on GPT-3 and BLOOM at M = 96 the fronts differ only in their fastest tenth, by
  // 0.02% of energy either way, and the synthetic 8 × 128 case takes 5,601 steps instead of 6,260.
  // Two or three leave BLOOM at M = 24 1.9% above a Perseus plan near the fastest time.
  static constexpr int kRefineFactor = 5;
  const Model& model() const { return models_.back(); }
  // Per operation the DAG runs (cost_of_ indexes them), its cost model at `unit_time_s`.
  std::vector<OperationCost> operation_costs(double unit_time_s) const;
  void build_model(double unit_time_s);
  void refine();
  bool step();
  PlannedStep planned_step(bool changed_only) const;
  // The evaluating side's view of the steps so far: their durations and, per node, the frugal and
  // the tight option for it (see the class comment), kept up to date node by node as steps change.
  struct Evaluation {
    const Model* model = nullptr;
    std::vector<long> durations;
    std::vector<std::size_t> frugal, tight;  // indices into each node's candidates
    double model_cost_j = 0;                 // Σ model cost of the durations
  };
  // Brings `evaluation_` to the step; reports which kinds of option changed.
  void follow(const PlannedStep& step, bool& frugal_changed, bool& tight_changed);
  // The options a plan starts from, with their real schedule before slack is reclaimed.
  struct Realized {
    std::vector<std::size_t> chosen;  // indices into each node's candidates
    const Model* model = nullptr;     // whose candidates `chosen` indexes
    std::vector<double> time, finish;  // per node: the option's time, its earliest finish
    double time_s = 0;                 // the iteration time
    FrontierPoint point;               // reclaimed(*this, 0), stamped by evaluate()
  };
  // The plan of `chosen` options (indices into the model's candidates) with slack reclaimed.
  Realized realize(const Model& model, std::vector<std::size_t> chosen) const;
  // `realized` brought to `time_s` (at least the fastest plan's): each instruction on a path longer
  // than that at the slowest candidate that alone takes the excess off every path through it, then
  // slack reclaimed. A path too long has every instruction on it cut by at least its own excess, or
  // all of them at their fastest, so none is left too long; it keeps `realized`'s slow options off
  // those paths.
  Realized fitted(const Realized& realized, double time_s) const;
  // The plan of realized options with slack reclaimed up to max(real time, allowed_time_s); planned
  // time and model energy are left to evaluate().
  FrontierPoint reclaimed(const Realized& realized, double allowed_time_s) const;
  // The flow arc of instruction `node` in `m`: lower bound the integer saving of lengthening it
  // one unit (0 at its longest), upper the cost of shortening it one unit (unbounded at its shortest).
  ActiveArc instruction_arc(const Model& m, std::size_t node) const;

  const OptionTable& table_;
  SolverOptions options_;
  schedule::InstructionDag dag_;
  std::vector<std::size_t> cost_of_;  // per node: index into a model's costs
  // The user's unit's model, then the finer one; a deque, so steps still being evaluated keep theirs.
  std::deque<Model> models_;
  // The options' candidates are the same in every model; the first model's stay in place while the
  // steps add the finer one, so candidates() reads them there.
  const Model* first_model_ = nullptr;
  // Per node: its cost in the first model, which candidate_index() reads for every node of every
  // plan the local search expands (through cost_of_ and costs it took 22 M more instructions on
  // GPT-3 8 x 48).
  std::vector<const OperationCost*> node_cost_;
  std::vector<std::vector<double>> least_energy_from_;  // per cost of the first model
  std::vector<std::span<const double>> least_energy_from_of_;  // per node: least_energy_from_[cost_of_[v]]
  std::vector<long> durations_;
  long makespan_ = 0;
  bool started_ = false, finished_ = false, refined_ = false, force_cut_ = true;
  // The activity-on-arc form of the whole DAG (activity_flow_topology), fixed once; each step
  // switches on the critical arcs.
  MinCutSolver cut_solver_;
  std::vector<ActiveArc> active_;       // room for every arc; a step writes its critical arcs first
  std::vector<ActiveArc> last_active_;  // the same; its first last_count_ are the last max flow's
  std::size_t last_count_ = 0;
  std::vector<long> after_;             // per node: the longest path after it, in units
  Decision last_decision_;
  Evaluation evaluation_;
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
  std::optional<RelaxationBound> bound;  // with SolverOptions::relaxation_plans or bound
};

// Runs the solver to the end, keeps the Pareto-optimal plans, then improves the front by Pareto
// local search until no plan of it has a move that enters it, or `local_search_rounds` rounds are
// spent (stats say which; plans found there keep the planned time and model energy of the step
// they descend from), then offers it the relaxation's optima rounded to plans (SolverOptions::
// relaxation_plans; theirs are their true time and energy). Uses the calling thread and oneTBB's; the
// result does not depend on how many. `progress`, when set, is called about every 256 steps and
// every 64 local search expansions.
Frontier solve_frontier(const OptionTable& table, const schedule::PipelineSchedule& schedule,
                        const SolverOptions& options,
                        const std::function<void(const SolverProgress&)>& progress = {});

// True time and energy of an assignment (option index per DAG node) of `table` under `dag`.
TimeEnergy evaluate_assignment(const OptionTable& table, const schedule::InstructionDag& dag,
                               std::span<const std::uint16_t> assignment, double p_blocking_w);

// Moves instructions that have slack in the real schedule to the slowest candidate that still fits,
// latest-first, so the iteration time does not grow beyond `makespan` (at least the current one).
// `chosen` holds indices into each node's candidates and `time` their times; both are updated.
// `finish` is the earliest finish of every node before the moves. (Plans of the steps and the
// local search's cut moves.)
void reclaim_slack(const schedule::InstructionDag& dag, std::span<const std::span<const Candidate>> candidates_of,
                   std::vector<std::size_t>& chosen, std::vector<double>& time, std::span<const double> finish,
                   double makespan);

// Iteration energy of one GPU per stage: Σ option energies + P·(stages·T − Σ option times).
double iteration_energy_j(double sum_energy_j, double sum_time_s, int num_stages,
                          double iteration_time_s, double p_blocking_w);

}  // namespace kareus::pipeline
