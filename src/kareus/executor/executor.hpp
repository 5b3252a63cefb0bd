// Running a partition on a GPU: the executor owns the device work (tensors, streams, kernels, the
// collective's communicators) and nothing else. It neither sets clocks nor reads energy: the
// measurement protocol that does (profile/measurer.hpp) sits after the runtime in the module order,
// so that this interface, and the CUDA implementation behind it (executor/cuda/), depend on the
// workload only.
//
// One executor serves one GPU of one rank. A partition's collective spans the ranks of its group
// (TP or CP); an executor reaches its peers only through what it was built with (an NCCL
// communicator bootstrapped by the caller, or a fake), and every rank of a group must make the
// same calls in the same order, as with any collective.
//
// Thread-safety: one thread at a time.
// Example:
//   std::unique_ptr<PartitionExecutor> exec = make_cuda_executor(options);   // or a fake
//   exec->prepare(partition);                       // allocates once per partition key
//   double gpu_s = exec->run(partition, {1410, 16, "linear_0"}, 200);   // 200 runs back to back
#pragma once

#include <string>

#include "kareus/core/error.hpp"
#include "kareus/workload/partition.hpp"

namespace kareus::executor {

// A rank's part in P_static's point-to-point wait.
enum class P2pRole { kReceiver, kSender, kBystander };

class PartitionExecutor {
 public:
  virtual ~PartitionExecutor() = default;

  // For journals and reports, e.g. "cuda:NVIDIA H200 (nccl)" or "fake".
  virtual std::string name() const = 0;
  // SMs of the device: a knob's SMs for the collective must stay below it.
  virtual int sm_count() const = 0;
  // How the partitions prepared so far run where the executor had a choice, for the output's
  // header and the journal's evaluator name (e.g. "attention (fwd_attn): cuDNN fused SDPA", or a
  // fallback and why); empty when there is nothing to say.
  virtual std::string details() const { return {}; }
  // Allocates the tensors and resources `partition` needs; later calls for the same key do
  // nothing. Throws InputError for a partition it cannot run, DeviceError when the device fails.
  virtual void prepare(const workload::Partition& partition) = 0;
  // Runs the prepared partition `repetitions` times back to back under `knob`'s SMs and launch
  // slot (the SM clock is the caller's business), waits until the device is done, and returns the
  // device time the runs took in all (seconds). Throws DeviceError when the device fails.
  virtual double run(const workload::Partition& partition, const workload::Knob& knob,
                     long repetitions) = 0;
  // P_static, the power of a GPU blocked in a P2P receive (a pipeline stage waiting for its peer):
  // the receiver posts a receive from world rank `sender` on its device and returns once it has
  // completed; the sender idles `delay_s`, then sends to world rank `receiver`; bystanders only
  // take part in what every rank must (setting up the channel). Collective call on every rank of
  // the world. Returns the seconds this rank spent in the call. Throws DeviceError when the
  // device fails, InputError where the executor cannot do it.
  virtual double p2p_wait(P2pRole role, int receiver, int sender, double delay_s) {
    (void)role, (void)receiver, (void)sender, (void)delay_s;
    throw InputError("this executor cannot wait in a point-to-point receive");
  }
};

}  // namespace kareus::executor
