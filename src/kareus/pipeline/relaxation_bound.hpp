// A lower bound on the energy of every plan of a pipeline: the dual of the deadline problem's linear
// relaxation. It certifies a front without converging the local search or running a MIP: no plan of
// makespan at most T spends less than energy_j(T), so a plan's gap to it bounds its gap to the exact
// front from above.
//
// Any flow through the instruction DAG (entering at any instruction, leaving at any, conserved at
// each, f_v through instruction v, of value F) bounds every plan of makespan at most T: each path of
// the flow is no longer than T, so Σ f_v·d_v ≤ F·T and, with e the effective energy E − P_blocking·t,
//   Σ e_v(d_v) ≥ Σ [e_v(d_v) + f_v·d_v] − F·T ≥ Σ h_v(f_v) − F·T,   h_v(f) = min over v's options of e + f·t.
// A plan's energy is Σ e + P_blocking·S·T (one GPU per stage), so each flow draws a line under every
// plan. The best flows solve the relaxation's dual, a convex-cost flow (Fulkerson 1961, "A network
// flow computation for project cost curves"): successive longest augmenting paths, each path's
// length the slope of G(F) = max Σ h_v over flows of value F, each augmentation up to the next
// breakpoint of some h_v. The lines where the path's length changes are the whole relaxed front:
// its energy at T is max over them of G − F·T, plus P_blocking·S·T.
//
// The relaxation lies below the discrete front by its integrality gap, so the bound certifies, it
// does not decide. Each line's G is recomputed from its flows and the true options, so every line is
// a valid bound whatever the augmentations' rounding.
// Example:
//   RelaxationBound bound(table, dag, /*p_blocking_w=*/83.64);
//   double gap = point.energy_j / bound.energy_j(point.time_s) - 1;
#pragma once

#include <cstddef>
#include <functional>
#include <span>
#include <vector>

#include "kareus/core/pareto.hpp"
#include "kareus/pipeline/option_table.hpp"
#include "kareus/schedule/dag.hpp"

namespace kareus::pipeline {

class RelaxationBound {
 public:
  // The relaxation's optimum at a makespan: each instruction's duration (per DAG node), within its
  // options' hull; the longest path through them is that makespan.
  using OptimumVisitor = std::function<void(std::span<const double> durations)>;

  // Throws InputError when P_blocking is negative or an instruction has no options. The table must
  // cover the DAG's stages, chunks and slots. `visit`, when set, sees the relaxation's optimum at
  // every time where its lines meet, from the slowest to the fastest: each instruction at its
  // least-energy option no slower than its duration there makes a real plan no slower than that
  // time, near the bound wherever the hull's vertices are dense (FrontierSolver::relaxation_plan).
  RelaxationBound(const OptionTable& table, const schedule::InstructionDag& dag, double p_blocking_w,
                  const OptimumVisitor& visit = {});

  // The least energy a plan of makespan at most `time_s` can spend. Below the relaxation's fastest
  // makespan no plan exists, and the value is that of the fastest lines.
  double energy_j(double time_s) const;
  // What energy_j(time_s) gives up to the rounding of the terms its lines sum, at most: the
  // relaxation's optimum there lies within it above.
  double rounding_margin_j(double time_s) const;

  // The relaxation's makespan with every instruction at its fastest option, and at its option of
  // least effective energy: between them the bound falls; beyond the second it rises at P_blocking·S.
  double fastest_time_s() const { return lines_.back().path_s; }
  double slowest_time_s() const { return lines_.front().path_s; }

  // The plan of `plans` furthest above the bound: energy / bound − 1, and its time. How far the
  // plans can be from the exact front, integrality gap included. `plans` must not be empty.
  struct Gap {
    double relative = 0;
    double time_s = 0;
  };
  Gap worst_gap(std::span<const TimeEnergy> plans) const;

 private:
  // G − F·T bounds Σ e of every plan of makespan T; it is the relaxation's own for T from the next
  // line's path_s up to this one's (the longest augmenting path out of this flow).
  struct Line {
    double flow = 0;      // F, in J/s
    double energy_j = 0;  // G = Σ h_v(f_v)
    double path_s = 0;
    double magnitude = 0;  // Σ |h_v(f_v)| + Σ f_v·t_v: what the line's rounding scales with
  };
  std::span<const Line> lines_near(double time_s) const;  // the lines energy_j looks at

  std::vector<Line> lines_;  // flow ascending, path_s descending
  double idle_power_w_ = 0;  // P_blocking·S
};

}  // namespace kareus::pipeline
