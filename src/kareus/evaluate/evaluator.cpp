#include "kareus/evaluate/evaluator.hpp"

#include <fmt/format.h>

#include <cmath>

#include "kareus/core/error.hpp"

namespace kareus::evaluate {

std::string_view to_string(EvalStatus status) {
  switch (status) {
    case EvalStatus::kOk:
      return "ok";
    case EvalStatus::kNotMeasured:
      return "not measured";
    case EvalStatus::kFailed:
      return "failed";
  }
  return "?";
}

void check_knob(const hardware::GpuSpec& gpu, const workload::Partition& partition,
                const workload::Knob& knob) {
  if (!gpu.supports_clock(knob.freq_mhz)) {
    throw InputError(
        {"", 0, 0, "freq_mhz"},
        fmt::format("{} MHz is not an SM clock of {}: it supports {}-{} MHz in {} steps "
                    "(nearest {} MHz)",
                    knob.freq_mhz, gpu.name, gpu.min_clock_mhz(), gpu.max_clock_mhz,
                    gpu.sm_clocks_mhz.size(), gpu.nearest_clock_mhz(knob.freq_mhz)));
  }
  if (partition.collective) {
    if (knob.sms < 1 || knob.sms > gpu.sms - 1) {
      throw InputError({"", 0, 0, "sms"},
                       fmt::format("{} SMs for the collective is outside 1..{} ({} has {} SMs)",
                                   knob.sms, gpu.sms - 1, gpu.name, gpu.sms));
    }
  } else if (knob.sms != 0) {
    throw InputError({"", 0, 0, "sms"},
                     fmt::format("partition {} has no collective: its knob takes 0 SMs, got {}",
                                 partition.key, knob.sms));
  }
  if (!knob.sequential() && !partition.find_slot(knob.slot)) {
    throw InputError(
        {"", 0, 0, "slot"},
        fmt::format("partition {} has no launch slot '{}'; its slots: {}", partition.key, knob.slot,
                    fmt::join(partition.slot_names(), ", ")));
  }
}

Evaluator::Evaluator(std::unique_ptr<EvaluatorImpl> impl) : impl_(std::move(impl)) {
  KAREUS_CHECK(impl_ != nullptr, "an Evaluator needs an implementation");
}

Evaluator::Evaluator(Evaluator&& other) noexcept
    : impl_(std::move(other.impl_)), calls_(other.calls()), failures_(other.failures()) {}

EvalResult Evaluator::evaluate(const workload::Partition& partition, const workload::Knob& knob,
                               int repetition) const {
  check_knob(impl_->gpu(), partition, knob);
  calls_.fetch_add(1, std::memory_order_relaxed);
  EvalResult result;
  try {
    result = repetition > 0 ? impl_->evaluate_again(partition, knob, repetition) : impl_->evaluate(partition, knob);
  } catch (const InputError&) {
    failures_.fetch_add(1, std::memory_order_relaxed);
    throw;
  } catch (const EnvironmentError&) {
    // Not this knob's failure (a full disk, a lost GPU): the next knob would fail alike.
    failures_.fetch_add(1, std::memory_order_relaxed);
    throw;
  } catch (const std::exception& e) {
    result = EvalResult::failure(EvalStatus::kFailed,
                                 fmt::format("{} evaluator failed: {}", impl_->name(), e.what()));
  }
  if (result.ok() && !(std::isfinite(result.time_s) && std::isfinite(result.energy_j) &&
                       result.time_s >= 0 && result.energy_j >= 0)) {
    result = EvalResult::failure(
        EvalStatus::kFailed,
        fmt::format("{} evaluator returned time {} s, energy {} J (must be finite and >= 0)",
                    impl_->name(), result.time_s, result.energy_j));
  }
  if (!result.ok()) failures_.fetch_add(1, std::memory_order_relaxed);
  return result;
}

}  // namespace kareus::evaluate
