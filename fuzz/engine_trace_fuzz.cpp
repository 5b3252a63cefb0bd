// Profiler traces (`hw fit --engine-trace FILE`, Chrome trace JSON): read by fit_engine_trace on the
// artifact's engine; an accepted trace gives an engine file that reads back, fitted costs that
// are finite and non-negative, and as many waits as blocking calls at most, each span counted once.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <fmt/format.h>

#include "fuzz_support.hpp"
#include "kareus/engine/trace_fit.hpp"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  kareus::fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace kareus;
  static const engine::EngineSpec base = engine::load_engine("megatron-te-eager");
  const auto path = fuzz::write_input(data, size, "trace.json");
  engine::TraceFit fit;
  if (!fuzz::holds_contract("trace.json", [&] { fit = engine::fit_engine_trace(base, path); })) return 0;
  if (fit.loop_ops_waiting > fit.loop_ops || fit.layer_ops_waiting > fit.layer_ops) {
    fuzz::finding("trace fit", fmt::format("{} of {} loop ops, {} of {} layer ops waiting", fit.loop_ops_waiting,
                                           fit.loop_ops, fit.layer_ops_waiting, fit.layer_ops));
  }
  std::size_t waits = 0;
  for (const auto& [where, n] : fit.waits) waits += n;
  if (waits > fit.runtime_calls) {
    fuzz::finding("trace fit", fmt::format("{} waits from {} runtime calls", waits, fit.runtime_calls));
  }
  for (const auto& [key, cost] : fit.fitted) {
    if (!(std::isfinite(cost.median_s) && cost.min_s >= 0 && cost.min_s <= cost.median_s && cost.median_s <= cost.max_s)) {
      fuzz::finding("trace fit", fmt::format("{}: median {} outside [{}, {}]", key, cost.median_s, cost.min_s, cost.max_s));
    }
  }
  // What hw fit writes must be an engine file every command takes: its costs back to rounding.
  fuzz::holds_contract("", [&] {
    engine::EngineSpec back = engine::engine_from_json(engine::to_json(fit.engine), "fitted");
    for (const engine::HostCostField& c : engine::host_cost_fields()) {
      const double a = fit.engine.host.*c.member, b = back.host.*c.member;
      if (std::abs(a - b) > 1e-12 * std::abs(a)) {
        fuzz::finding("trace fit", fmt::format("{} reads back as {} from {}", c.key, b, a));
      }
      back.host.*c.member = a;
    }
    if (back != fit.engine) fuzz::finding("trace fit", "the fitted engine does not read back as written");
  });
  return 0;
}
