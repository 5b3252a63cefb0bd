// The partition executor on an NVIDIA GPU (built only where CMake finds the CUDA toolkit with
// cuBLASLt, cuDNN and NCCL; the interface is plain C++ so that callers compile without it).
//
// From the partition's ops and the shapes they have on one rank (op_shapes.hpp) it allocates the
// tensors once per partition key, then a run is:
//   - compute on a compute stream: GEMMs through cuBLASLt in bf16 (fp32 accumulation) with the
//     partition's shapes (backward: the input-gradient and the weight-gradient GEMM), attention
//     forward and backward through cuDNN's fused flash attention (SDPA, causal, GQA) built with the
//     cuDNN graph backend API (fused_attention.hpp; no cudnn-frontend header ships with the
//     toolkit), RMSNorm, RoPE, SwiGLU and residual adds as our own kernels. Where cuDNN has no
//     execution plan for the attention graph (or the build has no cuDNN), attention runs as
//     chunked cuBLASLt GEMMs with our softmax (9/8 of the causal FLOPs, scores through HBM),
//     warned on stderr and named in details();
//   - the collective on a side stream: an NCCL all-reduce / all-gather / reduce-scatter of the
//     partition's bytes on a communicator made with ncclConfig_t minCTAs = maxCTAs = the knob's
//     SMs (one communicator per group and SM level, created on first use and kept), launched after
//     an event recorded on the compute stream just before the slot's first op and joined at the
//     partition's end; the sequential knob runs it after the compute. With the copy backend (one
//     GPU standing in for its group) the collective is an on-device copy kernel with the knob's SMs
//     moving the bytes the ring would move through this GPU: the SM stealing and HBM traffic that
//     interact with the compute.
//
// P_static (p2p_wait): the receiver's compute stream waits in an ncclRecv from the sender, which
// sleeps on the host, then ncclSends, on a communicator of the whole world made on first use.
//
// NCCL is bootstrapped as nccl-tests does it: the group's first member makes the unique id and
// the caller's broadcast hands it to the others.
//
// Thread-safety: one thread.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "kareus/executor/executor.hpp"
#include "kareus/workload/model.hpp"
#include "kareus/workload/parallel.hpp"

namespace kareus::executor {

// This rank's place in a collective's group, and how to share bytes with it.
struct CudaCollectivePeers {
  int rank = 0;
  int size = 1;
  // Every member's `bytes` becomes the first member's.
  std::function<void(std::string& bytes)> broadcast;
};

enum class CollectiveBackend { kNccl, kCopy };

struct CudaExecutorOptions {
  int cuda_device = 0;
  CollectiveBackend collective = CollectiveBackend::kNccl;
  workload::ModelSpec model;
  workload::ParallelConfig parallel;  // validated
  // The TP or CP group of this rank (kNccl only).
  std::function<CudaCollectivePeers(workload::ParallelGroup)> peers;
  // Every rank of the run: P_static's point-to-point wait (p2p_wait) runs on a communicator of them.
  std::function<CudaCollectivePeers()> world;
};

// Throws DeviceError when the device, cuBLASLt, cuDNN or NCCL cannot be set up.
std::unique_ptr<PartitionExecutor> make_cuda_executor(CudaExecutorOptions options);

}  // namespace kareus::executor
