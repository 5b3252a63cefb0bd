// A profiling session whose rank fails a measurement while other ranks wait: the run ends
// (Group::abort), and this rank's clocks are reset before it does, since MPI_Abort ends the process
// without the exit handlers that would otherwise reset them.
#include "kareus/profile/session.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "kareus/hardware/gpu.hpp"
#include "kareus/profile/fake_executor.hpp"
#include "kareus/profile/measurer.hpp"
#include "kareus/runtime/energy_monitor.hpp"
#include "kareus/runtime/fake_gpu.hpp"
#include "kareus/runtime/frequency_controller.hpp"
#include "kareus/workload/model.hpp"

namespace kareus::profile {
namespace {

struct Aborted {
  int exit_code;
};

// Rank 0 of two, whose peer agrees with everything; abort() throws instead of ending the process.
class TwoRanks final : public Group {
 public:
  int rank() const override { return 0; }
  int size() const override { return 2; }
  void broadcast(std::string&) override {}
  std::vector<double> gather(const std::vector<double>& values) override {
    std::vector<double> all = values;
    all.insert(all.end(), values.begin(), values.end());
    return all;
  }
  std::pair<std::int64_t, std::int64_t> min_max(std::int64_t value) override {
    return {value, value};
  }
  void barrier() override {}
  std::unique_ptr<Group> split(int, int) override { return std::make_unique<LocalGroup>(); }
  [[noreturn]] void abort(int exit_code) override { throw Aborted{exit_code}; }
};

TEST(ProfileSession, AFailingRankResetsItsClocksBeforeEndingTheRun) {
  const hardware::GpuSpec gpu = hardware::load_gpu_preset("a100-sxm4-40gb");
  auto time = std::make_shared<runtime::ManualTimeSource>();
  runtime::FakeGpuConfig config = runtime::make_fake_gpu_config(gpu, 0, time);
  // The second energy reading (the end of the first knob's window) times out.
  config.faults = {runtime::parse_gpu_fault("total_energy@2:error=10")};
  auto device = std::make_shared<runtime::FakeGpu>(config);
  TwoRanks world;
  FakeExecutor executor{gpu, device, time, nullptr};
  runtime::FrequencyController controller{{device}, {.reset_on_signals = false}};
  runtime::EnergyMonitor monitor{{device}, {.time = time}};
  Measurer measurer(world, executor, controller, monitor,
                    {.warmup_s = 0, .window_s = 1, .cool_down_s = 0, .idle = [time](double s) {
                       time->advance_s(s);
                     }});
  workload::ModelSpec model = workload::load_model("llama-3.2-3b");
  workload::ParallelConfig parallel;
  parallel.tp = 8;
  const auto partitions = workload::build_partitions(model, workload::validated(model, parallel));
  ProfileSession session(world, partitions, measurer, gpu, "fake", nlohmann::json::object());
  const workload::Partition& p = workload::find_partition(partitions, "fwd_mlp");
  try {
    session.measure(p, {1005, 12, p.slots.front().name});
    FAIL() << "the failed measurement did not end the run";
  } catch (const Aborted& a) {
    EXPECT_EQ(a.exit_code, 3);
  }
  // Before the fix the clock stayed locked at 1005 MHz and the memory clock at its maximum.
  EXPECT_EQ(device->locked_sm_clocks_mhz(), std::nullopt);
  EXPECT_EQ(device->locked_memory_clock_mhz(), std::nullopt);
  EXPECT_TRUE(controller.halted());
  session.finish();
}

}  // namespace
}  // namespace kareus::profile
