#include "kareus/workload/stage_transfer.hpp"

#include "kareus/workload/ops.hpp"

namespace kareus::workload {

double stage_transfer_bytes(const ModelSpec& model, const ParallelConfig& parallel) {
  const double tokens = static_cast<double>(parallel.microbatch_size) * parallel.seq_len / parallel.cp;
  return tokens * static_cast<double>(model.hidden_size) * kBytesPerElement;
}

}  // namespace kareus::workload
