// Sample efficiency of the partition search on the simulated GPU: for every partition of the ten
// Kareus evaluation configs, the hypervolume of the frontier found after b measurements divided by
// the exhaustive frontier's, in (real energy, time), for MOBO (the worst of several seeds) and for
// random sampling at the same budgets. Every measurement counts, the initial design's included.
// The reference point is the exhaustive frontier's nadir pushed out by 10% of its extent in each
// objective (so the ratio measures the frontier, not the empty corner of the grid). The summary
// also counts the runs (partition and seed) that reach 0.99 at 15% of the grid: under noise the
// worst-seed counts swing by several partitions from one set of seeds to the next, the runs less.
//
// Usage: kareus_search_efficiency [--configs 0,3] [--partitions fwd_mlp,...] [--seeds 1,2,3]
//                                 [--random-seeds 5] [--batch 8] [--baselines] [--no-cover]
//                                 [--initial N] [--noise SIGMA] [--model-noise SIGMA]
//                                 [--remeasure N] [--offset K] [--exhaustive-posterior] [--oracles] [--markdown FILE]
//                                 [--json FILE] [--verbose]
// With --noise the searches see the simulated GPU with seeded relative noise SIGMA on time and
// energy (as a real GPU's measurements scatter; each MOBO seed its own draw); hypervolumes are
// taken on the noise-free truth of the knobs they measured, so the ratio says how good the knobs
// the search kept are, and, in the "reported" column, of the knobs on the frontier it reports.
// The searches are told of the noise (PartitionSearchOptions::measurement_noise) unless
// --model-noise says otherwise (0: they take the measurements as exact). --remeasure N: a knob is
// measured N times at most (default the search's); each measurement again draws its own noise.
// --offset K: the surrogates give each configuration an offset of its own, of prior sd K noise sds
// (MoboOptions::configuration_offset).
// Under noise the table also gives what exhaustive profiling reports, the reference any search of
// a part of the grid is held to: every knob measured once (as the artifact profiles) or three times
// (their mean), the Pareto knobs of those measurements at their noise-free truth, the worst seed.
// --exhaustive-posterior adds the grid measured once and reported as MOBO reports, at the
// surrogates' posterior means (a Gaussian process on the whole grid: minutes per partition).
// Under noise the table also gives an oracle's reported frontier: the whole budget (15% and 20% of
// the grid) spent on the exhaustive frontier's own knobs, each measured equally often, their means'
// Pareto knobs. It knows which knobs to measure, not what they cost: where it misses 0.99, a
// search reporting measured means would have to find those knobs with no measurement spent
// elsewhere and then share the budget among them better than evenly. With the frontier's size and
// extent beside it, and a second oracle that shares the same budget among the same knobs by need
// (adaptive_oracle_ratio). --oracles: the oracles alone, no search (seconds for the whole table;
// stdout and --markdown, not --json). --verbose: per partition and seed, on stderr, the exhaustive
// front's knobs the search missed within 15% of the grid, and the configurations it spent on
// (configurations_measured).
#include <fmt/format.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "kareus/core/io.hpp"
#include "kareus/evaluate/noisy.hpp"
#include "kareus/evaluate/simulated.hpp"
#include "kareus/hardware/gpu.hpp"
#include "kareus/search/partition_search.hpp"
#include "kareus/planner/planner.hpp"

namespace {

using namespace kareus;
using search::Measurement;

// The table's label of an evaluation config, e.g. "Qwen3-1.7B CP2·TP4 mbs8 seq4096".
std::string label(const planner::Job& job) {
  const auto& p = job.parallel;
  return fmt::format("{} {}TP{} mbs{} seq{}", job.model.name == "llama-3.2-3b" ? "Llama3.2-3B" : "Qwen3-1.7B",
                     p.cp > 1 ? fmt::format("CP{}·", p.cp) : "", p.tp, p.microbatch_size, p.seq_len);
}

// The Kareus artifact's budget for TP partitions: 96 initial samples and 4 batches of 32.
constexpr std::size_t kArtifactBudget = 96 + 4 * 32;

struct Row {
  std::string config, key;
  bool tp = true;
  std::size_t grid = 0, initial = 0;
  // 10%, 15%, 20% of the grid, the artifact's budget
  std::vector<std::size_t> budgets;
  std::vector<double> mobo, random_mean, random_min;  // MOBO: the worst seed at each budget
  // MOBO's worst seed at 15% of the grid on the frontier it reports (the Pareto knobs of its
  // estimates, search::PartitionSearchResult::estimated): below `mobo` when noise put a worse knob on it.
  double mobo_reported = 1;
  // Seeds whose measured knobs, and whose reported frontier, reach 0.99 at 15% of the grid: the
  // runs behind the worst-seed figures, counted one by one.
  std::size_t seeds_measured_99 = 0, seeds_reported_99 = 0;
  // Measurements until the ratio first reaches 0.99, the worst seed's (0 = some seed never did).
  std::size_t mobo_to_99 = 0;
  // Measurements of a knob again within 15% of the grid, the most of any seed.
  std::size_t mobo_repeats = 0;
  // Under noise, exhaustive profiling's reported ratio with each knob measured once and three
  // times, the worst seed (1 without noise).
  double exhaustive_once = 1, exhaustive_thrice = 1;
  // Under noise, an oracle's reported ratio at 15% and 20% of the grid: the budget spent on the
  // exhaustive frontier's knobs alone, known in advance, each measured equally often, the Pareto
  // knobs of their means; the worst seed.
  std::array<double, 2> oracle{1, 1};
  // The same oracle sharing the budget by need (adaptive_oracle_ratio).
  std::array<double, 2> adaptive{1, 1};
  std::size_t front_size = 0;
  // The exhaustive frontier's extent relative to its least time and least energy.
  double time_extent = 0, energy_extent = 0;
  std::optional<double> exhaustive_posterior;  // --exhaustive-posterior: the grid once, as MOBO reports
  double seconds = 0;
};

std::vector<double> prefix_ratios(const std::vector<TimeEnergy>& order, const std::vector<std::size_t>& budgets,
                                  const TimeEnergy& ref, double hv_all, std::size_t* to_99 = nullptr) {
  if (to_99) {
    *to_99 = 0;
    std::vector<TimeEnergy> prefix;
    for (std::size_t b = 1; b <= order.size() && *to_99 == 0; ++b) {
      prefix.push_back(order[b - 1]);
      if (hypervolume_2d(prefix, ref) >= 0.99 * hv_all) *to_99 = b;
    }
  }
  std::vector<double> out;
  for (std::size_t b : budgets) {
    std::vector<TimeEnergy> p(order.begin(), order.begin() + static_cast<long>(std::min(b, order.size())));
    out.push_back(hypervolume_2d(p, ref) / hv_all);
  }
  return out;
}

// Under --verbose, one line per configuration (SMs/slot) that holds a knob of the exhaustive front
// or that the search measured at least three times within `budget` measurements: the hypervolume
// of its own knobs' truth over the exhaustive one, and its measurements by the pass that chose
// them. It shows where the search spent its budget against where the front is.
std::string configurations_measured(const search::KnobSpace& space, const std::vector<std::size_t>& front,
                                    const std::vector<TimeEnergy>& all, const TimeEnergy& ref, double hv_all,
                                    const std::vector<Measurement>& measurements, std::size_t budget) {
  auto name = [](const workload::Knob& k) { return fmt::format("{}/{}", k.sms, k.slot); };
  std::map<std::string, std::vector<TimeEnergy>> own;
  for (std::size_t i = 0; i < space.size(); ++i) own[name(space.knob(i))].push_back(all[i]);
  std::map<std::string, std::map<std::string, int>> passes;
  std::map<std::string, int> count;
  for (std::size_t n = 0; n < std::min(budget, measurements.size()); ++n) {
    const Measurement& m = measurements[n];
    passes[name(m.knob)][std::string(search::to_string(m.pass))]++;
    count[name(m.knob)]++;
  }
  std::set<std::string> shown;
  for (std::size_t i : front) shown.insert(name(space.knob(i)));
  for (const auto& [config, n] : count) {
    if (n >= 3) shown.insert(config);
  }
  std::vector<std::pair<double, std::string>> rows;
  for (const std::string& config : shown) rows.emplace_back(hypervolume_2d(own[config], ref) / hv_all, config);
  std::sort(rows.rbegin(), rows.rend());
  std::string out;
  for (const auto& [ratio, config] : rows) {
    std::string by_pass;
    for (const auto& [pass, n] : passes[config]) by_pass += fmt::format("{}{} {}", by_pass.empty() ? "" : ", ", pass, n);
    out += fmt::format("\n  {:<14} own HV {:.4f}, measured {}{}", config, ratio, count[config],
                       by_pass.empty() ? "" : " (" + by_pass + ")");
  }
  return out;
}

// The ratio on the noise-free truth of the knobs the search would report after its first `budget`
// measurements: the Pareto knobs of its estimates of them (the measurements, or with measurement
// noise modelled the surrogates' posterior means), as run_prepared_search reports its frontier.
double reported_ratio(const search::PreparedSearch& prepared, std::vector<Measurement> measured, std::size_t budget,
                      double static_power_w, const std::vector<TimeEnergy>& all, const TimeEnergy& ref, double hv_all) {
  measured.resize(std::min(budget, measured.size()));
  for (Measurement& m : measured) m.effective_energy_j = m.energy_j - static_power_w * m.time_s;
  const std::vector<Measurement> estimated =
      search::posterior_estimates(prepared.space, measured, static_power_w, prepared.mobo);
  std::vector<TimeEnergy> points, kept;
  for (const Measurement& m : estimated) points.push_back({m.time_s, m.energy_j});
  for (std::size_t i : pareto_indices(points)) kept.push_back(all[*prepared.space.index_of(estimated[i].knob)]);
  return hypervolume_2d(kept, ref) / hv_all;
}

// The ratio on the noise-free truth of the Pareto knobs of the whole grid measured `times` times
// each (repetitions 0, 1, ...), at the mean of its measurements: what exhaustive profiling reports.
double exhaustive_ratio(const search::KnobSpace& space, const search::MeasureFn& measure, int times,
                        const std::vector<TimeEnergy>& all, const TimeEnergy& ref, double hv_all) {
  std::vector<TimeEnergy> mean(space.size(), TimeEnergy{0, 0});
  for (std::size_t i = 0; i < space.size(); ++i) {
    for (int n = 0; n < times; ++n) {
      const TimeEnergy m = measure(space.knob(i), n);
      mean[i].time_s += m.time_s / times;
      mean[i].energy_j += m.energy_j / times;
    }
  }
  std::vector<TimeEnergy> kept;
  for (std::size_t i : pareto_indices(mean)) kept.push_back(all[i]);
  return hypervolume_2d(kept, ref) / hv_all;
}

// The ratio on the noise-free truth of the Pareto knobs of the means of `budget` measurements
// shared equally among the exhaustive frontier's own knobs (`front`, indices into the grid),
// earlier knobs of it taking the remainder; each knob at least once.
double oracle_ratio(const search::KnobSpace& space, const search::MeasureFn& measure, const std::vector<std::size_t>& front,
                    std::size_t budget, const std::vector<TimeEnergy>& all, const TimeEnergy& ref, double hv_all) {
  std::vector<TimeEnergy> mean(front.size(), TimeEnergy{0, 0});
  for (std::size_t j = 0; j < front.size(); ++j) {
    const std::size_t times = std::max<std::size_t>(1, budget / front.size() + (j < budget % front.size() ? 1 : 0));
    for (std::size_t n = 0; n < times; ++n) {
      const TimeEnergy m = measure(space.knob(front[j]), static_cast<int>(n));
      mean[j].time_s += m.time_s / static_cast<double>(times);
      mean[j].energy_j += m.energy_j / static_cast<double>(times);
    }
  }
  std::vector<TimeEnergy> kept;
  for (std::size_t i : pareto_indices(mean)) kept.push_back(all[front[i]]);
  return hypervolume_2d(kept, ref) / hv_all;
}

// The ratio of the same oracle sharing `budget` among the same knobs by need rather than evenly:
// each knob twice while the budget allows, then each further measurement where the reported
// frontier (the Pareto knobs of the means) most likely misses hypervolume. 64 draws of the knobs'
// costs, each mean plus its standard error (the noise `sigma` known) times a normal, give the
// frontiers the data still allow; a knob on a drawn frontier and off the reported one weighs the
// hypervolume it adds to that draw. The heaviest is measured, or the reported knob whose means
// dominate it most narrowly, whichever has fewer measurements: a knob a few unlucky draws put behind
// another stays there while only it is measured, since the other's mean may be the lucky one. No
// weight left: the knob measured least. A Thompson-sampling cousin of OCBA's allocation for Pareto
// sets (Lee et al. 2010).
double adaptive_oracle_ratio(const search::KnobSpace& space, const search::MeasureFn& measure,
                             const std::vector<std::size_t>& front, std::size_t budget, double sigma,
                             const std::vector<TimeEnergy>& all, const TimeEnergy& ref, double hv_all) {
  const std::size_t f = front.size();
  std::vector<TimeEnergy> sum(f, TimeEnergy{0, 0}), mean(f, TimeEnergy{0, 0});
  std::vector<int> n(f, 0);
  auto take = [&](std::size_t j) {
    const TimeEnergy m = measure(space.knob(front[j]), n[j]);
    ++n[j];
    sum[j].time_s += m.time_s;
    sum[j].energy_j += m.energy_j;
    mean[j] = {sum[j].time_s / n[j], sum[j].energy_j / n[j]};
  };
  for (std::size_t j = 0; j < f; ++j) take(j);  // each knob at least once, as the even oracle
  std::size_t spent = f;
  for (std::size_t j = 0; j < f && spent < budget; ++j, ++spent) take(j);
  std::mt19937_64 rng(budget);
  std::normal_distribution<double> z;
  constexpr int kDraws = 64;
  for (; spent < budget; ++spent) {
    std::vector<bool> kept(f, false);
    for (std::size_t i : pareto_indices(mean)) kept[i] = true;
    std::vector<double> weight(f, 0);
    std::vector<TimeEnergy> draw(f);
    for (int q = 0; q < kDraws; ++q) {
      for (std::size_t j = 0; j < f; ++j) {
        const double se = sigma / std::sqrt(n[j]);
        draw[j] = {mean[j].time_s * (1 + se * z(rng)), mean[j].energy_j * (1 + se * z(rng))};
      }
      const std::vector<std::size_t> p = pareto_indices(draw);
      std::vector<TimeEnergy> pf;
      for (std::size_t i : p) pf.push_back(draw[i]);
      const double hv = hypervolume_2d(pf, ref);
      for (std::size_t a = 0; a < p.size(); ++a) {
        if (kept[p[a]]) continue;
        std::vector<TimeEnergy> without;
        for (std::size_t b = 0; b < p.size(); ++b) {
          if (b != a) without.push_back(draw[p[b]]);
        }
        weight[p[a]] += hv - hypervolume_2d(without, ref);
      }
    }
    std::size_t pick = 0;
    double best = 0;
    for (std::size_t j = 0; j < f; ++j) {
      if (weight[j] > best) best = weight[j], pick = j;
    }
    if (best > 0) {
      std::size_t partner = pick;
      double narrowest = std::numeric_limits<double>::infinity();
      for (std::size_t k = 0; k < f; ++k) {
        if (!kept[k] || !(mean[k].time_s <= mean[pick].time_s && mean[k].energy_j <= mean[pick].energy_j)) continue;
        const double margin =
            std::min(1 - mean[k].time_s / mean[pick].time_s, 1 - mean[k].energy_j / mean[pick].energy_j);
        if (margin < narrowest) narrowest = margin, partner = k;
      }
      if (n[partner] < n[pick]) pick = partner;
    } else {
      for (std::size_t j = 0; j < f; ++j) {
        if (n[j] < n[pick]) pick = j;
      }
    }
    take(pick);
  }
  std::vector<TimeEnergy> kept;
  for (std::size_t i : pareto_indices(mean)) kept.push_back(all[front[i]]);
  return hypervolume_2d(kept, ref) / hv_all;
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::set<std::size_t> configs;
  std::set<std::string> keys;
  int random_seeds = 5;
  std::vector<std::uint64_t> seeds{1, 2, 3};
  std::size_t batch = 8;
  std::string markdown, json_out;
  bool verbose = false;
  double optimism = -1, liar = -1;
  bool ehvi = false;
  bool exhaustive_posterior = false;
  long initial_points = -1;
  bool baselines = false, cover = true;
  double noise = 0;
  double model_noise = -1;  // the noise the searches are told of; default: --noise
  int remeasure = -1;       // measurements of one knob at most; default: the search's
  double offset = -1;       // configurations' offsets in measurement sds; default: the search's
  bool oracles_only = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--configs") {
      for (const auto& c : split(value())) configs.insert(std::stoul(c));
    } else if (a == "--partitions") {
      for (const auto& k : split(value())) keys.insert(k);
    } else if (a == "--random-seeds") {
      random_seeds = std::stoi(value());
    } else if (a == "--seeds" || a == "--seed") {
      seeds.clear();
      for (const auto& v : split(value())) seeds.push_back(std::stoull(v));
    } else if (a == "--batch") {
      batch = std::stoul(value());
    } else if (a == "--markdown") {
      markdown = value();
    } else if (a == "--optimism") {
      optimism = std::stod(value());
    } else if (a == "--exhaustive-posterior") {
      exhaustive_posterior = true;
    } else if (a == "--ehvi") {
      ehvi = true;
    } else if (a == "--liar") {
      liar = std::stod(value());
    } else if (a == "--initial") {
      initial_points = std::stol(value());
    } else if (a == "--no-cover") {
      cover = false;
    } else if (a == "--noise") {
      noise = std::stod(value());
    } else if (a == "--model-noise") {
      model_noise = std::stod(value());
    } else if (a == "--remeasure") {
      remeasure = std::stoi(value());
    } else if (a == "--offset") {
      offset = std::stod(value());
    } else if (a == "--oracles") {
      oracles_only = true;
    } else if (a == "--baselines") {
      baselines = true;
    } else if (a == "--verbose") {
      verbose = true;
    } else if (a == "--json") {
      json_out = value();
    } else {
      std::fprintf(stderr, "unknown argument %s\n", a.c_str());
      return 2;
    }
  }

  if (oracles_only && !(noise > 0)) {
    std::fprintf(stderr, "--oracles needs --noise above 0: without noise every oracle reports the whole frontier\n");
    return 2;
  }
  if (oracles_only && !json_out.empty()) {
    std::fprintf(stderr, "--oracles writes its table to stdout and --markdown only, not --json\n");
    return 2;
  }
  const hardware::GpuSpec gpu = hardware::load_gpu_preset("a100-sxm4-40gb");
  const evaluate::Evaluator sim = evaluate::make_simulated_evaluator(gpu);
  // What the searches measure: the model, with noise when asked; each MOBO seed sees its own draw
  // (noise seed = search seed), so that the worst of the seeds is also the worst of the draws.
  auto noisy = [&](std::uint64_t noise_seed) {
    return evaluate::make_noisy_evaluator(evaluate::make_simulated_evaluator(gpu), {noise, noise_seed});
  };
  const evaluate::Evaluator measured = noisy(0);

  struct Job {
    std::size_t config;
    workload::Partition partition;
  };
  std::vector<Job> jobs;
  const std::vector<std::string> config_names = planner::evaluation_config_names();
  std::vector<planner::Job> configs_run;
  for (std::size_t c = 0; c < config_names.size(); ++c) {
    if (!configs.empty() && !configs.count(c)) continue;
    configs_run.push_back(planner::evaluation_config(config_names[c]));
    const planner::Job& job = configs_run.back();
    for (workload::Partition& part : workload::build_partitions(job.model, job.parallel)) {
      if (!part.collective || (!keys.empty() && !keys.count(part.key))) continue;
      jobs.push_back({configs_run.size() - 1, std::move(part)});
    }
  }

  std::vector<Row> rows(jobs.size());
  std::mutex print;
  const auto start = std::chrono::steady_clock::now();
  tbb::parallel_for(std::size_t{0}, jobs.size(), [&](std::size_t j) {
    const auto t0 = std::chrono::steady_clock::now();
    const workload::Partition& part = jobs[j].partition;
    search::GridOptions grid;
    search::KnobSpace space = search::knob_space_for(part, gpu, grid);
    auto truth = search::measure_with(sim, part);
    auto measure = search::measure_with(measured, part);
    std::vector<TimeEnergy> all(space.size());
    for (std::size_t i = 0; i < space.size(); ++i) all[i] = truth(space.knob(i), 0);
    const TimeEnergy ref = search::reference_point(all, 0.1);
    const double hv_all = hypervolume_2d(all, ref);
    const std::vector<std::size_t> front = pareto_indices(all);

    Row& row = rows[j];
    row.config = label(configs_run[jobs[j].config]);
    row.key = part.key;
    row.tp = part.collective->group == workload::ParallelGroup::kTensor;
    row.grid = space.size();
    row.front_size = front.size();
    {
      const std::vector<TimeEnergy> f = pareto_front(all);
      row.time_extent = f.back().time_s / f.front().time_s - 1;
      row.energy_extent = f.front().energy_j / f.back().energy_j - 1;
    }
    auto pct = [&](double f) { return static_cast<std::size_t>(std::ceil(f * static_cast<double>(space.size()))); };
    row.budgets = {pct(0.10), pct(0.15), pct(0.20), std::min(kArtifactBudget, space.size())};
    const std::size_t largest = *std::max_element(row.budgets.begin(), row.budgets.end());

    // The oracles' ratios under the noise seed's draws, each the worst so far.
    auto take_oracles = [&](std::uint64_t seed) {
      const evaluate::Evaluator seen = noisy(seed);
      const search::MeasureFn profile = search::measure_with(seen, part);
      for (std::size_t b = 0; b < row.oracle.size(); ++b) {
        const std::size_t budget = row.budgets[1 + b];
        row.oracle[b] = std::min(row.oracle[b], oracle_ratio(space, profile, front, budget, all, ref, hv_all));
        row.adaptive[b] =
            std::min(row.adaptive[b], adaptive_oracle_ratio(space, profile, front, budget, noise, all, ref, hv_all));
      }
    };
    if (oracles_only) {
      for (std::uint64_t seed : seeds) take_oracles(seed);
      return;
    }

    row.mobo.assign(row.budgets.size(), 1.0);
    bool always_reached = true;
    for (std::uint64_t seed : seeds) {
      search::PartitionSearchOptions o;
      o.mode = search::SearchMode::kMobo;
      o.seed = seed;
      o.batch_size = batch;
      o.parallel = false;
      o.include_baseline_knobs = baselines;
      o.cover_configurations = cover;
      o.measurement_noise = model_noise >= 0 ? model_noise : noise;
      if (initial_points >= 0) o.initial_points = static_cast<std::size_t>(initial_points);
      if (remeasure >= 1) o.max_measurements_per_knob = remeasure;
      search::PreparedSearch prepared = search::prepare_search(part, gpu, o);
      row.initial = prepared.initial_design_size;
      if (optimism >= 0) prepared.mobo.optimism = optimism;
      if (liar >= 0) prepared.mobo.liar = liar;
      if (offset >= 0) prepared.mobo.configuration_offset = offset;
      if (ehvi) prepared.mobo.expected_improvement = true;
      prepared.budget = std::max(largest, prepared.initial_design_size);
      search::PartitionSearchResult r =
          search::run_prepared_search(prepared, noisy(seed), nlohmann::json::object(), std::nullopt);
      std::vector<TimeEnergy> order;  // the noise-free truth of what it measured, in order
      std::vector<Measurement> ok;
      for (const Measurement& m : r.outcome.measurements) {
        if (!m.ok) continue;
        order.push_back(all[*space.index_of(m.knob)]);
        ok.push_back(m);
      }
      const double reported = reported_ratio(prepared, ok, row.budgets[1], gpu.static_power_w, all, ref, hv_all);
      row.mobo_reported = std::min(row.mobo_reported, reported);
      row.seeds_reported_99 += reported >= 0.99 ? 1 : 0;
      if (noise > 0) {
        const evaluate::Evaluator seen = noisy(seed);
        const search::MeasureFn profile = search::measure_with(seen, part);
        row.exhaustive_once = std::min(row.exhaustive_once, exhaustive_ratio(space, profile, 1, all, ref, hv_all));
        row.exhaustive_thrice = std::min(row.exhaustive_thrice, exhaustive_ratio(space, profile, 3, all, ref, hv_all));
        take_oracles(seed);
        if (exhaustive_posterior) {
          std::vector<Measurement> grid_once;
          for (std::size_t i = 0; i < space.size(); ++i) {
            Measurement m;
            m.knob = space.knob(i);
            const TimeEnergy te = profile(m.knob, 0);
            m.time_s = te.time_s;
            m.energy_j = te.energy_j;
            grid_once.push_back(m);
          }
          const double ratio = reported_ratio(prepared, grid_once, space.size(), gpu.static_power_w, all, ref, hv_all);
          row.exhaustive_posterior = std::min(row.exhaustive_posterior.value_or(1.0), ratio);
        }
      }
      std::size_t repeats = 0;
      for (std::size_t n = 0; n < std::min(row.budgets[1], r.outcome.measurements.size()); ++n) {
        repeats += r.outcome.measurements[n].repeat > 0 ? 1 : 0;
      }
      row.mobo_repeats = std::max(row.mobo_repeats, repeats);
      std::size_t to_99 = 0;
      const std::vector<double> ratios = prefix_ratios(order, row.budgets, ref, hv_all, &to_99);
      for (std::size_t k = 0; k < ratios.size(); ++k) row.mobo[k] = std::min(row.mobo[k], ratios[k]);
      row.seeds_measured_99 += ratios[1] >= 0.99 ? 1 : 0;
      always_reached = always_reached && to_99 > 0;
      row.mobo_to_99 = always_reached ? std::max(row.mobo_to_99, to_99) : 0;
      if (verbose) {
        // The exhaustive frontier's knobs MOBO had not measured at 15% of the grid.
        std::set<std::size_t> seen;
        std::size_t n = 0;
        for (const Measurement& m : r.outcome.measurements) {
          if (n++ < row.budgets[1]) seen.insert(*space.index_of(m.knob));
        }
        std::string missed;
        for (std::size_t i : front) {
          const auto& k = space.knob(i);
          missed += fmt::format(" {}{}/{}/{}({:.4g} ms, {:.4g} J)", seen.count(i) ? "" : "MISSED ", k.freq_mhz, k.sms,
                                k.slot, 1e3 * all[i].time_s, all[i].energy_j);
        }
        const std::string configurations =
            configurations_measured(space, front, all, ref, hv_all, r.outcome.measurements, row.budgets[1]);
        std::lock_guard lock(print);
        std::fprintf(stderr, "%s seed %llu front:%s%s\n", part.key.c_str(), static_cast<unsigned long long>(seed),
                     missed.c_str(), configurations.c_str());
      }
    }

    row.random_mean.assign(row.budgets.size(), 0.0);
    row.random_min.assign(row.budgets.size(), 1.0);
    for (int s = 0; s < random_seeds; ++s) {
      search::RandomStrategy rnd(1000 + static_cast<std::uint64_t>(s), 64);
      search::SearchOptions so;
      so.budget = largest;
      search::SearchOutcome out = search::run_search(space, rnd, measure, false, nullptr, so);
      std::vector<TimeEnergy> ro;
      for (const Measurement& m : out.measurements) ro.push_back(all[*space.index_of(m.knob)]);
      std::vector<double> ratios = prefix_ratios(ro, row.budgets, ref, hv_all);
      for (std::size_t k = 0; k < ratios.size(); ++k) {
        row.random_mean[k] += ratios[k] / random_seeds;
        row.random_min[k] = std::min(row.random_min[k], ratios[k]);
      }
    }
    row.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::lock_guard lock(print);
    std::fprintf(stderr,
                 "%-32s %-12s grid %4zu  MOBO@15%% %.4f (reported %.4f, %zu again; oracle %.4f)  random@15%% %.4f  0.99 "
                 "after %zu (%.1f%%)  %.0f s\n",
                 row.config.c_str(), row.key.c_str(), row.grid, row.mobo[1], row.mobo_reported, row.mobo_repeats, row.oracle[0],
                 row.random_mean[1], row.mobo_to_99, 100.0 * static_cast<double>(row.mobo_to_99) / static_cast<double>(row.grid),
                 row.seconds);
  });

  // The table.
  std::string seed_list;
  for (std::uint64_t seed : seeds) seed_list += fmt::format("{}{}", seed_list.empty() ? "" : ", ", seed);
  std::string md;
  if (oracles_only) {
    md += fmt::format(
        "What an oracle reports on the simulated A100 (a model, not a measurement) with {:g}% seeded noise on time and "
        "energy: it knows the exhaustive frontier's knobs and spends the whole budget measuring them, then reports the "
        "Pareto knobs of their means; HV of their noise-free truth over the exhaustive frontier's, in (real energy, "
        "time), the worst of noise seeds {}. Evenly: each knob equally often. By need: adaptive_oracle_ratio.\n\n"
        "| config | partition | grid | frontier: knobs, time and energy extent | evenly 15%, 20% | by need 15%, 20% |\n"
        "|---|---|---:|---:|---:|---:|\n",
        100 * noise, seed_list);
    std::array<std::size_t, 4> met{};
    for (const Row& r : rows) {
      md += fmt::format("| {} | {} | {} | {}, {:.2f}%, {:.2f}% | {:.4f}, {:.4f} | {:.4f}, {:.4f} |\n", r.config, r.key,
                        r.grid, r.front_size, 100 * r.time_extent, 100 * r.energy_extent, r.oracle[0], r.oracle[1],
                        r.adaptive[0], r.adaptive[1]);
      const std::array<double, 4> ratios{r.oracle[0], r.oracle[1], r.adaptive[0], r.adaptive[1]};
      for (std::size_t k = 0; k < met.size(); ++k) met[k] += ratios[k] >= 0.99 ? 1 : 0;
    }
    md += fmt::format("\n{} partitions; 0.99 reported evenly on {} with 15% of the grid and {} with 20%, by need on {} "
                      "and {}.\n",
                      rows.size(), met[0], met[1], met[2], met[3]);
    std::fputs(md.c_str(), stdout);
    if (!markdown.empty()) write_file_atomic(markdown, md);
    return 0;
  }
  md += fmt::format(
      "Sample efficiency on the simulated A100 (a model, not a measurement{}): HV(found)/HV(exhaustive) in (real "
      "energy, time) per GPU, every measurement counted, the initial design's included. MOBO: the worst of seeds {}, "
      "batch {}, initial design {}. Random: mean (min) of {} seeds. Reference point: exhaustive nadir + 10% of the "
      "frontier's extent.\n\n",
      noise > 0 ? fmt::format("; the searches measured it with {:g}% seeded noise on time and energy, hypervolumes "
                              "are of the noise-free truth of the knobs they measured",
                              100 * noise)
                : "",
      seed_list, batch,
      fmt::format("{}{}{}", baselines ? "the baselines' knobs at every clock, " : "",
                  cover ? "one knob per configuration" : "no covering",
                  initial_points > 0 ? fmt::format(", {} Latin hypercube points", initial_points) : ""),
      random_seeds);
  md += fmt::format("| config | partition | grid | initial | MOBO 10% | MOBO 15% | MOBO 20% | MOBO 15% reported | MOBO "
                    "artifact budget | random 15% mean (min) | random artifact budget | MOBO reaches 0.99 at |{}\n",
                    noise > 0 ? fmt::format(" exhaustive once, reported | exhaustive thrice, reported |{} frontier: knobs, "
                                            "time and energy extent | oracle 15%, 20%, reported | oracle by need 15%, 20% |",
                                            exhaustive_posterior ? " exhaustive once, reported at posterior means |" : "")
                              : "");
  md += fmt::format("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|{}\n",
                    noise > 0 ? (exhaustive_posterior ? "---:|---:|---:|---:|---:|---:|" : "---:|---:|---:|---:|---:|") : "");
  double worst15 = 1, worst_random15 = 1;
  std::size_t met = 0, met_reported = 0, met_once = 0, met_thrice = 0, met_oracle15 = 0, met_oracle20 = 0;
  std::size_t runs_measured = 0, runs_reported = 0;  // (partition, seed) runs at 0.99 at 15% of the grid
  std::size_t met_adaptive15 = 0, met_adaptive20 = 0;
  double worst_reported15 = 1;
  std::size_t worst_to99_pct_row = 0, not_reached = 0;
  double worst_to99 = 0;
  for (std::size_t j = 0; j < rows.size(); ++j) {
    const Row& r = rows[j];
    const bool artifact = r.tp;
    // Percentages of the grid; 0 when MOBO never reached 0.99 within the largest budget run.
    const double to99 = r.mobo_to_99 ? 100.0 * static_cast<double>(r.mobo_to_99) / static_cast<double>(r.grid) : 0.0;
    not_reached += r.mobo_to_99 ? 0 : 1;
    md += fmt::format("| {} | {} | {} | {} | {:.4f} | {:.4f} | {:.4f} | {:.4f} | {} | {:.4f} ({:.4f}) | {} | {} |{}\n",
                      r.config, r.key, r.grid, r.initial, r.mobo[0], r.mobo[1], r.mobo[2], r.mobo_reported,
                      artifact ? fmt::format("{:.4f} ({})", r.mobo[3], r.budgets[3]) : "—", r.random_mean[1],
                      r.random_min[1], artifact ? fmt::format("{:.4f}", r.random_mean[3]) : "—",
                      r.mobo_to_99 ? fmt::format("{} ({:.1f}%)", r.mobo_to_99, to99) : "not reached",
                      noise > 0 ? fmt::format(" {:.4f} | {:.4f} |{} {}, {:.2f}%, {:.2f}% | {:.4f}, {:.4f} | {:.4f}, {:.4f} |", r.exhaustive_once,
                                              r.exhaustive_thrice,
                                              exhaustive_posterior ? fmt::format(" {:.4f} |", *r.exhaustive_posterior) : "",
                                              r.front_size, 100 * r.time_extent, 100 * r.energy_extent, r.oracle[0],
                                              r.oracle[1], r.adaptive[0], r.adaptive[1])
                                : "");
    met_oracle15 += r.oracle[0] >= 0.99 ? 1 : 0;
    met_oracle20 += r.oracle[1] >= 0.99 ? 1 : 0;
    met_adaptive15 += r.adaptive[0] >= 0.99 ? 1 : 0;
    met_adaptive20 += r.adaptive[1] >= 0.99 ? 1 : 0;
    met_once += r.exhaustive_once >= 0.99 ? 1 : 0;
    met_thrice += r.exhaustive_thrice >= 0.99 ? 1 : 0;
    met += r.mobo[1] >= 0.99 ? 1 : 0;
    met_reported += r.mobo_reported >= 0.99 ? 1 : 0;
    runs_measured += r.seeds_measured_99;
    runs_reported += r.seeds_reported_99;
    worst_reported15 = std::min(worst_reported15, r.mobo_reported);
    worst15 = std::min(worst15, r.mobo[1]);
    worst_random15 = std::min(worst_random15, r.random_mean[1]);
    if (to99 > worst_to99) worst_to99 = to99, worst_to99_pct_row = j;
  }
  const double total_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  md += fmt::format("\n{} partitions; MOBO reaches 0.99 within 15% of the grid on {} of them with every seed. Worst "
                    "MOBO ratio at 15% of the grid: {:.4f} (random, mean of its seeds: {:.4f}). ",
                    rows.size(), met, worst15, worst_random15);
  md += fmt::format("On the frontier MOBO reports at 15% (the Pareto knobs of its estimates, taken at their "
                    "noise-free truth): 0.99 on {} partitions, worst {:.4f}. ",
                    met_reported, worst_reported15);
  md += fmt::format("Of the {} runs (partition and seed), {} reach 0.99 at 15% of the grid in the knobs measured and {} "
                    "in the frontier reported. ",
                    rows.size() * seeds.size(), runs_measured, runs_reported);
  if (noise > 0) {
    md += fmt::format("Exhaustive profiling under the same noise reports 0.99 on {} partitions with each knob "
                      "measured once (6.7 times the 15% budget), on {} with each measured three times. ",
                      met_once, met_thrice);
    md += fmt::format("An oracle that spends the budget on the exhaustive frontier's knobs alone (it knows which they "
                      "are, not what they cost), each measured equally often, reports 0.99 on {} with 15% of the "
                      "grid, on {} with 20%; sharing it by need (adaptive_oracle_ratio), on {} and {}. ",
                      met_oracle15, met_oracle20, met_adaptive15, met_adaptive20);
  }
  if (!rows.empty()) {
    md += fmt::format("Most measurements MOBO needed to reach 0.99 with every seed, where it did: {:.1f}% of the grid "
                      "({} {}); not reached within the largest budget on {} partitions. ",
                      worst_to99, rows[worst_to99_pct_row].config, rows[worst_to99_pct_row].key, not_reached);
  }
  md += fmt::format("Wall time {:.0f} s.\n", total_s);
  std::fputs(md.c_str(), stdout);
  if (!markdown.empty()) write_file_atomic(markdown, md);
  if (!json_out.empty()) {
    nlohmann::json doc = nlohmann::json::array();
    for (const Row& r : rows) {
      doc.push_back({{"config", r.config},
                     {"partition", r.key},
                     {"grid", r.grid},
                     {"initial", r.initial},
                     {"seeds", seeds},
                     {"budgets", r.budgets},
                     {"mobo", r.mobo},
                     {"mobo_reported", r.mobo_reported},
                     {"mobo_seeds_at_0_99_15pct", r.seeds_measured_99},
                     {"mobo_reported_seeds_at_0_99_15pct", r.seeds_reported_99},
                     {"random_mean", r.random_mean},
                     {"random_min", r.random_min},
                     {"mobo_measurements_to_0_99", r.mobo_to_99},
                     {"mobo_measured_again_at_15pct", r.mobo_repeats},
                     {"exhaustive_once_reported", r.exhaustive_once},
                     {"exhaustive_thrice_reported", r.exhaustive_thrice},
                     {"frontier_knobs", r.front_size},
                     {"frontier_time_extent", r.time_extent},
                     {"frontier_energy_extent", r.energy_extent}});
      if (noise > 0) {
        doc.back()["oracle_15pct_reported"] = r.oracle[0];
        doc.back()["oracle_20pct_reported"] = r.oracle[1];
        doc.back()["oracle_by_need_15pct_reported"] = r.adaptive[0];
        doc.back()["oracle_by_need_20pct_reported"] = r.adaptive[1];
      }
      if (r.exhaustive_posterior) doc.back()["exhaustive_once_posterior_reported"] = *r.exhaustive_posterior;
    }
    write_file_atomic(json_out, doc.dump(1) + "\n");
  }
  return 0;
}
