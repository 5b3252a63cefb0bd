// Search strategies: which knobs of a partition's grid to measure next, given what has been
// measured. A strategy never measures anything itself and never touches an evaluator (pagmo's
// algorithm/problem split); the driver in search.hpp asks it, measures, and records.
//
//   ExhaustiveStrategy  every knob, in grid order (the reference; right for cheap evaluators)
//   MoboStrategy        the multi-pass multi-objective Bayesian optimisation of Kareus
//   RandomStrategy      uniformly random order (the sample-efficiency benchmark's baseline)
//
// Thread-safety: a strategy is used from one thread; SearchState likewise.
// Example:
//   MoboOptions o;  o.batch_size = 8;  o.initial.latin_hypercube_points = 20;  o.initial.seed = 1;
//   MoboStrategy mobo(o);
//   ProposalBatch next = mobo.propose(state, budget_left);
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "kareus/core/pareto.hpp"
#include "kareus/search/batch.hpp"
#include "kareus/search/gaussian_process.hpp"
#include "kareus/search/knob_space.hpp"
#include "kareus/search/measurement.hpp"

namespace kareus::search {

enum class StopReason : std::uint8_t {
  kBudgetSpent,             // "budget": the partition's measurement budget is used up
  kGridExhausted,           // "grid": every knob is measured (or failed too often)
  kNoPredictedImprovement,  // "converged": predicted improvement below the threshold twice running
};
std::string_view to_string(StopReason reason);

// What is known about each knob of a space: its successful measurement, its failures.
class SearchState {
 public:
  // Measurements of knobs outside `space` are kept in the count but otherwise ignored.
  SearchState(const KnobSpace& space, double static_power_w, int max_failures = 2);

  void add(const Measurement& m);

  const KnobSpace& space() const { return *space_; }
  double static_power_w() const { return static_power_w_; }
  // Measurements recorded (successful or failed), the journal's count.
  std::size_t measurement_count() const { return count_; }
  // Knobs with a successful measurement, ascending index.
  std::vector<std::size_t> measured() const;
  bool is_measured(std::size_t i) const { return ok_[i].has_value(); }
  // The knob's first successful measurement, at the mean time and energy of all its successful
  // measurements when it was measured again.
  const Measurement& measurement(std::size_t i) const { return *ok_[i]; }
  // Every successful measurement of the knob, in the order recorded; and how many.
  const std::vector<Measurement>& observations(std::size_t i) const { return observations_[i]; }
  int successes(std::size_t i) const { return static_cast<int>(observations_[i].size()); }
  // Measured, available, and not failed since this state was built from the journal: a strategy
  // may propose to measure it again.
  bool may_measure_again(std::size_t i) const;
  // Available in the space (see KnobSpace::restricted_to), not measured, not failed max_failures
  // times, and not failed since this state was built from the journal (a failure is retried once
  // per run at most, and never forever).
  bool is_eligible(std::size_t i) const;
  std::size_t eligible_count() const;
  // The next batch number (one past the highest recorded).
  int next_batch() const { return next_batch_; }

  // (time, real energy) and (time, effective energy = E − P_static·t) of the measured knobs, in
  // the order of measured().
  std::vector<TimeEnergy> real_points() const;
  std::vector<TimeEnergy> effective_points() const;
  // Marks the end of loading the journal: failures from now on bar a knob for this run.
  void start_run() { run_started_ = true; }

 private:
  const KnobSpace* space_;
  double static_power_w_;
  int max_failures_;
  std::vector<std::optional<Measurement>> ok_;
  std::vector<std::vector<Measurement>> observations_;
  std::vector<int> failures_;
  std::vector<bool> failed_this_run_;
  std::size_t count_ = 0;
  int next_batch_ = 0;
  bool run_started_ = false;
};

// The successful measurements among `measurements` that lie in `space`, one per knob in order of
// first appearance: its first measurement, at the mean time and energy of all of them when it was
// measured again (as SearchState::measurement).
std::vector<Measurement> successful(const KnobSpace& space, const std::vector<Measurement>& measurements);

struct Proposal {
  std::size_t knob = 0;  // index into the space
  PickPass pass = PickPass::kInitial;
  std::optional<Prediction> predicted;
  int batch = 0;
};

struct ProposalBatch {
  std::vector<Proposal> proposals;
  std::optional<StopReason> stop;  // set when there is nothing more to propose
};

class Strategy {
 public:
  virtual ~Strategy() = default;
  virtual std::string_view name() const = 0;
  // Up to `max_count` (≥ 1) eligible knobs to measure next, none twice; no proposals and a stop
  // reason when done.
  virtual ProposalBatch propose(const SearchState& state, std::size_t max_count) = 0;
};

class ExhaustiveStrategy final : public Strategy {
 public:
  explicit ExhaustiveStrategy(std::size_t batch_size = 64) : batch_size_(batch_size) {}
  std::string_view name() const override { return "exhaustive"; }
  ProposalBatch propose(const SearchState& state, std::size_t max_count) override;

 private:
  std::size_t batch_size_;
};

class RandomStrategy final : public Strategy {
 public:
  RandomStrategy(std::uint64_t seed, std::size_t batch_size = 16) : seed_(seed), batch_size_(batch_size) {}
  std::string_view name() const override { return "random"; }
  ProposalBatch propose(const SearchState& state, std::size_t max_count) override;

 private:
  std::uint64_t seed_;
  std::size_t batch_size_;
  std::vector<std::size_t> order_;
};

struct MoboOptions {
  std::size_t batch_size = 8;
  InitialDesignOptions initial;
  BatchShares shares;
  bool expected_improvement = false;  // see BatchOptions
  double optimism = 0.3;
  double liar = 1.0;
  double reference_margin = 0.1;
  // Model log(time) and log(effective energy) (when every observation is positive): clock and
  // SM effects become closer to additive, which the GP's kernel captures better.
  bool log_targets = true;
  // Give the surrogates a term of the clock alone beside the joint ARD kernel (see
  // GpFitOptions::additive_feature): a configuration (SMs, slot) measured at one clock then informs
  // its other clocks, which is what a frontier made of one configuration swept over the clocks
  // needs. Only for partitions with a collective (otherwise the clock is the only feature).
  bool additive_clock = true;
  // Stop when the predicted relative hypervolume improvement stays below this for two batches.
  std::optional<double> stop_threshold;
  // The relative standard deviation of one measurement (0.01: repeated measurements of a knob
  // scatter by 1%). Above 0 the surrogates' noise does not fall below it, and the front a new knob
  // must improve on is the models' posterior mean at the measured knobs, not the measurements
  // themselves, so that a knob measured luckily low does not hide the knobs around it. 0: the
  // measurements are taken as exact.
  double measurement_noise = 0;
  // With measurement noise, a knob may be measured up to this many times in all (1: once). A
  // measured knob then competes with the new ones in the improvement passes, scored alike at its
  // optimistic point against the posterior front: it wins where its cost is uncertain by more than
  // a new knob's promise, which is where the front's membership hinges on one noisy measurement.
  // Each measurement counts against the budget.
  int max_measurements_per_knob = 1;
  // Under measurement noise, the prior standard deviation, in measurement sds, of an offset of each
  // configuration's (SMs, slot) own beside the surrogates' smooth model (GpFitOptions::
  // group_features): one noisy measurement of a configuration then leaves its other clocks uncertain
  // by about the noise however well its neighbours are known, so a configuration measured unluckily
  // slow near the front stays worth another knob. 0: none (bench/results/README.md has 1 against 0).
  double configuration_offset = 0;
  GpFitOptions gp;
};

// The knobs of `observations` (successful measurements of `space`, effective energy set, a knob
// any number of times), one each as successful() orders them, at the posterior means of surrogates
// fitted to every observation as MOBO fits its own (log targets, the clock's additive term, the
// noise floor), real energy = effective + static_power_w · time: when measurements scatter, a
// better estimate of each knob's cost than its measurements. Without measurement noise,
// successful(space, observations).
std::vector<Measurement> posterior_estimates(const KnobSpace& space, const std::vector<Measurement>& observations,
                                             double static_power_w, const MoboOptions& options);

class MoboStrategy final : public Strategy {
 public:
  // Throws InputError when batch_size < 1.
  explicit MoboStrategy(MoboOptions options);
  std::string_view name() const override { return "mobo"; }
  ProposalBatch propose(const SearchState& state, std::size_t max_count) override;

  const MoboOptions& options() const { return options_; }
  // The surrogates of the last batch (for tests and diagnostics).
  const std::optional<GaussianProcess>& time_model() const { return time_model_; }
  const std::optional<GaussianProcess>& energy_model() const { return energy_model_; }

 private:
  MoboOptions options_;
  std::optional<GaussianProcess> time_model_, energy_model_;
  bool time_log_ = false, energy_log_ = false;  // the models' scale
  int low_improvement_batches_ = 0;
};

}  // namespace kareus::search
