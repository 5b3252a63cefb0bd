// The search driver with each strategy on a synthetic partition: exhaustive covers the grid, MOBO
// finds nearly the whole frontier within a small budget, failures are recorded and not retried
// forever, parallel and serial measuring agree, resuming never measures a knob twice.
#include "kareus/search/search.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <limits>
#include <cstdio>
#include <functional>
#include <map>
#include <set>
#include <stdexcept>

#include "kareus/core/error.hpp"
#include "kareus/search/random.hpp"
#include "search/synthetic.hpp"

namespace kareus::search {
namespace {

using testing::SyntheticPartition;
using testing::synthetic_space;

MeasureFn measure_of(const SyntheticPartition& p) {
  return [p](const Knob& k, int) { return p(k); };
}

std::vector<TimeEnergy> real_points(const std::vector<Measurement>& ms) {
  std::vector<TimeEnergy> out;
  for (const Measurement& m : ms) {
    if (m.ok) out.push_back({m.time_s, m.energy_j});
  }
  return out;
}

double hv_ratio(const std::vector<Measurement>& found, const std::vector<TimeEnergy>& all) {
  TimeEnergy ref = reference_point(all, 0.1);
  return hypervolume_2d(real_points(found), ref) / hypervolume_2d(all, ref);
}

std::vector<TimeEnergy> exhaustive_points(const KnobSpace& space, const SyntheticPartition& p) {
  std::vector<TimeEnergy> all;
  for (const Knob& k : space.knobs()) all.push_back(p(k));
  return all;
}

TEST(Search, ExhaustiveMeasuresTheWholeGridOnce) {
  SyntheticPartition part;
  KnobSpace space = synthetic_space(part);
  ExhaustiveStrategy strategy(50);
  SearchOutcome out = run_search(space, strategy, measure_of(part), true, nullptr,
                                 testing::options(space.size() + 100, part.static_power_w));
  EXPECT_EQ(out.stop, StopReason::kGridExhausted);
  ASSERT_EQ(out.measurements.size(), space.size());
  std::set<std::size_t> seen;
  for (const Measurement& m : out.measurements) {
    seen.insert(*space.index_of(m.knob));
    EXPECT_EQ(m.pass, PickPass::kExhaustive);
    EXPECT_DOUBLE_EQ(m.effective_energy_j, m.energy_j - part.static_power_w * m.time_s);
  }
  EXPECT_EQ(seen.size(), space.size());
  EXPECT_DOUBLE_EQ(hv_ratio(out.measurements, exhaustive_points(space, part)), 1.0);
}

TEST(Search, BudgetIsRespected) {
  SyntheticPartition part;
  KnobSpace space = synthetic_space(part);
  ExhaustiveStrategy strategy(16);
  SearchOutcome out = run_search(space, strategy, measure_of(part), true, nullptr, testing::options(37, 85));
  EXPECT_EQ(out.stop, StopReason::kBudgetSpent);
  EXPECT_EQ(out.measurements.size(), 37u);
}

MoboOptions mobo_options(std::uint64_t seed, std::size_t batch = 16) {
  MoboOptions o;
  o.batch_size = batch;
  o.initial.seed = seed;  // the default design: one knob per configuration
  return o;
}

TEST(Search, MoboReachesAHighHypervolumeRatioWithinFifteenPercentOfTheGrid) {
  SyntheticPartition part;
  KnobSpace space = synthetic_space(part);
  const auto all = exhaustive_points(space, part);
  for (std::uint64_t seed : {1u, 2u}) {
    MoboStrategy mobo(mobo_options(seed));
    const std::size_t budget = space.size() * 15 / 100;
    SearchOutcome out = run_search(space, mobo, measure_of(part), true, nullptr, testing::options(budget, 85));
    EXPECT_EQ(out.measurements.size(), budget);
    double ratio = hv_ratio(out.measurements, all);
    EXPECT_GE(ratio, 0.99) << "seed " << seed << ", " << budget << " of " << space.size() << " knobs";
    std::printf("MOBO seed %llu: HV ratio %.4f with %zu of %zu knobs\n", static_cast<unsigned long long>(seed), ratio,
                budget, space.size());
  }
}

TEST(Search, MoboWithTheBaselinesMeasuresTheirKnobs) {
  SyntheticPartition part;
  KnobSpace space = synthetic_space(part);
  MoboOptions o = mobo_options(3);
  o.initial.include_baseline_knobs = true;
  MoboStrategy mobo(o);
  SearchOutcome out = run_search(space, mobo, measure_of(part), true, nullptr, testing::options(80, 85));
  std::set<std::size_t> got;
  for (const Measurement& m : out.measurements) got.insert(*space.index_of(m.knob));
  for (double f : space.freqs_mhz()) {
    EXPECT_TRUE(got.count(space.sequential_knob(f))) << f;
    EXPECT_TRUE(got.count(space.nanobatching_knob(f))) << f;
  }
}

TEST(Search, MoboIsDeterministicForASeedWhateverTheMeasuringOrder) {
  SyntheticPartition part;
  KnobSpace space = synthetic_space(part);
  auto run = [&](bool parallel) {
    MoboStrategy mobo(mobo_options(5, 8));
    SearchOutcome out = run_search(space, mobo, measure_of(part), parallel, nullptr, testing::options(90, 85));
    std::map<std::size_t, std::pair<PickPass, int>> by_knob;
    for (const Measurement& m : out.measurements) by_knob[*space.index_of(m.knob)] = {m.pass, m.batch};
    return by_knob;
  };
  EXPECT_EQ(run(false), run(true));
}

TEST(Search, FailuresAreRecordedAndNotRetriedForever) {
  SyntheticPartition part;
  KnobSpace space = KnobSpace::make({900, 1200, 1410}, {6, 12}, {"norm_0", "linear_0"}, 20);
  const Knob bad_nan{1200, 6, "norm_0"}, bad_throw{1410, 12, "linear_0"};
  std::map<Knob, int> calls;
  MeasureFn measure = [&](const Knob& k, int) -> TimeEnergy {
    ++calls[k];
    if (k == bad_nan) return {std::nan(""), 1.0};
    if (k == bad_throw) throw DeviceError("clock change refused");
    return part(k);
  };
  auto dir = std::filesystem::temp_directory_path() / ("kareus-search-fail-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  JournalHeader header{nlohmann::json{{"model", "synthetic"}}, "fwd_mlp", "test"};
  for (int run = 0; run < 4; ++run) {
    Journal journal = Journal::open(dir / "j.jsonl", header);
    ExhaustiveStrategy strategy(4);
    run_search(space, strategy, measure, false, &journal, testing::options(100, 85, 2));
  }
  EXPECT_EQ(calls[bad_nan], 2);  // once per run until max_failures, then never again
  EXPECT_EQ(calls[bad_throw], 2);
  EXPECT_EQ(calls[(Knob{900, 6, "norm_0"})], 1);
  std::vector<Measurement> ms = Journal::read(dir / "j.jsonl").measurements;
  int failed = 0;
  for (const Measurement& m : ms) {
    if (!m.ok) {
      ++failed;
      EXPECT_TRUE(m.knob == bad_nan || m.knob == bad_throw);
      EXPECT_FALSE(m.error.empty());
    }
  }
  EXPECT_EQ(failed, 4);
  std::filesystem::remove_all(dir);
}

TEST(Search, InputErrorsFromTheMeasuringFunctionAbortTheSearch) {
  KnobSpace space = KnobSpace::make({900}, {6}, {"norm_0"}, 20);
  ExhaustiveStrategy strategy;
  MeasureFn measure = [](const Knob&, int) -> TimeEnergy { throw InputError("knob not in the partition's space"); };
  EXPECT_THROW(run_search(space, strategy, measure, false, nullptr, testing::options(5, 0)), InputError);
}

TEST(Search, ResumingMeasuresNoKnobTwice) {
  SyntheticPartition part;
  KnobSpace space = synthetic_space(part);
  auto dir = std::filesystem::temp_directory_path() / ("kareus-search-resume-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  JournalHeader header{nlohmann::json{{"model", "synthetic"}}, "fwd_attn", "test"};
  std::map<Knob, int> calls;
  MeasureFn measure = [&](const Knob& k, int) {
    ++calls[k];
    return part(k);
  };
  for (std::size_t budget : {40u, 70u, 100u}) {
    Journal journal = Journal::open(dir / "j.jsonl", header);
    MoboStrategy mobo(mobo_options(9, 10));
    SearchOutcome out = run_search(space, mobo, measure, false, &journal, testing::options(budget, 85));
    EXPECT_EQ(out.measurements.size(), budget);
  }
  EXPECT_EQ(calls.size(), 100u);
  for (const auto& [knob, n] : calls) EXPECT_EQ(n, 1) << knob.freq_mhz << " " << knob.sms << " " << knob.slot;
  std::filesystem::remove_all(dir);
}

TEST(Search, StopsWhenThePredictedImprovementStaysSmall) {
  SyntheticPartition part;
  KnobSpace space = synthetic_space(part);
  MoboOptions o = mobo_options(4, 8);
  o.stop_threshold = 1e9;  // nothing ever promises that much: stop at the second model batch
  MoboStrategy mobo(o);
  SearchOutcome out = run_search(space, mobo, measure_of(part), true, nullptr, testing::options(500, 85));
  EXPECT_EQ(out.stop, StopReason::kNoPredictedImprovement);
  EXPECT_EQ(out.measurements.size(), space.initial_design_size(o.initial) + 8);
}

TEST(Search, RandomStrategyIsASeededPermutation) {
  SyntheticPartition part;
  KnobSpace space = synthetic_space(part);
  auto run = [&](std::uint64_t seed) {
    RandomStrategy r(seed, 7);
    SearchOutcome out = run_search(space, r, measure_of(part), false, nullptr, testing::options(30, 0));
    std::vector<std::size_t> order;
    for (const Measurement& m : out.measurements) order.push_back(*space.index_of(m.knob));
    return order;
  };
  EXPECT_EQ(run(1), run(1));
  EXPECT_NE(run(1), run(2));
  std::vector<std::size_t> a = run(1);
  EXPECT_EQ(std::set<std::size_t>(a.begin(), a.end()).size(), 30u);
}

TEST(Search, ReportsProgress) {
  SyntheticPartition part;
  KnobSpace space = synthetic_space(part);
  ExhaustiveStrategy strategy(10);
  std::vector<SearchProgress> seen;
  run_search(space, strategy, measure_of(part), false, nullptr, testing::options(25, 85),
             [&](const SearchProgress& p) { seen.push_back(p); });
  ASSERT_EQ(seen.size(), 26u);  // the start, then after every measurement
  EXPECT_EQ(seen.back().measurements, 25u);
  EXPECT_EQ(seen.back().budget, 25u);
  EXPECT_GT(seen.back().hypervolume, 0);
}

// What MOBO chooses when it takes the measurements as exact (measurement_noise 0), recorded from the
// search before it could model noise: telling it of no noise must leave every choice as it was.
// A deliberate change of the noise-free search regenerates these (print `choices(seed)`).
// Configurations' offsets are a model of noisy measurements: without noise they change nothing.
TEST(Search, MoboWithoutNoiseChoosesAsBeforeItModelledNoise) {
  SyntheticPartition part;
  KnobSpace space = synthetic_space(part);
  auto choices = [&](std::uint64_t seed, double configuration_offset = 0) {
    MoboOptions o = mobo_options(seed, 8);
    o.configuration_offset = configuration_offset;
    MoboStrategy mobo(o);
    SearchOutcome out = run_search(space, mobo, measure_of(part), false, nullptr, testing::options(72, 85));
    std::vector<std::size_t> order;
    for (const Measurement& m : out.measurements) order.push_back(*space.index_of(m.knob));
    return order;
  };
  const std::vector<std::size_t> seed_1{
      657, 289, 167, 4, 538, 129, 458, 336, 583, 379, 503, 94, 628, 506, 220, 385, 386, 633,
      142, 102, 103, 719, 351, 680, 312, 723, 437, 438, 480, 276, 277, 32, 689, 75, 76, 200,
      242, 612, 531, 573, 205, 641, 508, 580, 682, 354, 700, 722, 204, 416, 467, 549, 262, 303,
      712, 701, 487, 344, 631, 548, 724, 661, 711, 710, 714, 436, 293, 703, 621, 662, 702, 291};
  const std::vector<std::size_t> seed_6{
      329, 453, 249, 373, 46, 580, 417, 131, 214, 338, 134, 545, 177, 547, 712, 98, 714, 387,
      306, 266, 308, 514, 556, 393, 25, 108, 191, 684, 644, 727, 277, 606, 33, 649, 527, 446,
      488, 79, 695, 122, 205, 476, 302, 559, 334, 640, 702, 703, 194, 682, 518, 395, 272, 436,
      713, 722, 706, 641, 477, 313, 354, 342, 721, 701, 274, 311, 426, 352, 466, 496, 711, 263};
  EXPECT_EQ(choices(1), seed_1);
  EXPECT_EQ(choices(6), seed_6);
  EXPECT_EQ(choices(1, 1.0), seed_1);
}

// Measurements scattered by a seeded relative noise, as a GPU's repeated measurements of a knob are.
MeasureFn noisy_measure_of(const SyntheticPartition& p, double sigma, std::uint64_t seed) {
  return [p, sigma, seed](const Knob& k, int) {
    Rng rng(seed ^ (static_cast<std::uint64_t>(k.freq_mhz) * 1000003u + static_cast<std::uint64_t>(k.sms) * 7919u +
                    std::hash<std::string>{}(k.slot)));
    auto normal = [&rng] { return std::sqrt(-2 * std::log(1 - rng.uniform())) * std::cos(2 * M_PI * rng.uniform()); };
    TimeEnergy t = p(k);
    t.time_s *= 1 + sigma * normal();
    t.energy_j *= 1 + sigma * normal();
    return t;
  };
}

// Told of the noise, the surrogates keep at least its variance at every measured knob (they smooth
// the measurements instead of passing through them), even where the data alone would fit less (here
// exact data): the time's, and the effective energy's, which scatters more than the energy by as
// much as static power is of it.
TEST(Search, MoboToldOfTheNoiseKeepsItInItsSurrogates) {
  SyntheticPartition part;
  KnobSpace space = synthetic_space(part);
  MoboOptions o = mobo_options(2, 8);
  o.measurement_noise = 0.02;
  MoboStrategy mobo(o);
  SearchOutcome out = run_search(space, mobo, measure_of(part), false, nullptr, testing::options(60, 85));
  ASSERT_TRUE(mobo.time_model() && mobo.energy_model());
  // The models were fitted before the last batch was measured: the floor over the knobs they saw.
  double floor = 0;
  std::size_t seen = 0;
  for (const Measurement& m : out.measurements) {
    if (!m.ok || m.batch == out.measurements.back().batch) continue;
    floor += std::pow(effective_energy_relative_sd(0.02, m.time_s, m.energy_j - 85 * m.time_s, 85), 2);
    ++seen;
  }
  ASSERT_GT(seen, 0u);
  floor /= static_cast<double>(seen);
  EXPECT_GT(floor, 1.1 * 0.02 * 0.02);
  Eigen::MatrixXd one = space.features().topRows(1);
  EXPECT_GE(mobo.time_model()->predict(one).noise_variance(0), 0.02 * 0.02 * (1 - 1e-9));
  EXPECT_GE(mobo.energy_model()->predict(one).noise_variance(0), floor * (1 - 1e-9));
}

// The posterior means at the measured knobs estimate their cost better than the one noisy
// measurement of each (the surrogates pool a configuration's measurements across clocks); without
// measurement noise the estimates are the measurements.
TEST(Search, PosteriorEstimatesAreCloserToTheTruthThanNoisyMeasurements) {
  SyntheticPartition part;
  KnobSpace space = synthetic_space(part);
  MoboOptions o = mobo_options(3, 8);
  o.measurement_noise = 0.02;
  MoboStrategy mobo(o);
  SearchOutcome out = run_search(space, mobo, noisy_measure_of(part, 0.02, 11), false, nullptr, testing::options(110, 85));
  std::vector<Measurement> measured;
  for (Measurement m : out.measurements) {
    m.effective_energy_j = m.energy_j - 85 * m.time_s;
    measured.push_back(m);
  }
  const std::vector<Measurement> estimated = posterior_estimates(space, measured, 85, o);
  ASSERT_EQ(estimated.size(), measured.size());
  auto rms = [&](const std::vector<Measurement>& ms, bool time) {
    double sum = 0;
    for (const Measurement& m : ms) {
      const TimeEnergy t = part(m.knob);
      const double e = time ? m.time_s / t.time_s - 1 : m.energy_j / t.energy_j - 1;
      sum += e * e;
    }
    return std::sqrt(sum / static_cast<double>(ms.size()));
  };
  std::printf("relative RMS error: time %.4f measured, %.4f estimated; energy %.4f, %.4f\n", rms(measured, true),
              rms(estimated, true), rms(measured, false), rms(estimated, false));
  EXPECT_LT(rms(estimated, true), rms(measured, true));
  EXPECT_LT(rms(estimated, false), rms(measured, false));
  for (std::size_t i = 0; i < estimated.size(); ++i) {
    EXPECT_EQ(estimated[i].knob, measured[i].knob);
    EXPECT_NEAR(estimated[i].energy_j, estimated[i].effective_energy_j + 85 * estimated[i].time_s, 1e-12);
  }
  o.measurement_noise = 0;
  const std::vector<Measurement> exact = posterior_estimates(space, measured, 85, o);
  for (std::size_t i = 0; i < exact.size(); ++i) EXPECT_EQ(exact[i].time_s, measured[i].time_s);
}

TEST(Search, AMeasurementNoiseOutsideZeroToAHalfIsBadInput) {
  for (double sigma : {-0.01, 0.5, std::nan("")}) {
    MoboOptions o;
    o.measurement_noise = sigma;
    EXPECT_THROW(MoboStrategy{o}, InputError) << sigma;
  }
}

TEST(Search, ANegativeOrNonFiniteConfigurationOffsetIsBadInput) {
  for (double k : {-1.0, std::nan(""), std::numeric_limits<double>::infinity()}) {
    MoboOptions o;
    o.configuration_offset = k;
    EXPECT_THROW(MoboStrategy{o}, InputError) << k;
  }
}

}  // namespace
}  // namespace kareus::search
