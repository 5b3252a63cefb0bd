// What one pipeline stage sends the next per microbatch: the activation a forward hands on, and the
// equally sized input gradient a backward hands back.
//
// Thread-safety: pure functions on values.
// Example:
//   double bytes = stage_transfer_bytes(model, parallel);  // per GPU, per microbatch
#pragma once

#include "kareus/workload/model.hpp"
#include "kareus/workload/parallel.hpp"

namespace kareus::workload {

// Bytes each GPU of a stage sends to its peer in the next (forward) or previous (backward) stage
// per microbatch: the hidden states mbs × seq/CP × hidden in bf16, whole on every TP rank.
// Megatron-Core's pipeline schedules send (seq/CP, mbs, hidden) per rank and divide by TP only
// under sequence parallelism, which Kareus's jobs do not run (NVIDIA/Megatron-LM
// megatron/core/pipeline_parallel/schedules.py, get_tensor_shapes; legacy Megatron-LM's
// scatter-gather of pipeline tensors, 1/TP per rank, is gone there). `parallel` must be validated.
double stage_transfer_bytes(const ModelSpec& model, const ParallelConfig& parallel);

}  // namespace kareus::workload
