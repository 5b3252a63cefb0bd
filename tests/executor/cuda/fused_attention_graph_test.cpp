// cuDNN's fused attention graph, built without a device: every tensor and operation of the
// forward and backward SDPA graph is finalized by cuDNN itself (a wrong attribute, type or shape
// is its BAD_PARAM), for the attention shapes the job's partitions really have. Where a GPU is at
// hand, the graphs run on small random tensors against a causal attention computed here in fp32
// (forward: O and the stats; backward: dQ, dK, dV); without one those tests skip.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kareus/executor/cuda/fused_attention.hpp"
#include "kareus/executor/op_shapes.hpp"
#include "kareus/workload/model.hpp"

namespace kareus::executor::cuda {
namespace {

constexpr const char* kBuilt = "no cuDNN handle";

std::vector<AttentionShape> attention_shapes(int tp, int cp) {
  const workload::ModelSpec model = workload::load_model("llama-3.2-3b");
  workload::ParallelConfig parallel;
  parallel.tp = tp;
  parallel.cp = cp;
  parallel.seq_len = 8192;
  parallel = workload::validated(model, parallel);
  std::vector<AttentionShape> out;
  for (const auto& p : workload::build_partitions(model, parallel)) {
    for (const OpShape& s : op_shapes(model, parallel, p)) {
      if (const auto* a = std::get_if<AttentionShape>(&s)) out.push_back(*a);
    }
  }
  return out;
}

TEST(FusedAttentionGraph, CudnnTakesEveryOperationWithKvPerQueryHead) {
  for (const auto& [tp, cp] : {std::pair{8, 1}, std::pair{4, 2}, std::pair{2, 1}}) {
    const auto shapes = attention_shapes(tp, cp);
    int backward = 0;
    for (const AttentionShape& a : shapes) backward += a.backward;
    ASSERT_GT(backward, 0);
    ASSERT_LT(backward, static_cast<int>(shapes.size())) << "forward and backward attention";
    for (const AttentionShape& a : shapes) {
      std::string why;
      const FusedAttentionShape shape{a.batch, a.q_heads, a.q_heads, a.q_len, a.head_dim, a.backward};
      EXPECT_EQ(FusedAttention::make(nullptr, shape, why), nullptr);
      EXPECT_EQ(why.rfind(kBuilt, 0), 0u) << "TP " << tp << " CP " << cp << (a.backward ? " backward: " : " forward: ")
                                          << why;
    }
  }
}

TEST(FusedAttentionGraph, GqaIsBuiltOrRefusedWithAReasonNeverThrown) {
  for (const AttentionShape& a : attention_shapes(8, 1)) {
    ASSERT_LT(a.kv_heads, a.q_heads);
    std::string why;
    const FusedAttentionShape shape{a.batch, a.q_heads, a.kv_heads, a.q_len, a.head_dim, a.backward};
    EXPECT_NO_THROW(EXPECT_EQ(FusedAttention::make(nullptr, shape, why), nullptr));
    EXPECT_FALSE(why.empty());
    // The forward's GQA matmuls broadcast no batch dimension cuDNN rejects outright.
    if (!a.backward) {
      EXPECT_EQ(why.rfind(kBuilt, 0), 0u) << why;
    }
  }
}

std::uint16_t to_bf16(float x) {
  std::uint32_t u = 0;
  std::memcpy(&u, &x, 4);
  u += 0x7FFFu + ((u >> 16) & 1u);  // round to nearest even
  return static_cast<std::uint16_t>(u >> 16);
}
float from_bf16(std::uint16_t b) {
  const std::uint32_t u = static_cast<std::uint32_t>(b) << 16;
  float x = 0;
  std::memcpy(&x, &u, 4);
  return x;
}

// A device tensor of bf16 (or fp32 when `fp32`) holding `host`, rounded as the device holds it.
struct DeviceTensor {
  void* data = nullptr;
  std::size_t elements = 0;
  bool fp32 = false;
  DeviceTensor(std::vector<float>& host, bool is_fp32) : elements(host.size()), fp32(is_fp32) {
    EXPECT_EQ(cudaMalloc(&data, elements * (fp32 ? 4 : 2)), cudaSuccess);
    if (fp32) {
      EXPECT_EQ(cudaMemcpy(data, host.data(), elements * 4, cudaMemcpyHostToDevice), cudaSuccess);
      return;
    }
    std::vector<std::uint16_t> b(elements);
    for (std::size_t i = 0; i < elements; ++i) {
      b[i] = to_bf16(host[i]);
      host[i] = from_bf16(b[i]);
    }
    EXPECT_EQ(cudaMemcpy(data, b.data(), elements * 2, cudaMemcpyHostToDevice), cudaSuccess);
  }
  ~DeviceTensor() { cudaFree(data); }
  DeviceTensor(const DeviceTensor&) = delete;
  DeviceTensor& operator=(const DeviceTensor&) = delete;
  std::vector<float> read() const {
    std::vector<float> out(elements);
    if (fp32) {
      EXPECT_EQ(cudaMemcpy(out.data(), data, elements * 4, cudaMemcpyDeviceToHost), cudaSuccess);
      return out;
    }
    std::vector<std::uint16_t> b(elements);
    EXPECT_EQ(cudaMemcpy(b.data(), data, elements * 2, cudaMemcpyDeviceToHost), cudaSuccess);
    for (std::size_t i = 0; i < elements; ++i) out[i] = from_bf16(b[i]);
    return out;
  }
};

// Causal attention in fp32 on [heads, len, d] tensors, GQA by head groups.
struct Reference {
  long hq, hk, len, d;
  float scale;
  std::size_t q(long h, long i, long c) const { return static_cast<std::size_t>((h * len + i) * d + c); }
  std::size_t kv(long h, long j, long c) const { return static_cast<std::size_t>(((h / (hq / hk)) * len + j) * d + c); }
  // P[h][i][j] for j <= i, and the stats max + log Σ exp.
  void probabilities(const std::vector<float>& Q, const std::vector<float>& K, std::vector<float>& P,
                     std::vector<float>& stats) const {
    P.assign(static_cast<std::size_t>(hq * len * len), 0);
    stats.assign(static_cast<std::size_t>(hq * len), 0);
    for (long h = 0; h < hq; ++h) {
      for (long i = 0; i < len; ++i) {
        std::vector<float> s(static_cast<std::size_t>(i + 1));
        for (long j = 0; j <= i; ++j) {
          float dot = 0;
          for (long c = 0; c < d; ++c) dot += Q[q(h, i, c)] * K[kv(h, j, c)];
          s[static_cast<std::size_t>(j)] = dot * scale;
        }
        const float m = *std::max_element(s.begin(), s.end());
        float z = 0;
        for (float v : s) z += std::exp(v - m);
        for (long j = 0; j <= i; ++j) {
          P[static_cast<std::size_t>((h * len + i) * len + j)] = std::exp(s[static_cast<std::size_t>(j)] - m) / z;
        }
        stats[static_cast<std::size_t>(h * len + i)] = m + std::log(z);
      }
    }
  }
};

std::vector<float> random_values(std::size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

class FusedAttentionGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) GTEST_SKIP() << "no GPU on this machine";
    ASSERT_EQ(cudnnCreate(&handle_), CUDNN_STATUS_SUCCESS);
  }
  void TearDown() override {
    if (handle_ != nullptr) cudnnDestroy(handle_);
  }
  // As the executor makes it: GQA first, else K/V per query head.
  std::unique_ptr<FusedAttention> make(FusedAttentionShape& shape) {
    std::string why;
    auto fa = FusedAttention::make(handle_, shape, why);
    if (!fa) {
      shape.kv_heads = shape.q_heads;
      fa = FusedAttention::make(handle_, shape, why);
    }
    EXPECT_TRUE(fa) << why;
    return fa;
  }
  cudnnHandle_t handle_ = nullptr;
};

TEST_F(FusedAttentionGpu, ForwardAndBackwardMatchACausalReference) {
  std::mt19937 rng(7);
  FusedAttentionShape fwd{1, 4, 2, 128, 64, false};
  auto forward = make(fwd);
  ASSERT_TRUE(forward);
  FusedAttentionShape bwd{1, 4, fwd.kv_heads, 128, 64, true};
  auto backward = make(bwd);
  ASSERT_TRUE(backward);
  ASSERT_EQ(bwd.kv_heads, fwd.kv_heads) << "run both on the same K/V heads";
  const long hq = fwd.q_heads, hk = fwd.kv_heads, len = fwd.len, d = fwd.head_dim;
  const Reference ref{hq, hk, len, d, 1.0f / std::sqrt(static_cast<float>(d))};
  const auto qn = static_cast<std::size_t>(hq * len * d), kn = static_cast<std::size_t>(hk * len * d);
  std::vector<float> hQ = random_values(qn, rng), hK = random_values(kn, rng), hV = random_values(kn, rng);
  std::vector<float> hO(qn), hStats(static_cast<std::size_t>(hq * len)), hdO = random_values(qn, rng);
  std::vector<float> hdQ(qn), hdK(kn), hdV(kn), hSum(static_cast<std::size_t>(hq * len));
  DeviceTensor Q(hQ, false), K(hK, false), V(hV, false), O(hO, false), stats(hStats, true), dO(hdO, false),
      dQ(hdQ, false), dK(hdK, false), dV(hdV, false), sum(hSum, true);
  void* workspace = nullptr;
  ASSERT_EQ(cudaMalloc(&workspace, std::max<std::size_t>({forward->workspace_bytes(), backward->workspace_bytes(), 16})),
            cudaSuccess);
  forward->run(forward->bind({Q.data, K.data, V.data, O.data, stats.data}, workspace), nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);

  std::vector<float> P, want_stats;
  ref.probabilities(hQ, hK, P, want_stats);
  std::vector<float> want_o(qn, 0);
  for (long h = 0; h < hq; ++h) {
    for (long i = 0; i < len; ++i) {
      for (long j = 0; j <= i; ++j) {
        const float p = P[static_cast<std::size_t>((h * len + i) * len + j)];
        for (long c = 0; c < d; ++c) want_o[ref.q(h, i, c)] += p * hV[ref.kv(h, j, c)];
      }
    }
  }
  const std::vector<float> got_o = O.read();
  EXPECT_LT(max_abs_diff(got_o, want_o), 2e-2f);
  EXPECT_LT(max_abs_diff(stats.read(), want_stats), 2e-2f);

  // Backward from the device's O and stats.
  backward->run(backward->bind({Q.data, K.data, V.data, O.data, stats.data, dO.data, dQ.data, dK.data, dV.data,
                                sum.data},
                               workspace),
                nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<float> want_dq(qn, 0), want_dk(kn, 0), want_dv(kn, 0);
  for (long h = 0; h < hq; ++h) {
    for (long i = 0; i < len; ++i) {
      float D = 0;
      for (long c = 0; c < d; ++c) D += hdO[ref.q(h, i, c)] * got_o[ref.q(h, i, c)];
      for (long j = 0; j <= i; ++j) {
        const float p = P[static_cast<std::size_t>((h * len + i) * len + j)];
        float dp = 0;
        for (long c = 0; c < d; ++c) dp += hdO[ref.q(h, i, c)] * hV[ref.kv(h, j, c)];
        const float ds = p * (dp - D) * ref.scale;
        for (long c = 0; c < d; ++c) {
          want_dv[ref.kv(h, j, c)] += p * hdO[ref.q(h, i, c)];
          want_dq[ref.q(h, i, c)] += ds * hK[ref.kv(h, j, c)];
          want_dk[ref.kv(h, j, c)] += ds * hQ[ref.q(h, i, c)];
        }
      }
    }
  }
  EXPECT_LT(max_abs_diff(dV.read(), want_dv), 5e-2f);
  EXPECT_LT(max_abs_diff(dQ.read(), want_dq), 5e-2f);
  EXPECT_LT(max_abs_diff(dK.read(), want_dk), 5e-2f);
  cudaFree(workspace);
}

}  // namespace
}  // namespace kareus::executor::cuda
