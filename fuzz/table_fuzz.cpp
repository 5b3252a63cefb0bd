// Measurement tables (our CSV: freq_mhz, sms, slot, time_s, energy_j[, partition]; `--evaluator
// table:FILE`): read by TableEvaluator::add_file for the default job's fwd_attn, then every knob
// it holds for a partition of that job is answered through the Evaluator's contract.
#include <cstddef>
#include <cstdint>
#include <memory>

#include "fixtures.hpp"
#include "fuzz_support.hpp"
#include "kareus/evaluate/table.hpp"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  kareus::fuzz::quiet_logs();
  kareus::fuzz::default_job();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace kareus;
  const auto path = fuzz::write_input(data, size, "table.csv");
  auto table = std::make_unique<evaluate::TableEvaluator>(fuzz::default_job().gpu);
  if (!fuzz::holds_contract("table.csv", [&] { table->add_file(path, std::string("fwd_attn")); })) return 0;
  const evaluate::Evaluator evaluator(std::move(table));
  for (const workload::Partition& p : fuzz::default_job().partitions) {
    const auto knobs = evaluator.known_knobs(p);
    if (!knobs) fuzz::finding("table", "a table without known knobs");
    for (const workload::Knob& knob : *knobs) {
      fuzz::holds_contract("", [&] {
        const evaluate::EvalResult r = evaluator.evaluate(p, knob);
        if (r.status == evaluate::EvalStatus::kFailed) fuzz::finding("table", "a recorded knob failed: " + r.message);
      });
    }
  }
  return 0;
}
