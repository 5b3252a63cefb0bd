// The executor's own CUDA kernels (kernels.cu): the memory-bound ops of a transformer layer in
// bf16, the causal softmax and its backward for the attention, a fill with random values (so that
// the tensor cores switch real bits, as power depends on the data), and the copy kernel that
// stands in for a collective on one GPU. Each launch returns at once; errors surface at the next
// synchronisation or cudaGetLastError.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace kareus::executor::cuda {

// Uniform values in [-1, 1) from a counter-based hash of (seed, index).
void fill_random_bf16(void* data, long elements, std::uint32_t seed, cudaStream_t stream);

// y = x / rms(x) * w per row; backward: dx from x, dy and w (dy == nullptr forward).
void rms_norm(const void* x, const void* dy, const void* w, void* out, long rows, long width, cudaStream_t stream);
// Rotates each row's element pairs in place by an angle of the row's position and the pair.
void rope(void* x, long rows, long width, long positions, cudaStream_t stream);
// Forward: out[r, j] = silu(in[r, j]) * in[r, width + j]. Backward (dy != nullptr): out is
// d[gate, up], [rows, 2 width].
void swiglu(const void* in, const void* dy, void* out, long rows, long width, cudaStream_t stream);
void add(const void* a, const void* b, void* c, long elements, cudaStream_t stream);
// Megatron's bias-dropout-add with dropout probability 1 - keep: c = a + mask · b / keep, one byte
// of mask per element. Forward draws the mask from a counter hash and writes it; backward reads it.
void dropout_add(const void* a, const void* b, std::uint8_t* mask, void* c, long elements, float keep, bool backward,
                 cudaStream_t stream);
// out = in, element by element (the streaming half of embedding and cross-entropy).
void stream_copy(const void* in, void* out, long elements, cudaStream_t stream);

// Scores of `batches` x `columns` queries, each column `keys` long and contiguous (columns
// `keys` apart, batches `batch_stride` elements apart): softmax of scale * s over the keys a causal
// query may see, in place, zero for the rest. Query r of a batch sits at position first_query + r
// and sees keys below (first_query + r + 1) * keys_per_query.
void causal_softmax(void* scores, long batches, long columns, long keys, long batch_stride, long first_query,
                    long keys_per_query, float scale, cudaStream_t stream);
// dS = P * (dP - sum(P * dP)) per column, in place in dp (same layout as causal_softmax).
void softmax_backward(void* dp, const void* p, long batches, long columns, long keys, long batch_stride,
                      cudaStream_t stream);

// Copies `bytes` (a multiple of 16) from src to dst with exactly `blocks` thread blocks: a
// collective's SM and HBM footprint without its peers.
void copy_on_sms(const void* src, void* dst, long bytes, int blocks, cudaStream_t stream);

}  // namespace kareus::executor::cuda
