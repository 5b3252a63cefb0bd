#include "kareus/search/partition_search.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "kareus/core/error.hpp"

namespace kareus::search {

std::optional<SearchMode> parse_search_mode(std::string_view text) {
  if (text == "mobo") return SearchMode::kMobo;
  if (text == "exhaustive") return SearchMode::kExhaustive;
  return std::nullopt;
}

std::string_view to_string(SearchMode mode) { return mode == SearchMode::kMobo ? "mobo" : "exhaustive"; }

std::vector<double> grid_clocks_mhz(const hardware::GpuSpec& gpu, const GridOptions& grid) {
  if (!(grid.clock_step_mhz > 0) || !(grid.min_clock_mhz <= grid.max_clock_mhz)) {
    throw InputError({"", 0, 0, "--clocks"}, "expected LO:HI:STEP with LO <= HI and STEP > 0");
  }
  // By index, bounded: a step so small that LO + STEP rounds to LO would else never end.
  const double steps = std::floor((grid.max_clock_mhz - grid.min_clock_mhz + 1e-9) / grid.clock_step_mhz);
  if (!(steps < 1e6)) {
    throw InputError({"", 0, 0, "--clocks"}, fmt::format("a step of {} MHz from {} to {} MHz gives more than a million clocks",
                                                         grid.clock_step_mhz, grid.min_clock_mhz, grid.max_clock_mhz));
  }
  std::vector<double> clocks;
  for (long i = 0; i <= static_cast<long>(steps); ++i) {
    double snapped = gpu.nearest_clock_mhz(grid.min_clock_mhz + static_cast<double>(i) * grid.clock_step_mhz);
    if (clocks.empty() || snapped > clocks.back()) clocks.push_back(snapped);
  }
  return clocks;
}

std::vector<int> default_sm_levels(const workload::Partition& partition) {
  std::vector<int> levels;
  if (!partition.collective) return levels;
  if (partition.collective->group == workload::ParallelGroup::kContext) {
    for (int s = 1; s <= 20; ++s) levels.push_back(s);
  } else {
    for (int s = 3; s <= 30; s += 3) levels.push_back(s);
  }
  return levels;
}

KnobSpace knob_space_for(const workload::Partition& partition, const hardware::GpuSpec& gpu, const GridOptions& grid) {
  return knob_space_for(partition, gpu, grid, grid_clocks_mhz(gpu, grid));
}

KnobSpace knob_space_for(const workload::Partition& partition, const hardware::GpuSpec& gpu, const GridOptions& grid,
                         std::vector<double> clocks) {
  std::vector<int> sms = grid.sms ? *grid.sms : default_sm_levels(partition);
  std::vector<std::string> slots;
  if (partition.collective) {
    for (const auto& slot : partition.slots) slots.push_back(slot.name);
    if (slots.empty()) sms.clear();
    for (int s : sms) {
      if (s < 1 || s > gpu.sms - 1) {
        throw InputError({"", 0, 0, "--sms"}, fmt::format("{} SMs does not fit {} ({} SMs)", s, gpu.name, gpu.sms));
      }
    }
    if (grid.sequential_sms < 1 || grid.sequential_sms > gpu.sms - 1) {
      throw InputError({"", 0, 0, "--sequential-sms"},
                       fmt::format("{} SMs does not fit {} ({} SMs)", grid.sequential_sms, gpu.name, gpu.sms));
    }
  }
  return KnobSpace::make(std::move(clocks), std::move(sms), std::move(slots), partition.collective ? grid.sequential_sms : 0);
}

KnobSpace search_space_for(const workload::Partition& partition, const hardware::GpuSpec& gpu, const GridOptions& grid,
                           const std::optional<std::vector<Knob>>& known) {
  if (!known) return knob_space_for(partition, gpu, grid);
  std::set<double> clocks;
  std::set<int> sms;
  std::set<std::string> sampled_slots;
  std::map<int, int> sequential_sms;
  for (const Knob& k : *known) {
    clocks.insert(k.freq_mhz);
    if (k.sequential()) {
      ++sequential_sms[k.sms];
    } else if (std::any_of(partition.slots.begin(), partition.slots.end(), [&](const auto& s) { return s.name == k.slot; })) {
      sms.insert(k.sms);
      sampled_slots.insert(k.slot);
    }
  }
  if (clocks.empty()) return knob_space_for(partition, gpu, grid).restricted_to({});
  int sequential = grid.sequential_sms;
  if (!sequential_sms.empty() && !sequential_sms.contains(grid.sequential_sms)) {
    sequential = std::max_element(sequential_sms.begin(), sequential_sms.end(),
                                  [](const auto& a, const auto& b) { return a.second < b.second; })
                     ->first;
  }
  std::vector<std::string> slots;
  for (const auto& slot : partition.slots) {
    if (sampled_slots.contains(slot.name)) slots.push_back(slot.name);
  }
  if (slots.empty() && partition.collective && !partition.slots.empty()) {
    // Only sequential knobs: the grid keeps the overlapped ones (none available), so that a
    // sequential knob is one at its SM count, as on any space with a collective.
    const KnobSpace grid_space = knob_space_for(partition, gpu, grid, {clocks.begin(), clocks.end()});
    return KnobSpace::make(grid_space.freqs_mhz(), grid_space.sms(), grid_space.slots(), sequential).restricted_to(*known);
  }
  // Never overlapped: a table answers by clock (KnobSpace::restricted_to), at the grid's SMs.
  if (partition.slots.empty()) sequential = partition.collective ? grid.sequential_sms : 0;
  return KnobSpace::make({clocks.begin(), clocks.end()}, {sms.begin(), sms.end()}, std::move(slots), sequential)
      .restricted_to(*known);
}

std::vector<Knob> knobs_outside(const KnobSpace& space, const std::vector<Knob>& known) {
  std::vector<Knob> out;
  for (const Knob& k : known) {
    const bool held = space.has_collective() ? space.index_of(k).has_value()
                                             : k.sequential() && std::find(space.freqs_mhz().begin(), space.freqs_mhz().end(),
                                                                           k.freq_mhz) != space.freqs_mhz().end();
    if (!held) out.push_back(k);
  }
  return out;
}

std::size_t default_initial_points(const KnobSpace& space, bool cover_configurations) {
  const auto features = static_cast<std::size_t>(space.features().cols());
  if (cover_configurations) return space.configurations() > features ? 0 : features + 1 - space.configurations();
  const auto two_percent = static_cast<std::size_t>(std::ceil(0.02 * static_cast<double>(space.available_count())));
  return std::max(two_percent, features + 1);
}

PreparedSearch prepare_search(const workload::Partition& partition, const evaluate::Evaluator& evaluator,
                              const PartitionSearchOptions& options) {
  return prepare_search(partition, evaluator.gpu(), options, evaluator.known_knobs(partition));
}

PreparedSearch prepare_search(const workload::Partition& partition, const hardware::GpuSpec& gpu,
                              const PartitionSearchOptions& options, const std::optional<std::vector<Knob>>& known) {
  if (options.batch_size < 1) throw InputError({"", 0, 0, "--batch"}, "the batch size must be at least 1");
  PreparedSearch p;
  p.partition = &partition;
  p.space = search_space_for(partition, gpu, options.grid, known);
  if (known) p.unusable = knobs_outside(p.space, *known);
  p.options = options;
  p.mobo.batch_size = options.batch_size;
  p.mobo.initial.latin_hypercube_points = options.initial_points.value_or(default_initial_points(p.space, options.cover_configurations));
  p.mobo.initial.seed = options.seed;
  p.mobo.initial.include_baseline_knobs = options.include_baseline_knobs;
  p.mobo.initial.cover_configurations = options.cover_configurations;
  p.mobo.stop_threshold = options.stop_threshold;
  p.mobo.measurement_noise = options.measurement_noise;
  p.mobo.max_measurements_per_knob = options.max_measurements_per_knob;
  if (p.mobo.max_measurements_per_knob < 1) throw InputError({"", 0, 0, "--remeasure"}, "a knob is measured at least once");
  if (known && p.mobo.max_measurements_per_knob > 1) {
    throw InputError({"", 0, 0, "--remeasure"}, "a table holds one sample of each knob: measuring one again reads the same");
  }
  if (options.mode == SearchMode::kMobo) p.initial_design_size = p.space.initial_design_size(p.mobo.initial);
  const std::size_t space_size = p.space.available_count();
  const auto fifteen_percent = static_cast<std::size_t>(std::ceil(0.15 * static_cast<double>(space_size)));
  // Exhaustive means the whole space unless the caller caps it.
  const std::size_t default_budget =
      options.mode == SearchMode::kExhaustive ? space_size : std::max(fifteen_percent, p.initial_design_size);
  p.budget = options.budget.value_or(default_budget);
  if (p.budget < 1 && space_size == 0) {
    // A table with no sample of this partition on the grid: nothing to measure, nothing to ask.
    return p;
  }
  if (p.budget < 1) throw InputError({"", 0, 0, "--budget"}, "the budget must be at least 1 measurement");
  if (options.mode == SearchMode::kMobo && p.budget < p.initial_design_size) {
    // What the design is made of, for the message.
    InitialDesignOptions part = p.mobo.initial;
    part.latin_hypercube_points = 0;
    const std::size_t before_hypercube = p.space.initial_design_size(part);
    part.cover_configurations = false;
    const std::size_t baselines = p.space.initial_design_size(part);
    std::vector<std::string> parts;
    if (baselines > 0) parts.push_back(fmt::format("{} baseline knobs", baselines));
    if (before_hypercube > baselines) parts.push_back(fmt::format("{} to cover every configuration", before_hypercube - baselines));
    if (p.initial_design_size > before_hypercube) {
      parts.push_back(fmt::format("{} Latin hypercube points", p.initial_design_size - before_hypercube));
    }
    throw InputError({"", 0, 0, "--budget"}, fmt::format("budget {} is below the initial design of partition {}: {} knobs ({})",
                                                         p.budget, partition.key, p.initial_design_size,
                                                         fmt::join(parts, ", ")));
  }
  return p;
}

MeasureFn measure_with(const evaluate::Evaluator& evaluator, const workload::Partition& partition) {
  return [&evaluator, &partition](const Knob& knob, int repetition) {
    evaluate::EvalResult r = evaluator.evaluate(partition, knob, repetition);
    if (!r.ok()) throw DeviceError(fmt::format("{}: {}", evaluate::to_string(r.status), r.message));
    return TimeEnergy{r.time_s, r.energy_j};
  };
}

namespace {

std::vector<Measurement> pareto_of(const std::vector<Measurement>& ms, bool effective) {
  std::vector<TimeEnergy> points;
  for (const Measurement& m : ms) points.push_back({m.time_s, effective ? m.effective_energy_j : m.energy_j});
  std::vector<Measurement> out;
  for (std::size_t i : pareto_indices(points)) out.push_back(ms[i]);
  return out;
}

}  // namespace

std::vector<Measurement> real_frontier(const std::vector<Measurement>& successful) { return pareto_of(successful, false); }
std::vector<Measurement> effective_frontier(const std::vector<Measurement>& successful) { return pareto_of(successful, true); }

std::string frontier_csv(const std::vector<Measurement>& frontier) {
  std::string out = "freq_mhz,sms,slot,time_s,energy_j,effective_energy_j\n";
  for (const Measurement& m : frontier) {
    out += fmt::format("{},{},{},{:.9g},{:.9g},{:.9g}\n", m.knob.freq_mhz, m.knob.sms, m.knob.slot, m.time_s, m.energy_j,
                       m.effective_energy_j);
  }
  return out;
}

PartitionSearchResult run_prepared_search(const PreparedSearch& prepared, const evaluate::Evaluator& evaluator,
                                          const nlohmann::json& workload_identity,
                                          const std::optional<std::filesystem::path>& journal_path,
                                          const std::function<void(const SearchProgress&)>& progress) {
  const workload::Partition& partition = *prepared.partition;
  std::optional<Journal> journal;
  if (journal_path) journal = Journal::open(*journal_path, {workload_identity, partition.key, evaluator.name()});

  std::unique_ptr<Strategy> strategy;
  if (prepared.options.mode == SearchMode::kMobo) {
    strategy = std::make_unique<MoboStrategy>(prepared.mobo);
  } else {
    strategy = std::make_unique<ExhaustiveStrategy>(std::max<std::size_t>(prepared.options.batch_size, 64));
  }
  SearchOptions options;
  options.budget = prepared.budget;
  options.static_power_w = evaluator.gpu().static_power_w;
  options.max_failures = prepared.options.max_failures;
  options.parallel = prepared.options.parallel;

  PartitionSearchResult r;
  r.key = partition.key;
  r.grid_size = prepared.space.size();
  r.space_size = prepared.space.available_count();
  r.restricted = prepared.space.restricted();
  r.unusable = prepared.unusable;
  r.budget = prepared.budget;
  r.outcome = run_search(prepared.space, *strategy, measure_with(evaluator, partition), evaluator.thread_safe(),
                         journal ? &*journal : nullptr, options, progress);
  // Grid order, not completion order: the outputs do not depend on how measurements interleaved.
  std::vector<Measurement> observations;
  for (const Measurement& m : r.outcome.measurements) {
    r.failed += m.ok ? 0 : 1;
    if (!m.ok || !prepared.space.index_of(m.knob)) continue;
    observations.push_back(m);
    observations.back().effective_energy_j = m.energy_j - options.static_power_w * m.time_s;
  }
  std::stable_sort(observations.begin(), observations.end(), [&](const Measurement& a, const Measurement& b) {
    return *prepared.space.index_of(a.knob) < *prepared.space.index_of(b.knob);
  });
  r.successful = successful(prepared.space, observations);
  // Exhaustive search keeps its measurements: a surrogate of the whole grid would cost more than
  // the grid's frontier gains from it.
  r.estimated = prepared.options.mode == SearchMode::kMobo
                    ? posterior_estimates(prepared.space, observations, options.static_power_w, prepared.mobo)
                    : r.successful;
  r.frontier = real_frontier(r.estimated);
  r.effective_frontier = effective_frontier(r.estimated);
  std::vector<TimeEnergy> points;
  for (const Measurement& m : r.estimated) points.push_back({m.time_s, m.energy_j});
  r.hypervolume = frontier_hypervolume(points);
  return r;
}

}  // namespace kareus::search
