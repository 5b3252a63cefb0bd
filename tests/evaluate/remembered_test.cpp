// The remembering evaluator: the evaluator it wraps is asked once per (partition, knob, repetition),
// a failure is asked again, and what it says of itself is the wrapped one's.
#include "kareus/evaluate/remembered.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "kareus/core/error.hpp"
#include "kareus/evaluate/noisy.hpp"
#include "kareus/evaluate/simulated.hpp"

namespace kareus::evaluate {
namespace {

// The simulated GPU with 1% noise, counting each time it is asked; as told, failing a knob at
// 1005 MHz and running out of disk at 810 MHz, or drifting as a device does (each answer's time a
// little longer than the last's).
class Counted final : public EvaluatorImpl {
 public:
  explicit Counted(bool fail = false, bool drift = false) : fail_(fail), drift_(drift) {}
  std::string name() const override { return "counted"; }
  Provenance provenance() const override { return Provenance::kMeasurement; }
  bool thread_safe() const override { return true; }
  const hardware::GpuSpec& gpu() const override { return inner_.gpu(); }
  EvalResult evaluate(const workload::Partition& partition, const workload::Knob& knob) const override {
    return evaluate_again(partition, knob, 0);
  }
  EvalResult evaluate_again(const workload::Partition& partition, const workload::Knob& knob,
                            int repetition) const override {
    const int asked = ++asked_;
    if (fail_ && knob.freq_mhz == 1005) return EvalResult::failure(EvalStatus::kFailed, "the run hung");
    if (fail_ && knob.freq_mhz == 810) throw EnvironmentError("the disk is full");
    EvalResult r = inner_.evaluate(partition, knob, repetition);
    if (drift_) r.time_s *= 1 + 1e-3 * asked;
    return r;
  }
  std::optional<std::vector<workload::Knob>> known_knobs(const workload::Partition&) const override {
    return std::vector<workload::Knob>{{1410, 0, "none"}};
  }
  int asked() const { return asked_; }

 private:
  bool fail_, drift_;
  Evaluator inner_ = make_noisy_evaluator(make_simulated_evaluator(hardware::load_gpu_preset("a100-sxm4-40gb")),
                                          {.sigma = 0.01, .seed = 3});
  mutable std::atomic<int> asked_{0};
};

struct Fixture {
  workload::ModelSpec model = workload::load_model("llama-3.2-3b");
  std::vector<workload::Partition> parts =
      workload::build_partitions(model, workload::validated(model, workload::ParallelConfig{}));
  const workload::Partition& part(const char* key) const { return workload::find_partition(parts, key); }
};

TEST(RememberingEvaluator, AsksEachKnobOnceAndEachRepetitionApart) {
  const Fixture f;
  auto counted = std::make_unique<Counted>();
  const Counted& counts = *counted;
  const Evaluator inner(std::move(counted));
  const Evaluator once = remember_measurements(inner);
  const workload::Partition& mlp = f.part("fwd_mlp");
  const workload::Partition& attn = f.part("fwd_attn");
  const workload::Knob knob{1410, 12, mlp.slots.front().name}, other{1215, 12, mlp.slots.front().name};
  const EvalResult first = once.evaluate(mlp, knob);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(counts.asked(), 1);
  for (int k = 0; k < 3; ++k) {
    const EvalResult again = once.evaluate(mlp, knob);
    EXPECT_EQ(again.time_s, first.time_s);
    EXPECT_EQ(again.energy_j, first.energy_j);
  }
  EXPECT_EQ(counts.asked(), 1) << "the same knob answered from what was kept";
  // Another knob, another partition with the same knob, a repetition: each a measurement of its own.
  (void)once.evaluate(mlp, other);
  (void)once.evaluate(attn, {1410, 12, attn.slots.front().name});
  const EvalResult repeated = once.evaluate(mlp, knob, 1);
  EXPECT_EQ(counts.asked(), 4);
  EXPECT_NE(repeated.time_s, first.time_s) << "a repetition draws its own noise";
  EXPECT_EQ(once.evaluate(mlp, knob, 1).time_s, repeated.time_s);
  EXPECT_EQ(counts.asked(), 4);
  EXPECT_EQ(once.calls(), 8);
  EXPECT_EQ(inner.calls(), 4) << "the wrapped evaluator counts what it was asked";
}

TEST(RememberingEvaluator, AFailureOrAnExceptionIsAskedAgainAndTheWrappedOnesTraitsShowThrough) {
  const Fixture f;
  auto counted = std::make_unique<Counted>(/*fail=*/true);
  const Counted& counts = *counted;
  const Evaluator inner(std::move(counted));
  const Evaluator once = remember_measurements(inner);
  const workload::Partition& mlp = f.part("fwd_mlp");
  const workload::Knob hangs{1005, 12, mlp.slots.front().name};
  EXPECT_EQ(once.evaluate(mlp, hangs).status, EvalStatus::kFailed);
  EXPECT_EQ(once.evaluate(mlp, hangs).status, EvalStatus::kFailed);
  EXPECT_EQ(counts.asked(), 2);
  const workload::Knob lost{810, 12, mlp.slots.front().name};
  EXPECT_THROW((void)once.evaluate(mlp, lost), EnvironmentError);
  EXPECT_THROW((void)once.evaluate(mlp, lost), EnvironmentError);
  EXPECT_EQ(counts.asked(), 4) << "what threw is asked again";
  EXPECT_EQ(once.name(), "counted");
  EXPECT_EQ(once.provenance(), Provenance::kMeasurement);
  EXPECT_TRUE(once.thread_safe());
  EXPECT_EQ(&once.gpu(), &inner.gpu());
  EXPECT_EQ(once.known_knobs(mlp), inner.known_knobs(mlp));
}

// Threads asking the same knobs of a drifting device at once: one asks, the others wait for its
// answer, so every thread sees the same answers.
TEST(RememberingEvaluator, ThreadsAskingOneKnobGetOneAnswer) {
  const Fixture f;
  auto counted = std::make_unique<Counted>(/*fail=*/false, /*drift=*/true);
  const Counted& counts = *counted;
  const Evaluator inner(std::move(counted));
  const Evaluator once = remember_measurements(inner);
  const workload::Partition& mlp = f.part("fwd_mlp");
  std::vector<std::vector<double>> times(4);
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < times.size(); ++t) {
    threads.emplace_back([&, t] {
      for (double clock : {1410.0, 1215.0, 1005.0, 810.0}) {
        times[t].push_back(once.evaluate(mlp, {clock, 12, mlp.slots.front().name}).time_s);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (const std::vector<double>& seen : times) EXPECT_EQ(seen, times.front());
  EXPECT_EQ(counts.asked(), 4) << "each knob asked once, however many threads asked it at once";
}

}  // namespace
}  // namespace kareus::evaluate
