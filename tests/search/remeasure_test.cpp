// Measuring a knob again under noise: MOBO re-measures only when told of the noise and allowed to,
// never past its cap and never in the passes that look for new knobs; each measurement again is
// its own draw, recorded in the journal as a repeat, counted in the budget, and resumed; the
// surrogates and the estimates pool a knob's measurements.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>

#include <unistd.h>

#include "kareus/core/error.hpp"
#include "kareus/search/batch.hpp"
#include "kareus/search/partition_search.hpp"
#include "kareus/search/random.hpp"
#include "kareus/search/search.hpp"
#include "search/synthetic.hpp"

namespace kareus::search {
namespace {

using testing::SyntheticPartition;
using testing::synthetic_space;

// A relative normal scatter drawn from (seed, knob, repetition): each measurement again its own.
MeasureFn noisy_measure_of(const SyntheticPartition& p, double sigma, std::uint64_t seed) {
  return [p, sigma, seed](const Knob& k, int repetition) {
    Rng rng(seed ^ (static_cast<std::uint64_t>(k.freq_mhz) * 1000003u + static_cast<std::uint64_t>(k.sms) * 7919u +
                    std::hash<std::string>{}(k.slot) + 0x9e3779b97f4a7c15ULL * static_cast<std::uint64_t>(repetition)));
    auto normal = [&rng] { return std::sqrt(-2 * std::log(1 - rng.uniform())) * std::cos(2 * M_PI * rng.uniform()); };
    TimeEnergy t = p(k);
    t.time_s *= 1 + sigma * normal();
    t.energy_j *= 1 + sigma * normal();
    return t;
  };
}

MoboOptions noisy_mobo(std::uint64_t seed, int cap) {
  MoboOptions o;
  o.batch_size = 8;
  o.initial.seed = seed;
  o.measurement_noise = 0.02;
  o.max_measurements_per_knob = cap;
  return o;
}

struct Recorded {
  SearchOutcome outcome;
  std::vector<std::pair<Knob, int>> calls;  // what the measuring function was asked, in order
};

Recorded run(const KnobSpace& space, const MeasureFn& measure, MoboOptions o, std::size_t budget,
             Journal* journal = nullptr) {
  Recorded r;
  MoboStrategy mobo(std::move(o));
  std::mutex mutex;
  MeasureFn recording = [&](const Knob& k, int repetition) {
    {
      std::lock_guard lock(mutex);
      r.calls.emplace_back(k, repetition);
    }
    return measure(k, repetition);
  };
  r.outcome = run_search(space, mobo, recording, false, journal, testing::options(budget, 85));
  return r;
}

TEST(Remeasure, UnderNoiseSomeKnobsAreMeasuredAgainWithinTheCapEachAsItsOwnRepetition) {
  const SyntheticPartition part;
  const KnobSpace space = synthetic_space(part);
  std::size_t repeats = 0;
  for (std::uint64_t seed : {1, 2, 3}) {
    const Recorded r = run(space, noisy_measure_of(part, 0.02, seed), noisy_mobo(seed, 3), 110);
    ASSERT_EQ(r.outcome.measurements.size(), 110u) << "every measurement again counts against the budget";
    std::map<std::size_t, int> seen;
    for (std::size_t n = 0; n < r.outcome.measurements.size(); ++n) {
      const Measurement& m = r.outcome.measurements[n];
      ASSERT_TRUE(m.ok);
      int& count = seen[*space.index_of(m.knob)];
      EXPECT_EQ(m.repeat, count) << "a measurement's repeat is the knob's measurements before it";
      EXPECT_EQ(r.calls[n].second, m.repeat) << "the measuring function is told the repetition";
      if (m.repeat > 0) {
        ++repeats;
        EXPECT_NE(m.pass, PickPass::kFastest);
        EXPECT_NE(m.pass, PickPass::kUncertain);
        EXPECT_NE(m.pass, PickPass::kInitial);
      }
      ++count;
      EXPECT_LE(count, 3) << "the cap";
    }
  }
  EXPECT_GT(repeats, 0u) << "the search never chose to measure a knob again";
}

// Told of no noise, or capped at one measurement a knob, nothing is measured twice; and until the
// first batch that measures a knob again, a capped search chooses what the uncapped one does.
TEST(Remeasure, WithoutNoiseOrAtACapOfOneNoKnobTwiceAndTheBatchesBeforeTheFirstRepeatAreTheSame) {
  const SyntheticPartition part;
  const KnobSpace space = synthetic_space(part);
  for (std::uint64_t seed : {1, 4}) {
    const MeasureFn measure = noisy_measure_of(part, 0.02, seed);
    MoboOptions exact = noisy_mobo(seed, 3);
    exact.measurement_noise = 0;
    for (const MoboOptions& o : {exact, noisy_mobo(seed, 1)}) {
      for (const Measurement& m : run(space, measure, o, 110).outcome.measurements) EXPECT_EQ(m.repeat, 0);
    }
    const Recorded once = run(space, measure, noisy_mobo(seed, 1), 110);
    const Recorded again = run(space, measure, noisy_mobo(seed, 3), 110);
    int first_repeat_batch = 1 << 30;
    for (const Measurement& m : again.outcome.measurements) {
      if (m.repeat > 0) first_repeat_batch = std::min(first_repeat_batch, m.batch);
    }
    ASSERT_LT(first_repeat_batch, 1 << 30);
    std::size_t compared = 0;
    for (std::size_t n = 0; n < again.outcome.measurements.size(); ++n) {
      const Measurement& a = again.outcome.measurements[n];
      if (a.batch >= first_repeat_batch) break;
      ASSERT_LT(n, once.outcome.measurements.size());
      EXPECT_EQ(a.knob, once.outcome.measurements[n].knob) << "measurement " << n;
      EXPECT_EQ(a.time_s, once.outcome.measurements[n].time_s);
      ++compared;
    }
    EXPECT_GT(compared, space.configurations()) << "more than the initial design";
  }
}

// A journal keeps a measurement again as such: a search killed between batches and resumed goes
// on with the draws it would have made (the repetitions come from the journal's counts).
TEST(Remeasure, TheJournalRecordsRepeatsAndAResumedSearchDrawsTheNextRepetition) {
  const SyntheticPartition part;
  const KnobSpace space = synthetic_space(part);
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("kareus-remeasure-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::filesystem::path path = dir / "p.journal.jsonl";
  std::filesystem::remove(path);
  const JournalHeader header{nlohmann::json::object(), "synthetic", "noisy"};
  const MeasureFn measure = noisy_measure_of(part, 0.02, 2);
  {
    Journal journal = Journal::open(path, header);
    run(space, measure, noisy_mobo(2, 3), 110, &journal);
  }
  const JournalContents c = Journal::read(path);
  ASSERT_EQ(c.measurements.size(), 110u);
  std::map<std::size_t, int> count;
  std::size_t repeats = 0;
  for (const Measurement& m : c.measurements) {
    EXPECT_EQ(m.repeat, count[*space.index_of(m.knob)]++);
    repeats += m.repeat > 0 ? 1 : 0;
  }
  ASSERT_GT(repeats, 0u);

  // Resume with a larger budget: what it asks to measure again is the next repetition of the knob.
  Journal journal = Journal::open(path, header);
  const Recorded more = run(space, measure, noisy_mobo(2, 3), 140, &journal);
  EXPECT_EQ(more.outcome.measurements.size(), 140u);
  EXPECT_EQ(more.calls.size(), 30u);
  for (const auto& [knob, repetition] : more.calls) {
    EXPECT_EQ(repetition, count[*space.index_of(knob)]++) << "a resumed repeat draws what the journal has not";
  }
  std::filesystem::remove_all(dir);
}

TEST(Remeasure, AKnobsStateAndEstimatesPoolItsMeasurements) {
  const SyntheticPartition part;
  const KnobSpace space = synthetic_space(part);
  const Recorded r = run(space, noisy_measure_of(part, 0.02, 3), noisy_mobo(3, 3), 110);
  SearchState state(space, 85);
  std::vector<Measurement> observations;
  for (Measurement m : r.outcome.measurements) {
    state.add(m);
    m.effective_energy_j = m.energy_j - 85 * m.time_s;
    observations.push_back(m);
  }
  std::size_t pooled = 0;
  for (std::size_t i : state.measured()) {
    double t = 0, e = 0;
    for (const Measurement& m : state.observations(i)) t += m.time_s, e += m.energy_j;
    const double n = state.successes(i);
    EXPECT_NEAR(state.measurement(i).time_s, t / n, 1e-15 * t);
    EXPECT_NEAR(state.measurement(i).energy_j, e / n, 1e-15 * e);
    EXPECT_NEAR(state.measurement(i).effective_energy_j, (e - 85 * t) / n, 1e-12 * e);
    pooled += n > 1 ? 1 : 0;
  }
  ASSERT_GT(pooled, 0u);
  const std::vector<Measurement> per_knob = successful(space, observations);
  EXPECT_EQ(per_knob.size(), state.measured().size());
  for (const Measurement& m : per_knob) EXPECT_EQ(m.time_s, state.measurement(*space.index_of(m.knob)).time_s);
  MoboOptions o = noisy_mobo(3, 3);
  const std::vector<Measurement> estimated = posterior_estimates(space, observations, 85, o);
  ASSERT_EQ(estimated.size(), per_knob.size());
  for (std::size_t k = 0; k < estimated.size(); ++k) EXPECT_EQ(estimated[k].knob, per_knob[k].knob);
  o.measurement_noise = 0;
  const std::vector<Measurement> means = posterior_estimates(space, observations, 85, o);
  for (std::size_t k = 0; k < means.size(); ++k) EXPECT_EQ(means[k].time_s, per_knob[k].time_s);
}

// Whatever the fit, a candidate already measured is never the fastest or the uncertainty pass's
// pick; and flags that mark nothing change nothing.
RC_GTEST_PROP(Remeasure, AgainCandidatesEnterTheImprovementPassesOnly, ()) {
  Rng rng(*rc::gen::arbitrary<std::uint64_t>());
  const auto trained = static_cast<Eigen::Index>(*rc::gen::inRange(3, 12));
  const auto n = trained + static_cast<Eigen::Index>(*rc::gen::inRange(1, 30));
  // A 2-D family with a time–energy trade-off; the first `trained` candidates are the measured knobs.
  auto f_time = [](double x, double y) { return 1.0 / (0.3 + x) + 0.2 * y; };
  auto f_energy = [](double x, double y) { return 2.0 + 3.0 * x * x + 0.5 * (1 - y); };
  Eigen::MatrixXd cand(n, 2);
  for (Eigen::Index i = 0; i < n; ++i) cand(i, 0) = rng.uniform(), cand(i, 1) = rng.uniform();
  const Eigen::MatrixXd train = cand.topRows(trained);
  Eigen::VectorXd yt(trained), ye(trained);
  std::vector<Observed> observed;
  for (Eigen::Index i = 0; i < trained; ++i) {
    yt(i) = f_time(train(i, 0), train(i, 1)) * (1 + 0.02 * (rng.uniform() - 0.5));
    ye(i) = f_energy(train(i, 0), train(i, 1)) * (1 + 0.02 * (rng.uniform() - 0.5));
    observed.push_back({yt(i), ye(i)});
  }
  GpFitOptions fit;
  fit.noise_floor = 1e-4;
  const GpPrediction time = GaussianProcess::fit(train, yt, fit).predict(cand);
  const GpPrediction energy = GaussianProcess::fit(train, ye, fit).predict(cand);
  std::vector<bool> again(static_cast<std::size_t>(n), false);
  for (Eigen::Index i = 0; i < trained; ++i) again[static_cast<std::size_t>(i)] = *rc::gen::arbitrary<bool>();
  BatchOptions o;
  o.batch_size = static_cast<std::size_t>(*rc::gen::inRange(1, 12));
  o.static_power_w = 0.5;
  const BatchPlan plan = plan_batch(observed, time, energy, o, again);
  std::set<std::size_t> picked;
  for (const BatchPick& p : plan.picks) {
    RC_ASSERT(picked.insert(p.candidate).second);
    if (again[p.candidate]) {
      RC_ASSERT(p.pass == PickPass::kHvReal || p.pass == PickPass::kHvEffective || p.pass == PickPass::kBackfill);
    }
  }
  const BatchPlan plain = plan_batch(observed, time, energy, o);
  const BatchPlan unflagged = plan_batch(observed, time, energy, o, std::vector<bool>(static_cast<std::size_t>(n), false));
  RC_ASSERT(plain.picks.size() == unflagged.picks.size());
  for (std::size_t k = 0; k < plain.picks.size(); ++k) RC_ASSERT(plain.picks[k].candidate == unflagged.picks[k].candidate);
}

TEST(Remeasure, EachKnobOnceByDefaultAndATableRefusesMore) {
  const workload::ModelSpec model = workload::load_model("llama-3.2-3b");
  const auto parts = workload::build_partitions(model, workload::validated(model, workload::ParallelConfig{}));
  const workload::Partition& p = workload::find_partition(parts, "fwd_mlp");
  const hardware::GpuSpec gpu = hardware::load_gpu_preset("a100-sxm4-40gb");
  PartitionSearchOptions o;
  o.measurement_noise = 0.01;
  EXPECT_EQ(prepare_search(p, gpu, o).mobo.max_measurements_per_knob, 1);
  o.max_measurements_per_knob = 3;
  EXPECT_EQ(prepare_search(p, gpu, o).mobo.max_measurements_per_knob, 3);
  const std::vector<Knob> table{{1410, 0, "none"}, {1200, 0, "none"}};
  EXPECT_THROW(prepare_search(p, gpu, o, table), InputError);
  o.max_measurements_per_knob = 0;
  EXPECT_THROW(prepare_search(p, gpu, o), InputError);
}

}  // namespace
}  // namespace kareus::search
