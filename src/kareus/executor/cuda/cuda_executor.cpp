#include "kareus/executor/cuda/cuda_executor.hpp"

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nccl.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <thread>
#include <utility>
#include <vector>

#include "kareus/core/error.hpp"
#ifdef KAREUS_HAVE_CUDNN
#include "kareus/executor/cuda/fused_attention.hpp"
#endif
#include "kareus/executor/cuda/kernels.hpp"
#include "kareus/executor/op_shapes.hpp"

namespace kareus::executor {
namespace {

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) throw DeviceError(fmt::format("CUDA: {}: {}", what, cudaGetErrorString(status)));
}
void check(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    throw DeviceError(fmt::format("cuBLASLt: {}: {}", what, cublasLtGetStatusString(status)));
  }
}
void check(ncclResult_t status, const char* what) {
  if (status != ncclSuccess) throw DeviceError(fmt::format("NCCL: {}: {}", what, ncclGetErrorString(status)));
}

constexpr std::size_t kWorkspaceBytes = 32u << 20;
constexpr long kAttentionChunks = 8;  // causal attention in query chunks: 9/8 of the causal FLOPs

// Device memory owned for the executor's lifetime.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
    check(cudaMalloc(&data_, bytes_ == 0 ? 16 : bytes_), "cudaMalloc");
  }
  ~DeviceBuffer() { cudaFree(data_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* get() const { return data_; }
  std::size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  std::size_t bytes_;
};

// One bf16 GEMM (fp32 accumulation) in cuBLASLt's column-major terms, C[m x n] = op(A) · op(B),
// optionally strided-batched; descriptors and the heuristic's algorithm are made once.
class LtGemm {
 public:
  struct Spec {
    bool trans_a = false, trans_b = false;
    long m = 0, n = 0, k = 0, lda = 0, ldb = 0, ldc = 0;
    int batch = 1;
    long stride_a = 0, stride_b = 0, stride_c = 0;
    float beta = 0;
  };

  LtGemm(cublasLtHandle_t handle, const Spec& s) : handle_(handle), beta_(s.beta) {
    check(cublasLtMatmulDescCreate(&desc_, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
    const cublasOperation_t ta = s.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, tb = s.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    check(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta), "TRANSA");
    check(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb), "TRANSB");
    a_ = layout(s.trans_a ? s.k : s.m, s.trans_a ? s.m : s.k, s.lda, s.batch, s.stride_a);
    b_ = layout(s.trans_b ? s.n : s.k, s.trans_b ? s.k : s.n, s.ldb, s.batch, s.stride_b);
    c_ = layout(s.m, s.n, s.ldc, s.batch, s.stride_c);
    cublasLtMatmulPreference_t preference = nullptr;
    check(cublasLtMatmulPreferenceCreate(&preference), "cublasLtMatmulPreferenceCreate");
    const std::uint64_t workspace = kWorkspaceBytes;
    check(cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                                               sizeof workspace),
          "MAX_WORKSPACE_BYTES");
    int found = 0;
    const cublasStatus_t status =
        cublasLtMatmulAlgoGetHeuristic(handle_, desc_, a_, b_, c_, c_, preference, 1, &algo_, &found);
    cublasLtMatmulPreferenceDestroy(preference);
    check(status, "cublasLtMatmulAlgoGetHeuristic");
    if (found == 0) {
      throw DeviceError(fmt::format("cuBLASLt has no algorithm for a {}x{}x{} bf16 GEMM", s.m, s.n, s.k));
    }
  }
  ~LtGemm() {
    cublasLtMatrixLayoutDestroy(a_);
    cublasLtMatrixLayoutDestroy(b_);
    cublasLtMatrixLayoutDestroy(c_);
    cublasLtMatmulDescDestroy(desc_);
  }
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;

  void run(const void* a, const void* b, void* c, void* workspace, cudaStream_t stream) const {
    const float alpha = 1;
    check(cublasLtMatmul(handle_, desc_, &alpha, a, a_, b, b_, &beta_, c, c_, c, c_, &algo_.algo, workspace,
                         kWorkspaceBytes, stream),
          "cublasLtMatmul");
  }

 private:
  static cublasLtMatrixLayout_t layout(long rows, long cols, long ld, int batch, long stride) {
    cublasLtMatrixLayout_t l = nullptr;
    check(cublasLtMatrixLayoutCreate(&l, CUDA_R_16BF, static_cast<std::uint64_t>(rows), static_cast<std::uint64_t>(cols),
                                     ld),
          "cublasLtMatrixLayoutCreate");
    if (batch > 1) {
      const std::int32_t count = batch;
      const std::int64_t offset = stride;
      check(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count), "BATCH_COUNT");
      check(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &offset, sizeof offset),
            "STRIDED_BATCH_OFFSET");
    }
    return l;
  }

  cublasLtHandle_t handle_;
  float beta_;
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t a_ = nullptr, b_ = nullptr, c_ = nullptr;
  cublasLtMatmulHeuristicResult_t algo_{};
};

using Launch = std::function<void(cudaStream_t)>;

struct PreparedPartition {
  std::vector<std::unique_ptr<DeviceBuffer>> buffers;
  std::vector<std::unique_ptr<LtGemm>> gemms;
  std::vector<Launch> ops;  // one per partition op, in order
  std::unique_ptr<DeviceBuffer> send, receive;  // the collective's buffers
#ifdef KAREUS_HAVE_CUDNN
  std::vector<std::shared_ptr<cuda::FusedAttention>> fused;
#endif
};

class CudaExecutor final : public PartitionExecutor {
 public:
  explicit CudaExecutor(CudaExecutorOptions options) : options_(std::move(options)) {
    check(cudaSetDevice(options_.cuda_device), "cudaSetDevice");
    cudaDeviceProp props{};
    check(cudaGetDeviceProperties(&props, options_.cuda_device), "cudaGetDeviceProperties");
    sms_ = props.multiProcessorCount;
    device_name_ = props.name;
    check(cudaStreamCreateWithFlags(&compute_, cudaStreamNonBlocking), "cudaStreamCreate");
    check(cudaStreamCreateWithFlags(&side_, cudaStreamNonBlocking), "cudaStreamCreate");
    for (cudaEvent_t* e : {&launch_, &join_}) check(cudaEventCreateWithFlags(e, cudaEventDisableTiming), "cudaEventCreate");
    for (cudaEvent_t* e : {&start_, &stop_}) check(cudaEventCreate(e), "cudaEventCreate");
    check(cublasLtCreate(&lt_), "cublasLtCreate");
#ifdef KAREUS_HAVE_CUDNN
    if (const cudnnStatus_t status = cudnnCreate(&cudnn_); status != CUDNN_STATUS_SUCCESS) {
      throw DeviceError(fmt::format("cuDNN: cudnnCreate: {}", cudnnGetErrorString(status)));
    }
#endif
    workspace_ = std::make_unique<DeviceBuffer>(kWorkspaceBytes);
  }

  ~CudaExecutor() override {
    cudaDeviceSynchronize();
    for (auto& [key, comm] : comms_) ncclCommDestroy(comm);
    prepared_.clear();
    workspace_.reset();
    cublasLtDestroy(lt_);
#ifdef KAREUS_HAVE_CUDNN
    cudnnDestroy(cudnn_);
#endif
    for (cudaEvent_t e : {launch_, join_, start_, stop_}) cudaEventDestroy(e);
    cudaStreamDestroy(compute_);
    cudaStreamDestroy(side_);
  }

  std::string name() const override {
    return fmt::format("cuda:{} ({})", device_name_,
                       options_.collective == CollectiveBackend::kNccl ? "nccl" : "copy kernel");
  }
  int sm_count() const override { return sms_; }

  std::string details() const override {
    std::map<std::string, std::vector<std::string>> by_path;
    for (const auto& [key, path] : attention_paths_) by_path[path].push_back(key);
    std::string text;
    for (const auto& [path, keys] : by_path) {
      text += fmt::format("{}attention ({}): {}", text.empty() ? "" : "; ", fmt::join(keys, ", "), path);
    }
    return text;
  }

  void prepare(const workload::Partition& partition) override {
    if (prepared_.contains(partition.key)) return;
    auto p = std::make_unique<PreparedPartition>();
    key_ = partition.key;
    const std::vector<OpShape> shapes = op_shapes(options_.model, options_.parallel, partition);
    for (const OpShape& shape : shapes) p->ops.push_back(prepare_op(*p, shape));
    if (partition.collective) prepare_collective(*p, partition);
    check(cudaStreamSynchronize(compute_), "filling the tensors");
    prepared_[partition.key] = std::move(p);
  }

  double run(const workload::Partition& partition, const workload::Knob& knob, long repetitions) override {
    PreparedPartition& p = *prepared_.at(partition.key);
    const workload::LaunchSlot* slot = knob.sequential() ? nullptr : partition.find_slot(knob.slot);
    Launch collective;
    if (partition.collective) collective = collective_launch(p, partition, knob.sms);
    check(cudaEventRecord(start_, compute_), "cudaEventRecord");
    for (long rep = 0; rep < repetitions; ++rep) {
      for (std::size_t i = 0; i < p.ops.size(); ++i) {
        if (collective && slot != nullptr && i == slot->first_op) fork(collective);
        p.ops[i](compute_);
      }
      if (collective) {
        if (slot == nullptr) fork(collective);  // sequential: after the compute
        check(cudaEventRecord(join_, side_), "cudaEventRecord");
        check(cudaStreamWaitEvent(compute_, join_, 0), "cudaStreamWaitEvent");
      }
    }
    check(cudaGetLastError(), "kernel launch");
    check(cudaEventRecord(stop_, compute_), "cudaEventRecord");
    check(cudaEventSynchronize(stop_), "cudaEventSynchronize");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start_, stop_), "cudaEventElapsedTime");
    return ms / 1e3;
  }

 private:
  // The collective launches on the side stream once the compute stream reaches this point.
  void fork(const Launch& collective) {
    check(cudaEventRecord(launch_, compute_), "cudaEventRecord");
    check(cudaStreamWaitEvent(side_, launch_, 0), "cudaStreamWaitEvent");
    collective(side_);
  }

  void* buffer(PreparedPartition& p, double elements) {
    const auto n = static_cast<long>(std::ceil(elements));
    p.buffers.push_back(std::make_unique<DeviceBuffer>(static_cast<std::size_t>(n) * 2));
    cuda::fill_random_bf16(p.buffers.back()->get(), n, static_cast<std::uint32_t>(p.buffers.size()), compute_);
    return p.buffers.back()->get();
  }

  // `bytes` of device memory, zeroed (fp32 statistics, workspaces).
  void* zeroed(PreparedPartition& p, std::size_t bytes) {
    p.buffers.push_back(std::make_unique<DeviceBuffer>(bytes));
    check(cudaMemsetAsync(p.buffers.back()->get(), 0, bytes, compute_), "cudaMemsetAsync");
    return p.buffers.back()->get();
  }

  const LtGemm* gemm(PreparedPartition& p, const LtGemm::Spec& spec) {
    p.gemms.push_back(std::make_unique<LtGemm>(lt_, spec));
    return p.gemms.back().get();
  }

  Launch prepare_op(PreparedPartition& p, const OpShape& shape) {
    void* ws = workspace_->get();
    if (const auto* g = std::get_if<GemmShape>(&shape)) {
      const double m = static_cast<double>(g->m), k = static_cast<double>(g->k), n = static_cast<double>(g->n);
      void* x = buffer(p, m * k);
      void* w = buffer(p, k * n);
      void* y = buffer(p, m * n);
      if (!g->backward) {
        const LtGemm* fwd = gemm(p, {.m = g->m, .n = g->n, .k = g->k, .lda = g->m, .ldb = g->k, .ldc = g->m});
        return [=](cudaStream_t s) { fwd->run(x, w, y, ws, s); };
      }
      // dX[m x k] = dY[m x n] · Wᵀ and dW[k x n] += Xᵀ · dY (accumulated, as into main grads).
      void* dx = buffer(p, m * k);
      void* dw = buffer(p, k * n);
      const LtGemm* data = gemm(p, {.trans_b = true, .m = g->m, .n = g->k, .k = g->n, .lda = g->m, .ldb = g->k, .ldc = g->m});
      const LtGemm* weight =
          gemm(p, {.trans_a = true, .m = g->k, .n = g->n, .k = g->m, .lda = g->m, .ldb = g->m, .ldc = g->k, .beta = 1});
      return [=](cudaStream_t s) {
        data->run(y, w, dx, ws, s);
        weight->run(x, y, dw, ws, s);
      };
    }
    if (const auto* a = std::get_if<AttentionShape>(&shape)) {
      std::string why = "this build has no cuDNN";
#ifdef KAREUS_HAVE_CUDNN
      if (Launch fused = prepare_fused_attention(p, *a, why)) {
        attention_paths_[key_] = "cuDNN fused SDPA";
        return fused;
      }
#endif
      attention_paths_[key_] = "chunked cuBLASLt (cuDNN fused SDPA unavailable: " + why + ")";
      spdlog::warn("{}: attention of {} runs as chunked cuBLASLt GEMMs, not cuDNN's fused SDPA: {}", name(), key_,
                   why);
      return prepare_attention(p, *a);
    }
    const auto& mshape = std::get<MemoryShape>(shape);
    const long rows = mshape.rows, width = mshape.width;
    const double rw = static_cast<double>(rows) * static_cast<double>(width);
    switch (mshape.kernel) {
      case MemoryKernel::kRmsNorm: {
        void* x = buffer(p, rw);
        void* w = buffer(p, static_cast<double>(width));
        void* y = buffer(p, rw);
        void* dy = mshape.backward ? buffer(p, rw) : nullptr;
        return [=](cudaStream_t s) { cuda::rms_norm(x, dy, w, y, rows, width, s); };
      }
      case MemoryKernel::kRope: {
        void* x = buffer(p, rw);
        const long positions = options_.parallel.seq_len / options_.parallel.cp;
        return [=](cudaStream_t s) { cuda::rope(x, rows, width, positions, s); };
      }
      case MemoryKernel::kSwiglu: {
        void* in = buffer(p, 2 * rw);
        void* dy = mshape.backward ? buffer(p, rw) : nullptr;
        void* out = buffer(p, mshape.backward ? 2 * rw : rw);
        return [=](cudaStream_t s) { cuda::swiglu(in, dy, out, rows, width, s); };
      }
      case MemoryKernel::kAdd: {
        void* a = buffer(p, rw);
        void* b = buffer(p, rw);
        void* c = buffer(p, rw);
        return [=](cudaStream_t s) { cuda::add(a, b, c, rows * width, s); };
      }
      case MemoryKernel::kDropoutAdd: {
        void* a = buffer(p, rw);
        void* b = buffer(p, rw);
        void* c = buffer(p, rw);
        auto* mask = static_cast<std::uint8_t*>(zeroed(p, static_cast<std::size_t>(rows * width)));
        const auto keep = static_cast<float>(1 - options_.parallel.hidden_dropout);
        const bool backward = mshape.backward;
        return [=](cudaStream_t s) { cuda::dropout_add(a, b, mask, c, rows * width, keep, backward, s); };
      }
      case MemoryKernel::kStream: {
        void* in = buffer(p, rw);
        void* out = buffer(p, rw);
        return [=](cudaStream_t s) { cuda::stream_copy(in, out, rows * width, s); };
      }
    }
    throw InternalError("unknown memory kernel");
  }

#ifdef KAREUS_HAVE_CUDNN
  // Causal attention through cuDNN's fused SDPA. A CP rank's queries (q_len) see keys of the whole
  // sequence (kv_len = cp · q_len): as the cp steps of ring attention, cp fused causal q_len x
  // q_len graphs on successive K/V blocks, the counted FLOPs (q_len · kv_len / 2 per head) in all.
  // GQA first with the model's KV heads; where cuDNN takes no GQA graph, K and V per query head
  // (the same FLOPs). Null, with cuDNN's reason, when neither has an execution plan.
  Launch prepare_fused_attention(PreparedPartition& p, const AttentionShape& a, std::string& why) {
    if (a.kv_len % a.q_len != 0) {
      why = fmt::format("keys ({}) not a multiple of the queries ({})", a.kv_len, a.q_len);
      return {};
    }
    const long steps = a.kv_len / a.q_len;
    cuda::FusedAttentionShape shape{a.batch, a.q_heads, a.kv_heads, a.q_len, a.head_dim, a.backward};
    std::unique_ptr<cuda::FusedAttention> graph = cuda::FusedAttention::make(cudnn_, shape, why);
    if (!graph && shape.kv_heads != shape.q_heads) {
      std::string per_head_why;
      shape.kv_heads = shape.q_heads;
      graph = cuda::FusedAttention::make(cudnn_, shape, per_head_why);
      why = fmt::format("GQA: {}; K/V per query head: {}", why, per_head_why);
    }
    if (!graph) return {};
    const double q_elements = static_cast<double>(shape.batch * shape.q_heads * shape.len * shape.head_dim);
    const double kv_elements = static_cast<double>(shape.batch * shape.kv_heads * shape.len * shape.head_dim);
    const auto rows = static_cast<std::size_t>(shape.batch * shape.q_heads * shape.len);
    void* workspace = zeroed(p, std::max<std::size_t>(graph->workspace_bytes(), 16));
    cuda::FusedAttentionBuffers t;
    t.q = buffer(p, q_elements);
    t.o = buffer(p, q_elements);
    t.stats = zeroed(p, rows * sizeof(float));
    if (a.backward) {
      t.d_o = buffer(p, q_elements);
      t.dq = buffer(p, q_elements);
      t.softmax_sum = zeroed(p, rows * sizeof(float));
    }
    std::vector<int> bindings;
    for (long step = 0; step < steps; ++step) {  // each step its own K/V block (and dK/dV)
      t.k = buffer(p, kv_elements);
      t.v = buffer(p, kv_elements);
      if (a.backward) {
        t.dk = buffer(p, kv_elements);
        t.dv = buffer(p, kv_elements);
      }
      bindings.push_back(graph->bind(t, workspace));
    }
    std::shared_ptr<cuda::FusedAttention> shared = std::move(graph);
    p.fused.push_back(shared);
    return [shared, bindings](cudaStream_t s) {
      for (int b : bindings) shared->run(b, s);
    };
  }
#endif

  // Causal attention as chunked strided-batched GEMMs with our softmax between them: K and V are
  // held per query head (GQA's sharing does not change the FLOPs), and query chunk c computes
  // scores only against the keys its queries may see, 9/8 of the causal FLOPs in all.
  Launch prepare_attention(PreparedPartition& p, const AttentionShape& a) {
    const long heads = a.batch * a.q_heads, d = a.head_dim;
    const long chunks = a.q_len % kAttentionChunks == 0 && a.kv_len % kAttentionChunks == 0 ? kAttentionChunks : 1;
    const long qc = a.q_len / chunks, kc = a.kv_len / chunks;
    const auto hd = static_cast<double>(heads);
    void* q = buffer(p, hd * static_cast<double>(a.q_len * d));
    void* k = buffer(p, hd * static_cast<double>(a.kv_len * d));
    void* v = buffer(p, hd * static_cast<double>(a.kv_len * d));
    void* o = buffer(p, hd * static_cast<double>(a.q_len * d));
    void* scores = buffer(p, hd * static_cast<double>(a.kv_len * qc));
    const int batch = static_cast<int>(heads);
    const long stride_q = a.q_len * d, stride_kv = a.kv_len * d, stride_s = a.kv_len * qc;
    const float scale = 1.0f / std::sqrt(static_cast<float>(d));
    const long keys_per_query = std::max(1L, a.kv_len / a.q_len);
    void* ws = workspace_->get();
    struct Chunk {
      long keys;
      const LtGemm *scores, *output, *dv, *dp, *dq, *dk;
    };
    std::vector<Chunk> plan;
    for (long c = 0; c < chunks; ++c) {
      Chunk ch{};
      ch.keys = (c + 1) * kc;
      // S[keys x qc] = Kᵀ · Q_c, O_c[d x qc] = V · P.
      ch.scores = gemm(p, {.trans_a = true, .m = ch.keys, .n = qc, .k = d, .lda = d, .ldb = d, .ldc = ch.keys,
                           .batch = batch, .stride_a = stride_kv, .stride_b = stride_q, .stride_c = stride_s});
      ch.output = gemm(p, {.m = d, .n = qc, .k = ch.keys, .lda = d, .ldb = ch.keys, .ldc = d, .batch = batch,
                           .stride_a = stride_kv, .stride_b = stride_s, .stride_c = stride_q});
      if (a.backward) {
        // dV += dO_c · Pᵀ, dP = Vᵀ · dO_c, dQ_c = K · dS, dK += Q_c · dSᵀ.
        const float beta = c == 0 ? 0.0f : 1.0f;
        ch.dv = gemm(p, {.trans_b = true, .m = d, .n = ch.keys, .k = qc, .lda = d, .ldb = ch.keys, .ldc = d,
                         .batch = batch, .stride_a = stride_q, .stride_b = stride_s, .stride_c = stride_kv, .beta = beta});
        ch.dp = gemm(p, {.trans_a = true, .m = ch.keys, .n = qc, .k = d, .lda = d, .ldb = d, .ldc = ch.keys,
                         .batch = batch, .stride_a = stride_kv, .stride_b = stride_q, .stride_c = stride_s});
        ch.dq = gemm(p, {.m = d, .n = qc, .k = ch.keys, .lda = d, .ldb = ch.keys, .ldc = d, .batch = batch,
                         .stride_a = stride_kv, .stride_b = stride_s, .stride_c = stride_q});
        ch.dk = gemm(p, {.trans_b = true, .m = d, .n = ch.keys, .k = qc, .lda = d, .ldb = ch.keys, .ldc = d,
                         .batch = batch, .stride_a = stride_q, .stride_b = stride_s, .stride_c = stride_kv, .beta = beta});
      }
      plan.push_back(ch);
    }
    if (!a.backward) {
      return [=](cudaStream_t s) {
        for (long c = 0; c < chunks; ++c) {
          const Chunk& ch = plan[static_cast<std::size_t>(c)];
          auto* qc_ptr = static_cast<char*>(q) + c * qc * d * 2;
          ch.scores->run(k, qc_ptr, scores, ws, s);
          cuda::causal_softmax(scores, heads, qc, ch.keys, stride_s, c * qc, keys_per_query, scale, s);
          ch.output->run(v, scores, static_cast<char*>(o) + c * qc * d * 2, ws, s);
        }
      };
    }
    void* d_out = buffer(p, hd * static_cast<double>(a.q_len * d));
    void* dq = buffer(p, hd * static_cast<double>(a.q_len * d));
    void* dk = buffer(p, hd * static_cast<double>(a.kv_len * d));
    void* dv = buffer(p, hd * static_cast<double>(a.kv_len * d));
    void* dprob = buffer(p, hd * static_cast<double>(a.kv_len * qc));
    return [=](cudaStream_t s) {
      for (long c = 0; c < chunks; ++c) {
        const Chunk& ch = plan[static_cast<std::size_t>(c)];
        const long offset = c * qc * d * 2;
        char* q_c = static_cast<char*>(q) + offset;
        char* do_c = static_cast<char*>(d_out) + offset;
        ch.scores->run(k, q_c, scores, ws, s);  // recomputed, as flash attention's backward does
        cuda::causal_softmax(scores, heads, qc, ch.keys, stride_s, c * qc, keys_per_query, scale, s);
        ch.dv->run(do_c, scores, dv, ws, s);
        ch.dp->run(v, do_c, dprob, ws, s);
        cuda::softmax_backward(dprob, scores, heads, qc, ch.keys, stride_s, s);
        ch.dq->run(k, dprob, static_cast<char*>(dq) + offset, ws, s);
        ch.dk->run(q_c, dprob, dk, ws, s);
      }
    };
  }

  void prepare_collective(PreparedPartition& p, const workload::Partition& partition) {
    const workload::Collective& c = *partition.collective;
    const auto bytes = static_cast<std::size_t>(std::ceil(c.bytes / 16) * 16);
    p.send = std::make_unique<DeviceBuffer>(bytes);
    p.receive = std::make_unique<DeviceBuffer>(bytes);
    if (options_.collective == CollectiveBackend::kNccl) {
      const CudaCollectivePeers peers = options_.peers(c.group);
      if (peers.size != c.ranks) {
        throw InputError({"", 0, 0, "ranks"}, fmt::format("partition {}'s {} spans {} GPUs but this rank's group has {}",
                                                          partition.key, workload::to_string(c.kind), c.ranks, peers.size));
      }
    }
  }

  double p2p_wait(P2pRole role, int receiver, int sender, double delay_s) override {
    if (options_.collective != CollectiveBackend::kNccl || !options_.world) {
      throw InputError({"", 0, 0, "--collective"}, "P_static waits in an NCCL receive: run one rank per GPU with "
                                                   "--collective nccl");
    }
    constexpr std::size_t kBytes = 1 << 20;  // what a pipeline stage would receive; the size does not matter
    ncclComm_t comm = communicator(kWorldGroup, 0);
    if (!p2p_) p2p_ = std::make_unique<DeviceBuffer>(kBytes);
    const auto start = std::chrono::steady_clock::now();
    if (role == P2pRole::kReceiver) {
      check(ncclRecv(p2p_->get(), kBytes, ncclUint8, sender, comm, compute_), "ncclRecv");
      check(cudaStreamSynchronize(compute_), "waiting in the receive");
    } else if (role == P2pRole::kSender) {
      std::this_thread::sleep_for(std::chrono::duration<double>(delay_s));
      check(ncclSend(p2p_->get(), kBytes, ncclUint8, receiver, comm, compute_), "ncclSend");
      check(cudaStreamSynchronize(compute_), "sending");
    }
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }

  // A communicator of `group` (or of the world) whose kernels use `sms` CTAs (0: NCCL's default).
  ncclComm_t communicator(int group, int sms) {
    const auto key = std::make_pair(group, sms);
    if (auto it = comms_.find(key); it != comms_.end()) return it->second;
    const CudaCollectivePeers peers =
        group == kWorldGroup ? options_.world() : options_.peers(static_cast<workload::ParallelGroup>(group));
    ncclUniqueId id{};
    if (peers.rank == 0) check(ncclGetUniqueId(&id), "ncclGetUniqueId");
    std::string bytes(reinterpret_cast<const char*>(&id), sizeof id);
    peers.broadcast(bytes);
    KAREUS_CHECK(bytes.size() == sizeof id, "the NCCL unique id did not arrive whole");
    std::memcpy(&id, bytes.data(), sizeof id);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    if (sms > 0) {
      config.minCTAs = sms;
      config.maxCTAs = sms;
    }
    ncclComm_t comm = nullptr;
    check(ncclCommInitRankConfig(&comm, peers.size, id, peers.rank, &config), "ncclCommInitRankConfig");
    comms_[key] = comm;
    return comm;
  }

  Launch collective_launch(PreparedPartition& p, const workload::Partition& partition, int sms) {
    const workload::Collective& c = *partition.collective;
    void* send = p.send->get();
    void* receive = p.receive->get();
    if (options_.collective == CollectiveBackend::kCopy) {
      // What the ring moves through this GPU, on the knob's SMs.
      const long bytes = static_cast<long>(std::ceil(c.wire_bytes() / 16)) * 16;
      return [=](cudaStream_t s) { cuda::copy_on_sms(send, receive, bytes, sms, s); };
    }
    ncclComm_t comm = communicator(static_cast<int>(c.group), sms);
    const auto elements = static_cast<std::size_t>(c.bytes / 2);
    const auto shard = elements / static_cast<std::size_t>(c.ranks);
    switch (c.kind) {
      case workload::CollectiveKind::kAllReduce:
        return [=](cudaStream_t s) {
          check(ncclAllReduce(send, send, elements, ncclBfloat16, ncclSum, comm, s), "ncclAllReduce");
        };
      case workload::CollectiveKind::kAllGather:
        return [=](cudaStream_t s) {
          check(ncclAllGather(send, receive, shard, ncclBfloat16, comm, s), "ncclAllGather");
        };
      case workload::CollectiveKind::kReduceScatter:
        return [=](cudaStream_t s) {
          check(ncclReduceScatter(send, receive, shard, ncclBfloat16, ncclSum, comm, s), "ncclReduceScatter");
        };
    }
    throw InternalError("unknown collective");
  }

  CudaExecutorOptions options_;
  int sms_ = 0;
  std::string device_name_;
  cudaStream_t compute_ = nullptr, side_ = nullptr;
  cudaEvent_t launch_ = nullptr, join_ = nullptr, start_ = nullptr, stop_ = nullptr;
  cublasLtHandle_t lt_ = nullptr;
  std::unique_ptr<DeviceBuffer> workspace_;
  std::map<std::string, std::unique_ptr<PreparedPartition>> prepared_;
  static constexpr int kWorldGroup = -1;
  std::map<std::pair<int, int>, ncclComm_t> comms_;  // (group, SMs) -> communicator
  std::unique_ptr<DeviceBuffer> p2p_;                // P_static's receive buffer
#ifdef KAREUS_HAVE_CUDNN
  cudnnHandle_t cudnn_ = nullptr;
#endif
  std::string key_;                                      // the partition being prepared
  std::map<std::string, std::string> attention_paths_;  // partition key -> how its attention runs
};

}  // namespace

std::unique_ptr<PartitionExecutor> make_cuda_executor(CudaExecutorOptions options) {
  return std::make_unique<CudaExecutor>(std::move(options));
}

}  // namespace kareus::executor
