// The discrete knob grid of one partition: every (SM clock, SMs for the collective, launch slot)
// the search may measure, in a fixed order, with the normalised features the surrogate reads, the
// seeded initial design, and the knobs the baselines use.
//
// A space can be restricted to the knobs an evaluator holds (a table's samples): the grid, its
// order and features stay, and only the available knobs may be proposed, designed or counted.
//
// Order: clock-major; at each clock the sequential knob first, then each launch slot in the
// partition's order with each SM level ascending. A partition that is never overlapped has one
// knob per clock (slot "none"; sms 0 without a collective).
//
// Thread-safety: an immutable value.
// Example:
//   KnobSpace space = KnobSpace::make({900, 930, 960}, {3, 6, 9}, {"norm_0", "linear_0"}, 20);
//   InitialDesignOptions o;  o.latin_hypercube_points = 12;  o.seed = 7;
//   std::vector<std::size_t> design = space.initial_design(o);
//   const workload::Knob& k = space.knob(design.front());
#pragma once

#include <Eigen/Dense>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kareus/workload/partition.hpp"

namespace kareus::search {

using workload::Knob;

// The nanobatching baseline's SM count for its collective when the caller does not say, and the
// sequential knob's: NCCL's default, one SM per channel, 24 channels on an A100 NVSwitch node
// (evaluate::SimulationOptions::nccl_channels cites it). The Kareus artifact's nanobatched
// all-reduce falls back to torch.distributed (NCCL's defaults) when no SM count is given
// (its transformer_engine/pytorch/ops/basic/all_reduce.py).
inline constexpr int kDefaultNanobatchingSms = 24;

struct InitialDesignOptions {
  // Further knobs after the two parts below, spread by a Latin hypercube.
  std::size_t latin_hypercube_points = 0;
  std::uint64_t seed = 0;
  // Adds first the knobs of the baselines at every clock: the sequential knob (Perseus) and the
  // nanobatching knob (collective launched at the first slot with `nanobatching_sms`), so that
  // the searched frontier contains the baselines' by construction. They take 36 knobs of the
  // Kareus grid, 10% of the smallest grids, and mostly lie off the frontier.
  bool include_baseline_knobs = false;
  int nanobatching_sms = kDefaultNanobatchingSms;
  // Adds one knob of every configuration (slot and SMs, and the sequential one) that has none
  // yet, their clocks evenly spread over the clock levels. A partition's frontier is typically a
  // few configurations swept over the clocks, and a configuration's response to the clock is
  // smooth while neighbouring SM levels can differ sharply (the collective's time crosses the
  // computation's): one look at each configuration tells the surrogate where the sharp parts
  // are, and its clock term carries each look to the other clocks.
  bool cover_configurations = true;
};

class KnobSpace {
 public:
  // Throws InputError when a list is empty, unsorted or repeated, a clock or SM level is not
  // positive, or a slot is "none" or repeated. `slots` empty = never overlapped: `sms` is ignored
  // and each clock has one knob, (clock, sequential_sms, "none"); pass 0 SMs for a partition
  // without a collective.
  static KnobSpace make(std::vector<double> freqs_mhz, std::vector<int> sms, std::vector<std::string> slots,
                        int sequential_sms);

  // Grid positions, available or not: indices run over 0..size()-1.
  std::size_t size() const { return knobs_.size(); }
  const Knob& knob(std::size_t i) const { return knobs_[i]; }
  const std::vector<Knob>& knobs() const { return knobs_; }
  std::optional<std::size_t> index_of(const Knob& knob) const;

  // The same grid with only `known` available (a table's knobs; others on it are ignored). In a
  // space without launch slots a known knob makes its clock available whatever its SMs, as a
  // table answers such a partition by clock.
  KnobSpace restricted_to(const std::vector<Knob>& known) const;
  bool restricted() const { return !available_.empty(); }
  bool available(std::size_t i) const { return available_.empty() || available_[i]; }
  // Knobs the search may measure: size() unless restricted.
  std::size_t available_count() const;

  const std::vector<double>& freqs_mhz() const { return freqs_mhz_; }
  const std::vector<int>& sms() const { return sms_; }
  const std::vector<std::string>& slots() const { return slots_; }
  bool has_collective() const { return !slots_.empty(); }
  // (slot, SMs) pairs and the sequential knob: the knobs at each clock.
  std::size_t configurations() const { return block(); }
  int sequential_sms() const { return sequential_sms_; }

  // One row per knob: clock scaled to [0, 1], log(SMs) scaled to [0, 1], one-hot slot (slots,
  // then "none"). Without a collective only the clock. The collective's time goes roughly as
  // 1/SMs, so in log(SMs) the response is closer to stationary, which the surrogate's kernel
  // assumes: 1→2 SMs changes as much as 10→20.
  const Eigen::MatrixXd& features() const { return features_; }

  // The baselines' knobs at `freq_mhz` (which must be one of the grid's clocks).
  std::size_t sequential_knob(double freq_mhz) const;
  // Collective at the first slot with the SM level nearest `sms` (ties to the smaller); the
  // sequential knob when the partition has no collective.
  std::size_t nanobatching_knob(double freq_mhz, int sms = kDefaultNanobatchingSms) const;
  std::vector<std::size_t> baseline_knobs(int nanobatching_sms = kDefaultNanobatchingSms) const;

  // Available knobs only: baseline knobs (optional; those not available are left out), one knob per
  // configuration that has an available one (optional; at the nearest available clock to its
  // spread one), then a Latin hypercube
  // over (clock level, slot incl. "none", SM level) with `latin_hypercube_points` distinct further
  // knobs: each dimension's levels evenly
  // covered (each level at least once when there are as many points as levels), randomly paired
  // for the seed; a repeat moves to the nearest unused knob, changing the SM level first, then the
  // slot, then the clock. Deterministic for a seed; never larger than the grid.
  std::vector<std::size_t> initial_design(const InitialDesignOptions& options) const;
  // The size initial_design() returns.
  std::size_t initial_design_size(const InitialDesignOptions& options) const;

  bool operator==(const KnobSpace& other) const { return knobs_ == other.knobs_ && available_ == other.available_; }

 private:
  std::size_t block() const { return slots_.empty() ? 1 : 1 + slots_.size() * sms_.size(); }
  std::size_t freq_level(double freq_mhz) const;
  // (clock level, slot level with slots().size() = "none", SM level) of knob i.
  struct Levels {
    std::size_t freq = 0, slot = 0, sms = 0;
  };
  Levels levels(std::size_t i) const;
  std::size_t index(const Levels& l) const;

  std::vector<double> freqs_mhz_;
  std::vector<int> sms_;
  std::vector<std::string> slots_;
  int sequential_sms_ = 0;
  std::vector<Knob> knobs_;
  Eigen::MatrixXd features_;
  std::vector<bool> available_;  // empty = every knob
};

}  // namespace kareus::search
