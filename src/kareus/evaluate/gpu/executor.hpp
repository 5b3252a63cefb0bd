// Running a partition on a GPU: the executor owns the device work (tensors, streams, kernels, the
// collective's communicators) and nothing else. It neither sets clocks nor reads energy: the
// measurement protocol that does (profile/measurer.hpp) sits after the runtime in the module order,
// so that this interface, and the CUDA implementation behind it (evaluate/gpu/cuda/), depend on the
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

#include "kareus/workload/partition.hpp"

namespace kareus::evaluate {

class PartitionExecutor {
 public:
  virtual ~PartitionExecutor() = default;

  // For journals and reports, e.g. "cuda:NVIDIA H200 (nccl)" or "fake".
  virtual std::string name() const = 0;
  // SMs of the device: a knob's SMs for the collective must stay below it.
  virtual int sm_count() const = 0;
  // Allocates the tensors and resources `partition` needs; later calls for the same key do
  // nothing. Throws InputError for a partition it cannot run, DeviceError when the device fails.
  virtual void prepare(const workload::Partition& partition) = 0;
  // Runs the prepared partition `repetitions` times back to back under `knob`'s SMs and launch
  // slot (the SM clock is the caller's business), waits until the device is done, and returns the
  // device time the runs took in all (seconds). Throws DeviceError when the device fails.
  virtual double run(const workload::Partition& partition, const workload::Knob& knob,
                     long repetitions) = 0;
};

}  // namespace kareus::evaluate
