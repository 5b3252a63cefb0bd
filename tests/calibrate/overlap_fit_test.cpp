// The overlap fit against its one reference: measurements a board with known interference
// factors produced. Whatever the factors (within the fit's box), the fit explains the measured
// ratios and finds the factors; it compares ratios at one clock, so a cluster whose kernels are
// uniformly slower than the model (a time scale) changes nothing.
#include "kareus/calibrate/overlap_fit.hpp"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "kareus/core/error.hpp"
#include "kareus/evaluate/simulated.hpp"
#include "kareus/workload/model.hpp"
#include "kareus/workload/parallel.hpp"

namespace kareus::calibrate {
namespace {

const std::vector<workload::Partition>& tp8_partitions() {
  static const std::vector<workload::Partition> partitions = [] {
    const workload::ModelSpec model = workload::load_model("llama-3.2-3b");
    return workload::build_partitions(model, workload::validated(model, workload::ParallelConfig{}));
  }();
  return partitions;
}

search::Measurement measurement(const workload::Knob& knob, double time_s) {
  search::Measurement m;
  m.knob = knob;
  m.time_s = time_s;
  return m;
}

// Every knob of `keys` at two clocks and two SM levels, sequential ones included, as `board` runs them.
std::vector<MeasuredPartition> measured_on(const hardware::GpuSpec& board, const std::vector<std::string>& keys) {
  const evaluate::SimulatedEvaluator sim(board);
  std::vector<MeasuredPartition> out;
  for (const auto& key : keys) {
    MeasuredPartition m;
    m.partition = workload::find_partition(tp8_partitions(), key);
    for (double f : {1110.0, 1410.0}) {
      m.measurements.push_back(measurement({f, 24, "none"}, sim.evaluate(m.partition, {f, 24, "none"}).time_s));
      for (int sms : {12, 32}) {
        for (const auto& slot : m.partition.slots) {
          const workload::Knob knob{f, sms, slot.name};
          m.measurements.push_back(measurement(knob, sim.evaluate(m.partition, knob).time_s));
        }
      }
    }
    out.push_back(std::move(m));
  }
  return out;
}

hardware::GpuSpec plain_board() {
  hardware::GpuSpec gpu = hardware::load_gpu_preset("a100-sxm4-40gb");
  gpu.time_scale = 1;
  return gpu;
}

RC_GTEST_PROP(OverlapFit, FindsTheFactorsOfTheBoardThatMeasured, ()) {
  hardware::GpuSpec board = plain_board();
  board.overlap_compute_slowdown = *rc::gen::inRange(100, 251) / 100.0;
  board.overlap_collective_slowdown = *rc::gen::inRange(100, 251) / 100.0;
  board.time_scale = *rc::gen::inRange(80, 151) / 100.0;  // cancels in the ratios
  const auto measured = measured_on(board, {"fwd_attn", "fwd_mlp", "bwd_mlp"});
  const OverlapFit fit = fit_overlap(plain_board(), measured);
  std::size_t overlapped = 0;
  for (const auto& m : measured) overlapped += 2 * 2 * m.partition.slots.size();  // clocks x SM levels x slots
  RC_ASSERT(fit.pairs.size() == overlapped);
  RC_ASSERT(fit.err_median_after < 1e-4);
  RC_ASSERT(std::abs(fit.compute_slowdown - board.overlap_compute_slowdown) < 2e-3);
  RC_ASSERT(std::abs(fit.collective_slowdown - board.overlap_collective_slowdown) < 2e-3);
  if (board.overlap_compute_slowdown > 1.05 || board.overlap_collective_slowdown > 1.05) {
    RC_ASSERT(fit.err_median_before > fit.err_median_after);
  }
}

TEST(OverlapFit, NeedsAnOverlappedKnobWithASequentialOneAtItsClock) {
  auto measured = measured_on(plain_board(), {"fwd_mlp"});
  auto& ms = measured.front().measurements;
  // The sequential knob at 1110 MHz only, the overlapped ones at 1410 MHz only.
  std::erase_if(ms, [](const search::Measurement& m) { return m.knob.sequential() != (m.knob.freq_mhz == 1110); });
  EXPECT_THROW(fit_overlap(plain_board(), measured), InputError);
  EXPECT_THROW(read_measured_partitions("/nonexistent-dir-of-a-profile"), InputError);
}

}  // namespace
}  // namespace kareus::calibrate
