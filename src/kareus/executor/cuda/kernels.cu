#include <cuda_bf16.h>

#include "kernels.hpp"

namespace kareus::executor::cuda {
namespace {

using bf16 = __nv_bfloat16;
constexpr int kThreads = 256;

int grid_for(long n) {
  long blocks = (n + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < 65535L * 16 ? (blocks < 1 ? 1 : blocks) : 65535L * 16);
}

__device__ float block_sum(float v, float* shared) {
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  v = threadIdx.x < blockDim.x / 32 ? shared[threadIdx.x] : 0.0f;
  if (warp == 0) {
    for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (lane == 0) shared[0] = v;
  }
  __syncthreads();
  v = shared[0];
  __syncthreads();
  return v;
}

__device__ float block_max(float v, float* shared) {
  for (int o = 16; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  v = threadIdx.x < blockDim.x / 32 ? shared[threadIdx.x] : -INFINITY;
  if (warp == 0) {
    for (int o = 16; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    if (lane == 0) shared[0] = v;
  }
  __syncthreads();
  v = shared[0];
  __syncthreads();
  return v;
}

__global__ void fill_kernel(bf16* data, long n, unsigned seed) {
  for (long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; i < n; i += static_cast<long>(gridDim.x) * blockDim.x) {
    unsigned h = static_cast<unsigned>(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    data[i] = __float2bfloat16(static_cast<float>(h & 0xffffu) / 32768.0f - 1.0f);
  }
}

__global__ void rms_norm_kernel(const bf16* x, const bf16* dy, const bf16* w, bf16* out, long width) {
  __shared__ float shared[32];
  const long row = blockIdx.x;
  const bf16* xr = x + row * width;
  float squares = 0, dot = 0;
  for (long j = threadIdx.x; j < width; j += blockDim.x) {
    const float v = __bfloat162float(xr[j]);
    squares += v * v;
    if (dy != nullptr) dot += __bfloat162float(dy[row * width + j]) * __bfloat162float(w[j]) * v;
  }
  const float inv = rsqrtf(block_sum(squares, shared) / static_cast<float>(width) + 1e-6f);
  if (dy != nullptr) dot = block_sum(dot, shared);
  for (long j = threadIdx.x; j < width; j += blockDim.x) {
    const float v = __bfloat162float(xr[j]), g = __bfloat162float(w[j]);
    float y;
    if (dy == nullptr) {
      y = v * inv * g;
    } else {
      y = __bfloat162float(dy[row * width + j]) * g * inv - v * dot * inv * inv * inv / static_cast<float>(width);
    }
    out[row * width + j] = __float2bfloat16(y);
  }
}

__global__ void rope_kernel(bf16* x, long rows, long width, long positions) {
  const long pairs = rows * (width / 2);
  for (long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; i < pairs; i += static_cast<long>(gridDim.x) * blockDim.x) {
    const long row = i / (width / 2), pair = i % (width / 2);
    const float angle = static_cast<float>(row % positions) * __powf(10000.0f, -2.0f * static_cast<float>(pair) / static_cast<float>(width));
    float s, c;
    __sincosf(angle, &s, &c);
    bf16* p = x + row * width + 2 * pair;
    const float a = __bfloat162float(p[0]), b = __bfloat162float(p[1]);
    p[0] = __float2bfloat16(a * c - b * s);
    p[1] = __float2bfloat16(a * s + b * c);
  }
}

__global__ void swiglu_kernel(const bf16* in, const bf16* dy, bf16* out, long rows, long width) {
  const long n = rows * width;
  for (long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; i < n; i += static_cast<long>(gridDim.x) * blockDim.x) {
    const long row = i / width, j = i % width;
    const float g = __bfloat162float(in[row * 2 * width + j]), u = __bfloat162float(in[row * 2 * width + width + j]);
    const float sig = 1.0f / (1.0f + __expf(-g)), silu = g * sig;
    if (dy == nullptr) {
      out[i] = __float2bfloat16(silu * u);
    } else {
      const float d = __bfloat162float(dy[i]);
      out[row * 2 * width + j] = __float2bfloat16(d * u * (sig + silu * (1.0f - sig)));
      out[row * 2 * width + width + j] = __float2bfloat16(d * silu);
    }
  }
}

__global__ void add_kernel(const bf16* a, const bf16* b, bf16* c, long n) {
  for (long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; i < n; i += static_cast<long>(gridDim.x) * blockDim.x) {
    c[i] = __float2bfloat16(__bfloat162float(a[i]) + __bfloat162float(b[i]));
  }
}

__global__ void dropout_add_kernel(const bf16* a, const bf16* b, std::uint8_t* mask, bf16* c, long n, float keep,
                                   bool backward) {
  for (long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; i < n; i += static_cast<long>(gridDim.x) * blockDim.x) {
    std::uint8_t m;
    if (backward) {
      m = mask[i];
    } else {
      unsigned h = static_cast<unsigned>(i) * 2654435761u;
      h ^= h >> 15;
      h *= 2246822519u;
      h ^= h >> 13;
      m = static_cast<float>(h & 0xffffffu) < keep * 16777216.0f;
      mask[i] = m;
    }
    const float scale = m ? 1.0f / keep : 0.0f;
    c[i] = __float2bfloat16(__bfloat162float(a[i]) + scale * __bfloat162float(b[i]));
  }
}

__global__ void stream_kernel(const bf16* in, bf16* out, long n) {
  for (long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; i < n; i += static_cast<long>(gridDim.x) * blockDim.x) {
    out[i] = in[i];
  }
}

__global__ void causal_softmax_kernel(bf16* scores, long columns, long keys, long batch_stride, long first_query,
                                      long keys_per_query, float scale) {
  __shared__ float shared[32];
  const long batch = blockIdx.x / columns, column = blockIdx.x % columns;
  bf16* s = scores + batch * batch_stride + column * keys;
  long visible = (first_query + column + 1) * keys_per_query;
  visible = visible < keys ? visible : keys;
  float m = -INFINITY;
  for (long j = threadIdx.x; j < visible; j += blockDim.x) m = fmaxf(m, scale * __bfloat162float(s[j]));
  m = block_max(m, shared);
  float z = 0;
  for (long j = threadIdx.x; j < visible; j += blockDim.x) z += __expf(scale * __bfloat162float(s[j]) - m);
  const float inv = 1.0f / block_sum(z, shared);
  for (long j = threadIdx.x; j < keys; j += blockDim.x) {
    s[j] = __float2bfloat16(j < visible ? __expf(scale * __bfloat162float(s[j]) - m) * inv : 0.0f);
  }
}

__global__ void softmax_backward_kernel(bf16* dp, const bf16* p, long columns, long keys, long batch_stride) {
  __shared__ float shared[32];
  const long offset = (blockIdx.x / columns) * batch_stride + (blockIdx.x % columns) * keys;
  float dot = 0;
  for (long j = threadIdx.x; j < keys; j += blockDim.x) {
    dot += __bfloat162float(p[offset + j]) * __bfloat162float(dp[offset + j]);
  }
  dot = block_sum(dot, shared);
  for (long j = threadIdx.x; j < keys; j += blockDim.x) {
    const float pj = __bfloat162float(p[offset + j]);
    dp[offset + j] = __float2bfloat16(pj * (__bfloat162float(dp[offset + j]) - dot));
  }
}

__global__ void copy_kernel(const uint4* src, uint4* dst, long n) {
  for (long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; i < n; i += static_cast<long>(gridDim.x) * blockDim.x) {
    dst[i] = src[i];
  }
}

}  // namespace

void fill_random_bf16(void* data, long elements, std::uint32_t seed, cudaStream_t stream) {
  fill_kernel<<<grid_for(elements), kThreads, 0, stream>>>(static_cast<bf16*>(data), elements, seed);
}

void rms_norm(const void* x, const void* dy, const void* w, void* out, long rows, long width, cudaStream_t stream) {
  rms_norm_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(
      static_cast<const bf16*>(x), static_cast<const bf16*>(dy), static_cast<const bf16*>(w), static_cast<bf16*>(out),
      width);
}

void rope(void* x, long rows, long width, long positions, cudaStream_t stream) {
  rope_kernel<<<grid_for(rows * width / 2), kThreads, 0, stream>>>(static_cast<bf16*>(x), rows, width, positions);
}

void swiglu(const void* in, const void* dy, void* out, long rows, long width, cudaStream_t stream) {
  swiglu_kernel<<<grid_for(rows * width), kThreads, 0, stream>>>(static_cast<const bf16*>(in),
                                                                  static_cast<const bf16*>(dy),
                                                                  static_cast<bf16*>(out), rows, width);
}

void add(const void* a, const void* b, void* c, long elements, cudaStream_t stream) {
  add_kernel<<<grid_for(elements), kThreads, 0, stream>>>(static_cast<const bf16*>(a), static_cast<const bf16*>(b),
                                                          static_cast<bf16*>(c), elements);
}

void dropout_add(const void* a, const void* b, std::uint8_t* mask, void* c, long elements, float keep, bool backward,
                 cudaStream_t stream) {
  dropout_add_kernel<<<grid_for(elements), kThreads, 0, stream>>>(static_cast<const bf16*>(a),
                                                                  static_cast<const bf16*>(b), mask,
                                                                  static_cast<bf16*>(c), elements, keep, backward);
}

void stream_copy(const void* in, void* out, long elements, cudaStream_t stream) {
  stream_kernel<<<grid_for(elements), kThreads, 0, stream>>>(static_cast<const bf16*>(in), static_cast<bf16*>(out),
                                                             elements);
}

void causal_softmax(void* scores, long batches, long columns, long keys, long batch_stride, long first_query,
                    long keys_per_query, float scale, cudaStream_t stream) {
  causal_softmax_kernel<<<static_cast<unsigned>(batches * columns), kThreads, 0, stream>>>(
      static_cast<bf16*>(scores), columns, keys, batch_stride, first_query, keys_per_query, scale);
}

void softmax_backward(void* dp, const void* p, long batches, long columns, long keys, long batch_stride,
                      cudaStream_t stream) {
  softmax_backward_kernel<<<static_cast<unsigned>(batches * columns), kThreads, 0, stream>>>(
      static_cast<bf16*>(dp), static_cast<const bf16*>(p), columns, keys, batch_stride);
}

void copy_on_sms(const void* src, void* dst, long bytes, int blocks, cudaStream_t stream) {
  copy_kernel<<<static_cast<unsigned>(blocks), 1024, 0, stream>>>(static_cast<const uint4*>(src),
                                                                  static_cast<uint4*>(dst), bytes / 16);
}

}  // namespace kareus::executor::cuda
