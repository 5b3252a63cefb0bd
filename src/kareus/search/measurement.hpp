// What the search records about one knob: the measurement (or its failure), which pass of the
// search chose it, and what the surrogate predicted for it. One journal line each.
//
// Thread-safety: plain values.
// Example:
//   Measurement m;
//   m.knob = {1410, 12, "linear_0"};
//   m.time_s = 0.012, m.energy_j = 4.1, m.effective_energy_j = 4.1 - 85 * 0.012;
//   m.pass = PickPass::kHvReal, m.batch = 3;
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "kareus/workload/partition.hpp"

namespace kareus::search {

// Which rule chose a knob. Names are the journal's "pass" field.
enum class PickPass : std::uint8_t {
  kBaseline,     // "baseline": a baseline's knob (sequential or nanobatching), in the initial design
  kInitial,      // "initial": the Latin hypercube
  kHvReal,       // "hv_real": hypervolume improvement in (real energy, time)
  kHvEffective,  // "hv_effective": hypervolume improvement in (effective energy, time)
  kFastest,      // "fastest": shortest predicted time
  kUncertain,    // "uncertain": largest predictive uncertainty
  kBackfill,     // "backfill": a short pass's places, by the better of the two improvements
  kExhaustive,   // "exhaustive": every knob of the grid
  kRandom,       // "random": uniform random order (benchmarks)
};

std::string_view to_string(PickPass pass);
std::optional<PickPass> parse_pick_pass(std::string_view text);

// The surrogate's prediction for a knob when it was chosen (standard deviations of the latent
// function; real energy = effective + P_static·time, its variance assuming independent models).
struct Prediction {
  double time_s = 0;
  double time_sd_s = 0;
  double effective_energy_j = 0;
  double effective_energy_sd_j = 0;
  double energy_j = 0;
  double energy_sd_j = 0;
  bool operator==(const Prediction&) const = default;
};

struct Measurement {
  workload::Knob knob;
  bool ok = true;
  double time_s = std::nan("");
  double energy_j = std::nan("");
  double effective_energy_j = std::nan("");  // energy_j − P_static·time_s
  std::string error;  // why the measurement failed (ok = false)
  PickPass pass = PickPass::kInitial;
  int batch = 0;  // 0 = initial design
  // 0: the knob's first successful measurement (or an attempt at it); n ≥ 1: the n-th measurement
  // of an already measured knob again, which a search under noise chooses to take (its journal
  // line says "repeat": n).
  int repeat = 0;
  std::optional<Prediction> predicted;
};

// Folds `m`, the n-th successful measurement of a knob (n ≥ 2), into `mean`, the mean of its first
// n − 1: time, energy and effective energy become the mean of all n; the rest stays the first's.
void average_in(Measurement& mean, const Measurement& m, int n);

// How many of `measurements` are successful measurements of a knob again (repeat ≥ 1).
std::size_t measured_again(std::span<const Measurement> measurements);

// The relative standard deviation of a measured effective energy E − P·t when the time and the
// energy each scatter by the relative `sigma`, independently (as a timer's and a power meter's errors
// do, and as the noisy evaluator draws them): sigma·√(E² + (P·t)²) / |E − P·t|, above sigma by as
// much as static power is of the energy. Here E = effective + P·t.
double effective_energy_relative_sd(double sigma, double time_s, double effective_energy_j, double static_power_w);

}  // namespace kareus::search
