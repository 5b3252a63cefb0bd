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
// per microbatch: the hidden states mbs × seq/CP × hidden in bf16, split over the TP ranks (as
// Megatron-LM's scatter-gather of pipeline tensors sends them; each rank sends its 1/TP and the
// receivers all-gather). `parallel` must be validated.
double stage_transfer_bytes(const ModelSpec& model, const ParallelConfig& parallel);

}  // namespace kareus::workload
