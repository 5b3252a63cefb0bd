// A fake GPU executor for tests and demos of the profiler without a GPU: a "run" of a partition
// takes what the simulated GPU model says it takes at the clock the fake device is really at (so a
// clock the protocol failed to lock shows in the result), moves the fake's hand-driven clock by
// that time with the fake device's load set to draw the model's mean power, and stands in for the
// collective with a check over the partition's real group of ranks that every member runs the
// same partition, knob and count (a rank out of step is a DeviceError, as a mismatched NCCL call
// would hang). It measures nothing; outputs that use it must say "simulated".
//
// Thread-safety: one thread.
// Example:
//   auto time = std::make_shared<runtime::ManualTimeSource>();
//   auto gpu = std::make_shared<runtime::FakeGpu>(runtime::make_fake_gpu_config(spec, 0, time));
//   FakeExecutor exec(spec, gpu, time, &groups, {});
//   double s = exec.run(partition, knob, 10);   // 10 runs' simulated time; `time` moved by s
#pragma once

#include <map>
#include <memory>
#include <string>

#include "kareus/executor/executor.hpp"
#include "kareus/evaluate/noisy.hpp"
#include "kareus/evaluate/simulated.hpp"
#include "kareus/profile/group.hpp"
#include "kareus/runtime/fake_gpu.hpp"
#include "kareus/runtime/time_source.hpp"

namespace kareus::profile {

struct FakeExecutorOptions {
  double slowdown = 1.0;  // this rank runs this many times slower than the model (max-over-ranks tests)
  // Seeded noise on the model's time and energy per knob, as evaluate/noisy.hpp gives the simulated
  // GPU (the device draws the noisy energy over the noisy time).
  evaluate::NoiseOptions noise;
};

class FakeExecutor final : public executor::PartitionExecutor {
 public:
  // `groups` may be null: no peers to keep in step with. Throws InputError on a slowdown <= 0.
  FakeExecutor(hardware::GpuSpec gpu, std::shared_ptr<runtime::FakeGpu> device,
               std::shared_ptr<runtime::ManualTimeSource> time, const CollectiveGroups* groups,
               FakeExecutorOptions options = {});

  std::string name() const override { return "fake"; }
  int sm_count() const override { return gpu_.sms; }
  void prepare(const workload::Partition& partition) override;
  double run(const workload::Partition& partition, const workload::Knob& knob, long repetitions) override;
  // The receiver's device draws what the model says a GPU blocked on P2P draws (static power:
  // load 0) while its clock moves by the sender's idle; the sender idles as long.
  double p2p_wait(executor::P2pRole role, int receiver, int sender, double delay_s) override;

  // Times prepare() allocated for `key` (once, however often it is called).
  int allocations(const std::string& key) const;
  long runs() const { return runs_; }  // run() calls

 private:
  hardware::GpuSpec gpu_;
  evaluate::SimulatedEvaluator model_;
  std::shared_ptr<runtime::FakeGpu> device_;
  std::shared_ptr<runtime::ManualTimeSource> time_;
  const CollectiveGroups* groups_;
  FakeExecutorOptions options_;
  std::map<std::string, int> allocations_;
  long runs_ = 0;
};

}  // namespace kareus::profile
