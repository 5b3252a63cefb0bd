// Searching one partition of a workload with an Evaluator: the glue between the search (which
// knows knobs and measurements) and the workload/evaluate modules (which know partitions and what
// a knob costs). Builds the partition's knob grid on the GPU, checks the request before anything
// is touched, runs the chosen strategy against a resumable journal, and returns the frontiers.
//
// When the evaluator holds a finite set of knobs (a table of measurements), the space is the grid of
// those knobs, whatever grid measured them: the search never asks for a knob without a sample,
// and a sample it cannot use (a slot the partition lacks) is counted, not silently dropped.
//
// Thread-safety: prepare_search() is pure; run_prepared_search() measures in parallel when the
// evaluator declares itself thread-safe.
// Example:
//   PartitionSearchOptions o;  o.mode = SearchMode::kMobo;  o.budget = 150;  o.seed = 1;
//   PreparedSearch p = prepare_search(partition, evaluator, o);              // throws InputError
//   PartitionSearchResult r = run_prepared_search(p, evaluator, identity, "fwd_mlp.journal.jsonl");
#pragma once

#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kareus/core/pareto.hpp"
#include "kareus/evaluate/evaluator.hpp"
#include "kareus/search/knob_space.hpp"
#include "kareus/search/search.hpp"
#include "kareus/search/strategy.hpp"
#include "kareus/workload/partition.hpp"

namespace kareus::search {

enum class SearchMode : std::uint8_t { kMobo, kExhaustive };
std::optional<SearchMode> parse_search_mode(std::string_view text);  // "mobo" | "exhaustive"
std::string_view to_string(SearchMode mode);

// The grid of the Kareus evaluation unless told otherwise: SM clocks 900–1410 MHz in 30 MHz
// steps (snapped to clocks the GPU supports), 3–30 SMs in steps of 3 for tensor-parallel
// collectives and 1–20 for context-parallel ones.
struct GridOptions {
  double min_clock_mhz = 900;
  double max_clock_mhz = 1410;
  double clock_step_mhz = 30;
  std::optional<std::vector<int>> sms;  // overrides the per-collective default
  int sequential_sms = kDefaultNanobatchingSms;  // SMs of the sequential knob's collective
};

std::vector<double> grid_clocks_mhz(const hardware::GpuSpec& gpu, const GridOptions& grid);
std::vector<int> default_sm_levels(const workload::Partition& partition);
// Throws InputError when the grid is empty or an SM level does not fit the GPU.
KnobSpace knob_space_for(const workload::Partition& partition, const hardware::GpuSpec& gpu, const GridOptions& grid);
// The same grid's SM levels, slots and sequential SMs at `clocks_mhz` (ascending, the GPU's).
KnobSpace knob_space_for(const workload::Partition& partition, const hardware::GpuSpec& gpu, const GridOptions& grid,
                         std::vector<double> clocks_mhz);

// The space a search of `partition` may measure. Without `known`, the grid of `grid`. With it (an
// evaluator's finite set of knobs: a table), the grid spanned by those knobs (their clocks, the SM
// levels of their overlapped knobs, the partition's slots they sample, in the partition's order,
// and their sequential knob's SMs: `grid.sequential_sms` when present, else the most frequent),
// with only the known knobs available. `grid` then only supplies the sequential SMs.
KnobSpace search_space_for(const workload::Partition& partition, const hardware::GpuSpec& gpu, const GridOptions& grid,
                           const std::optional<std::vector<Knob>>& known);
// The known knobs a space cannot hold (a slot the partition lacks, a second sequential SM count):
// what a search on a table reports it left out.
std::vector<Knob> knobs_outside(const KnobSpace& space, const std::vector<Knob>& known);

struct PartitionSearchOptions {
  SearchMode mode = SearchMode::kMobo;
  std::optional<std::size_t> budget;  // default: the whole grid (exhaustive), else ceil(15% of it), at least the initial design
  std::size_t batch_size = 8;
  std::uint64_t seed = 0;
  // Latin hypercube points of the initial design; default: default_initial_points().
  std::optional<std::size_t> initial_points;
  bool include_baseline_knobs = false;  // see InitialDesignOptions
  bool cover_configurations = true;     // see InitialDesignOptions
  std::optional<double> stop_threshold;
  double measurement_noise = 0;  // see MoboOptions
  // Measurements of one knob at most, under measurement noise (see MoboOptions). 1 by default: on
  // the simulated A100's partitions at 1% noise, measuring front knobs again cost more new knobs
  // than it saved (bench/results/README.md). A table holds one sample a knob: only 1.
  int max_measurements_per_knob = 1;
  int max_failures = 2;
  bool parallel = true;
  GridOptions grid;
};

// Latin hypercube points when the caller does not say: none when the design covers every
// configuration (one knob each is at least as many as the surrogate has features + 1), else 2% of
// the grid, at least features + 1.
std::size_t default_initial_points(const KnobSpace& space, bool cover_configurations);

// A checked request for one partition: nothing has been measured or written yet.
struct PreparedSearch {
  const workload::Partition* partition = nullptr;
  KnobSpace space;
  std::size_t budget = 0;
  std::size_t initial_design_size = 0;  // 0 in exhaustive mode
  PartitionSearchOptions options;
  MoboOptions mobo;
  std::vector<Knob> unusable;  // the evaluator's knobs outside the space (knobs_outside)
};

// Throws InputError for a bad request: batch < 1, a budget below the initial design (MOBO) or
// below 1, a grid that does not fit the GPU, more than one measurement a knob from a table.
// `known`: the only knobs the search may measure (see search_space_for); the budget's defaults
// are then shares of those.
PreparedSearch prepare_search(const workload::Partition& partition, const hardware::GpuSpec& gpu,
                              const PartitionSearchOptions& options,
                              const std::optional<std::vector<Knob>>& known = std::nullopt);
// The same on the evaluator's GPU, on the knobs it holds when it says it holds a finite set (a
// table: Evaluator::known_knobs), so that no measurement is spent on a knob it lacks.
PreparedSearch prepare_search(const workload::Partition& partition, const evaluate::Evaluator& evaluator,
                              const PartitionSearchOptions& options);

// Measures a knob with the evaluator; a failed or unmeasured result is thrown as a DeviceError
// (recorded as a failed measurement by the search), an invalid knob as an InputError.
MeasureFn measure_with(const evaluate::Evaluator& evaluator, const workload::Partition& partition);

struct PartitionSearchResult {
  std::string key;
  std::size_t grid_size = 0;        // knobs on the grid
  std::size_t space_size = 0;       // of them, those the search may measure (all unless restricted)
  bool restricted = false;          // the space is the evaluator's known knobs (a table)
  std::vector<Knob> unusable;       // the evaluator's knobs the space cannot hold
  std::size_t budget = 0;
  SearchOutcome outcome;
  std::vector<Measurement> successful;          // one per measured knob, at the mean of its measurements
  // The same knobs at the search's estimate of their cost: with measurement noise modelled (MOBO,
  // PartitionSearchOptions::measurement_noise > 0) the surrogates' posterior means
  // (posterior_estimates), else the measurements. The frontiers and what plans use are of these.
  std::vector<Measurement> estimated;
  std::vector<Measurement> frontier;            // of `estimated`: Pareto in (real energy, time), time ascending
  std::vector<Measurement> effective_frontier;  // Pareto in (effective energy, time)
  FrontierHypervolume hypervolume;              // of the real-energy frontier
  std::size_t failed = 0;
};

// Runs a prepared search. `journal` empty = in memory only. The journal header carries
// `workload_identity`, the partition key and the evaluator's name.
PartitionSearchResult run_prepared_search(const PreparedSearch& prepared, const evaluate::Evaluator& evaluator,
                                          const nlohmann::json& workload_identity,
                                          const std::optional<std::filesystem::path>& journal,
                                          const std::function<void(const SearchProgress&)>& progress = {});

// The Pareto subsets of measurements, time ascending.
std::vector<Measurement> real_frontier(const std::vector<Measurement>& successful);
std::vector<Measurement> effective_frontier(const std::vector<Measurement>& successful);
// CSV with columns freq_mhz,sms,slot,time_s,energy_j,effective_energy_j.
std::string frontier_csv(const std::vector<Measurement>& frontier);

}  // namespace kareus::search
