// One measurement per knob across the runs that share an evaluator. `kareus compare` and `kareus
// plan` run several methods whose knobs overlap (Kareus's search measures the baselines' knobs too,
// to hold them among its options), and on a GPU a knob costs about ten seconds. A remembering
// evaluator asks the evaluator it wraps once per (partition, knob, repetition) and answers later
// calls from what it kept. So the methods also cost a shared knob alike: on a device, where two
// measurements of one knob differ, Kareus's options and a baseline's hold the same one, and Kareus's
// frontier, which takes in the baselines' plans, dominates theirs as reported.
//
// A failed measurement, or one that threw, is not kept: a later call measures again. Calls that
// asked while it was being measured get its outcome (the exception too).
//
// Thread-safety: as the wrapped evaluator. Where that one is thread-safe (a model, a table), a
// thread asking a knob another is measuring waits for that answer: each knob is asked once.
// Example:
//   const Evaluator once = remember_measurements(evaluator);  // `evaluator` must outlive `once`
//   run_method(Method::kKareus, job, once, options);  run_method(Method::kPerseus, job, once, options);
#pragma once

#include <future>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include "kareus/evaluate/evaluator.hpp"

namespace kareus::evaluate {

class RememberingEvaluator final : public EvaluatorImpl {
 public:
  explicit RememberingEvaluator(const Evaluator& inner) : inner_(inner) {}

  std::string name() const override { return inner_.name(); }
  Provenance provenance() const override { return inner_.provenance(); }
  bool thread_safe() const override { return inner_.thread_safe(); }
  const hardware::GpuSpec& gpu() const override { return inner_.gpu(); }
  EvalResult evaluate(const workload::Partition& partition, const workload::Knob& knob) const override {
    return evaluate_again(partition, knob, 0);
  }
  EvalResult evaluate_again(const workload::Partition& partition, const workload::Knob& knob,
                            int repetition) const override;
  std::optional<std::vector<workload::Knob>> known_knobs(const workload::Partition& partition) const override {
    return inner_.known_knobs(partition);
  }

 private:
  using Key = std::tuple<std::string, workload::Knob, int>;  // partition key, knob, repetition
  void forget(const Key& key) const;

  const Evaluator& inner_;
  mutable std::mutex mutex_;
  mutable std::map<Key, std::shared_future<EvalResult>> kept_;  // measured, or being measured
};

// A remembering evaluator over `inner`, which must outlive it.
Evaluator remember_measurements(const Evaluator& inner);

}  // namespace kareus::evaluate
