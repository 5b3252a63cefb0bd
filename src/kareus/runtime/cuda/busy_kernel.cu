#include "busy_kernel.hpp"

#include <cuda_runtime.h>

namespace kareus::runtime::cuda_check {
namespace {

constexpr int kThreads = 256;
constexpr int kBlocksPerSm = 8;
constexpr int kIterations = 1 << 14;

int g_blocks = 0;
float* g_sink = nullptr;
cudaEvent_t g_start = nullptr, g_stop = nullptr;

// Four independent FMA chains per thread keep the FP32 pipes busy; the result is written only
// when impossible so that the compiler cannot drop the loop.
__global__ void busy(float* sink, int iterations) {
  float a = threadIdx.x * 1e-7f, b = 1.0f, c = 0.5f, d = 0.25f;
  const float x = 0.999999f, y = 1e-7f;
  for (int i = 0; i < iterations; ++i) {
    a = fmaf(a, x, y);
    b = fmaf(b, x, y);
    c = fmaf(c, x, y);
    d = fmaf(d, x, y);
  }
  if (a + b + c + d == -1.0f) sink[blockIdx.x] = a;
}

std::string check(cudaError_t status, const char* what) {
  if (status == cudaSuccess) return {};
  return std::string(what) + ": " + cudaGetErrorString(status);
}

}  // namespace

std::string busy_init(int cuda_device, int* sm_count) {
  if (auto e = check(cudaSetDevice(cuda_device), "cudaSetDevice"); !e.empty()) return e;
  cudaDeviceProp props{};
  if (auto e = check(cudaGetDeviceProperties(&props, cuda_device), "cudaGetDeviceProperties"); !e.empty()) {
    return e;
  }
  *sm_count = props.multiProcessorCount;
  g_blocks = props.multiProcessorCount * kBlocksPerSm;
  if (auto e = check(cudaMalloc(&g_sink, sizeof(float) * g_blocks), "cudaMalloc"); !e.empty()) return e;
  if (auto e = check(cudaEventCreate(&g_start), "cudaEventCreate"); !e.empty()) return e;
  return check(cudaEventCreate(&g_stop), "cudaEventCreate");
}

std::string busy_start(long launches) {
  if (auto e = check(cudaEventRecord(g_start), "cudaEventRecord"); !e.empty()) return e;
  for (long k = 0; k < launches; ++k) busy<<<g_blocks, kThreads>>>(g_sink, kIterations);
  if (auto e = check(cudaGetLastError(), "kernel launch"); !e.empty()) return e;
  return check(cudaEventRecord(g_stop), "cudaEventRecord");
}

std::string busy_wait(double* elapsed_s) {
  if (auto e = check(cudaEventSynchronize(g_stop), "cudaEventSynchronize"); !e.empty()) return e;
  float ms = 0;
  if (auto e = check(cudaEventElapsedTime(&ms, g_start, g_stop), "cudaEventElapsedTime"); !e.empty()) {
    return e;
  }
  *elapsed_s = ms / 1000.0;
  return {};
}

}  // namespace kareus::runtime::cuda_check
