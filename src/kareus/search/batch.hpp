// Filling one batch of the multi-pass multi-objective search from the surrogates' predictions, on
// plain data. Passes, each excluding earlier picks:
//   1. ~40%: hypervolume improvement in (real energy, time),
//   2. ~20%: hypervolume improvement in (effective energy, time),
//   3. ~20%: the fastest predicted (the likeliest to beat the fastest time known),
//   4. the rest: the most uncertain (among those that may still improve a front, when any may);
// places a pass cannot fill (no candidate improves) are back-filled at the end by the better of
// the two (normalised) improvements, then by uncertainty.
//
// An improvement is scored at the candidate's optimistic point (mean − optimism·sd in each
// objective). After each pick the batch assumes a pessimistic outcome for it (mean + liar·sd, a
// "constant liar"): the lie joins the fronts and the surrogates are conditioned on it, which takes
// off every other candidate the variance the measurement will remove and worsens the candidates
// strongly correlated with the pick, so that later picks spread out instead of piling onto one
// configuration. Ties go to the lower candidate index: the same inputs give the same batch.
//
// A candidate already measured (a measurement again, under noise) is scored by the same rule, at
// its posterior: it wins a place where its uncertainty reaches further into the front than a new
// knob's promise.
//
// Thread-safety: pure functions.
// Example:
//   BatchOptions o;  o.batch_size = 8;  o.static_power_w = 85;
//   BatchPlan plan = plan_batch(observed, time_pred, effective_pred, o);
//   for (const BatchPick& p : plan.picks) measure(candidates[p.candidate]);
#pragma once

#include <array>
#include <span>
#include <vector>

#include "kareus/core/pareto.hpp"
#include "kareus/search/gaussian_process.hpp"
#include "kareus/search/measurement.hpp"

namespace kareus::search {

// Area in (time, y) that `point` adds to the Pareto `front` (any order), bounded by `reference`.
double hypervolume_improvement(std::span<const TimeEnergy> front, const TimeEnergy& point, const TimeEnergy& reference);

// The hypervolume reference point of a set of points: the nadir of their Pareto front pushed out
// by `margin` times the front's extent in each objective (or `margin` times the value when the
// extent is zero). `points` must not be empty.
TimeEnergy reference_point(std::span<const TimeEnergy> points, double margin = 0.1);

struct BatchShares {
  double hv_real = 0.4;
  double hv_effective = 0.2;
  double fastest = 0.2;  // the rest goes to the most uncertain
};

// Places of a batch of `batch_size` per pass (hv_real, hv_effective, fastest, uncertain), by the
// largest remainder with ties to the earlier pass; they sum to batch_size.
std::array<std::size_t, 4> pass_counts(std::size_t batch_size, const BatchShares& shares);

struct BatchOptions {
  std::size_t batch_size = 8;
  BatchShares shares;
  double static_power_w = 0;  // real energy = effective + static_power_w · time
  // Score improvements by their expectation under the models (expected hypervolume improvement),
  // or, when false, at the optimistic point mean − optimism·sd.
  bool expected_improvement = false;
  double optimism = 0.3;      // sds subtracted from the means when scoring improvements
  double liar = 1.0;          // a pick is believed to come back this many sds worse than predicted
  double plausible_sds = 2.0;  // the uncertainty pass prefers candidates that may improve a front
                               // at mean − plausible_sds·sd
  double reference_margin = 0.1;
};

struct Observed {
  double time_s = 0;
  double effective_energy_j = 0;
};

struct BatchPick {
  std::size_t candidate = 0;  // row of the predictions
  PickPass pass = PickPass::kHvReal;
  Prediction predicted;
};

struct BatchPlan {
  std::vector<BatchPick> picks;
  // Largest hypervolume improvement in (real energy, time) any candidate promised at the start of
  // the batch, relative to the observed hypervolume: the stopping rule's signal.
  double predicted_improvement = 0;
};

// Chooses up to options.batch_size candidates (fewer only when there are fewer). `time` and
// `effective` predict the same candidates, row for row; `observed` holds the successful
// measurements so far (at least one). `again` (empty, or one flag per candidate) marks the
// candidates already measured: they compete in the improvement passes and their back-fill only,
// since the fastest and the uncertainty passes look for knobs the front has not seen.
BatchPlan plan_batch(std::span<const Observed> observed, const GpPrediction& time, const GpPrediction& effective,
                     const BatchOptions& options, const std::vector<bool>& again = {});

}  // namespace kareus::search
