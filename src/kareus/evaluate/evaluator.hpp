// What a knob costs: the Evaluator turns (partition, knob) into the time and energy of one GPU
// running that partition once. Implementations say how (the simulated GPU model, a table of
// measurements, the GPU itself); the public wrapper enforces the contract once, as pagmo's problem
// wrapper does: the knob must belong to the partition's space on this GPU (an InputError
// otherwise), a result must be finite and non-negative (a failure otherwise), and calls and
// failures are counted.
//
// Expected outcomes are values, not exceptions: a knob the table never measured, or a measurement
// that failed, comes back as an EvalResult with a status and a message, so a search can record it
// and move on. An EnvironmentError (a full disk, a lost GPU: no knob would do better) is not a
// knob's outcome, and passes through.
//
// An implementation that holds a finite set of knobs (a table) says which through known_knobs(), so
// that a search asks only for those.
//
// Thread-safety: Evaluator::evaluate is safe to call from several threads exactly when
// thread_safe() says so (the implementation declares it); the counters are atomic.
// Example:
//   Evaluator eval = make_simulated_evaluator(hardware::load_gpu_preset("a100-sxm4-40gb"));
//   EvalResult r = eval.evaluate(find_partition(parts, "fwd_mlp"), {1410, 12, "linear_0"});
//   if (r.ok()) use(r.time_s, r.energy_j);
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kareus/hardware/gpu.hpp"
#include "kareus/workload/partition.hpp"

namespace kareus::evaluate {

enum class EvalStatus : std::uint8_t {
  kOk,
  kNotMeasured,  // a table evaluator has no sample for this knob
  kFailed,       // the implementation failed, or returned a non-finite or negative value
};

std::string_view to_string(EvalStatus status);

// Time and energy of one GPU running the partition once (energy includes static power).
struct EvalResult {
  EvalStatus status = EvalStatus::kOk;
  double time_s = 0;
  double energy_j = 0;
  std::string message;  // why, when not ok

  bool ok() const { return status == EvalStatus::kOk; }
  static EvalResult success(double time_s, double energy_j) {
    return {EvalStatus::kOk, time_s, energy_j, {}};
  }
  static EvalResult failure(EvalStatus status, std::string message) {
    return {status, 0, 0, std::move(message)};
  }
};

// Where an evaluator's numbers come from; every output that shows them says which.
enum class Provenance : std::uint8_t { kModel, kMeasurement };

// What an implementation provides. Implementations may assume the knob is in the partition's space.
class EvaluatorImpl {
 public:
  virtual ~EvaluatorImpl() = default;
  virtual std::string name() const = 0;  // e.g. "simulated", "table:eval_results.jsonl"
  virtual Provenance provenance() const = 0;
  virtual bool thread_safe() const = 0;
  virtual const hardware::GpuSpec& gpu() const = 0;
  virtual EvalResult evaluate(const workload::Partition& partition,
                              const workload::Knob& knob) const = 0;
  // The `repetition`-th measurement of the same knob again (≥ 1): a device measures afresh, which
  // is what evaluate() does; an evaluator whose scatter is drawn (NoisyEvaluator) draws anew.
  virtual EvalResult evaluate_again(const workload::Partition& partition, const workload::Knob& knob,
                                    int repetition) const {
    (void)repetition;
    return evaluate(partition, knob);
  }
  // The knobs of `partition` it can answer, when that is a finite set it holds (a table of
  // measurements: its samples); nullopt when it can cost any knob of the space (a model, a GPU).
  // A search then measures only these: asking a table for anything else wastes its budget.
  virtual std::optional<std::vector<workload::Knob>> known_knobs(const workload::Partition& partition) const {
    (void)partition;
    return std::nullopt;
  }
};

class Evaluator {
 public:
  explicit Evaluator(std::unique_ptr<EvaluatorImpl> impl);
  Evaluator(Evaluator&& other) noexcept;  // carries the counters along

  // Checks the knob (InputError naming the field when it is outside the partition's space), calls
  // the implementation, and turns an exception other than InputError or EnvironmentError, or a
  // non-finite or negative result, into a kFailed result. `repetition` > 0: the knob's
  // repetition-th measurement after its first (EvaluatorImpl::evaluate_again).
  EvalResult evaluate(const workload::Partition& partition, const workload::Knob& knob, int repetition = 0) const;

  std::string name() const { return impl_->name(); }
  Provenance provenance() const { return impl_->provenance(); }
  bool thread_safe() const { return impl_->thread_safe(); }
  const hardware::GpuSpec& gpu() const { return impl_->gpu(); }
  std::optional<std::vector<workload::Knob>> known_knobs(const workload::Partition& partition) const {
    return impl_->known_knobs(partition);
  }
  // The implementation, for its own extra queries (e.g. the simulated timeline).
  const EvaluatorImpl& impl() const { return *impl_; }

  std::int64_t calls() const { return calls_.load(std::memory_order_relaxed); }
  std::int64_t failures() const { return failures_.load(std::memory_order_relaxed); }

 private:
  std::unique_ptr<EvaluatorImpl> impl_;
  mutable std::atomic<std::int64_t> calls_{0};
  mutable std::atomic<std::int64_t> failures_{0};
};

// The knob space of `partition` on `gpu`: a clock the GPU supports, SMs in 1..SMs-1 for a
// partition with a collective (0 without one), and a slot of the partition or "none". Throws
// InputError naming the field (freq_mhz, sms, slot) and what would be valid.
void check_knob(const hardware::GpuSpec& gpu, const workload::Partition& partition,
                const workload::Knob& knob);

}  // namespace kareus::evaluate
