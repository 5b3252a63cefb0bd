#include "kareus/executor/cuda/fused_attention.hpp"

#include <fmt/format.h>

#include <array>
#include <cstdint>
#include <cmath>

#include "kareus/core/error.hpp"

namespace kareus::executor::cuda {
namespace {

using Desc = cudnnBackendDescriptor_t;
using Dims = std::array<std::int64_t, 4>;

void check(cudnnStatus_t status, const char* what) {
  if (status != CUDNN_STATUS_SUCCESS) throw DeviceError(fmt::format("cuDNN: {}: {}", what, cudnnGetErrorString(status)));
}

// The graph's tensors that are not virtual: what a variant pack binds.
enum Uid : std::int64_t {
  kQ = 1, kK, kV, kO, kStats, kScale, kMaskValue, kDO, kDQ, kDK, kDV, kSoftmaxSum,
  kFirstVirtual = 100,
};

}  // namespace

// Builds one operation graph's descriptors, all owned by the FusedAttention being made.
class GraphBuilder {
 public:
  explicit GraphBuilder(FusedAttention& owner) : owner_(owner) {}

  Desc make(cudnnBackendDescriptorType_t type) {
    Desc d = nullptr;
    check(cudnnBackendCreateDescriptor(type, &d), "cudnnBackendCreateDescriptor");
    owner_.owned_.push_back(d);
    return d;
  }
  template <typename T>
  static void set(Desc d, cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, const T* values,
                  std::int64_t count = 1) {
    check(cudnnBackendSetAttribute(d, name, type, count, values), "cudnnBackendSetAttribute");
  }
  static void finalize(Desc d, const char* what) { check(cudnnBackendFinalize(d), what); }

  // A tensor: `uid` < kFirstVirtual is one the caller binds, else a fresh virtual one.
  Desc tensor(const Dims& dims, const Dims& strides, cudnnDataType_t type, std::int64_t uid = 0,
              bool by_value = false, bool reorder = false) {
    Desc t = make(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    const bool is_virtual = uid == 0;
    if (is_virtual) uid = next_virtual_++;
    const std::int64_t alignment = 16;
    set(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, &type);
    set(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, dims.data(), 4);
    set(t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, strides.data(), 4);
    set(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, &uid);
    set(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, &alignment);
    set(t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, &is_virtual);
    if (by_value) set(t, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, &by_value);
    if (reorder) {
      // The softmax output feeding the second matmul, in the layout its tensor cores read.
      const cudnnBackendTensorReordering_t mode = CUDNN_TENSOR_REORDERING_F16x16;
      set(t, CUDNN_ATTR_TENSOR_REORDERING_MODE, CUDNN_TYPE_TENSOR_REORDERING_MODE, &mode);
    }
    finalize(t, "tensor");
    return t;
  }
  // Same shape as a [dims] tensor, fp32, virtual (the graph's intermediates).
  Desc like(const Dims& dims, const Dims& strides, cudnnDataType_t type = CUDNN_DATA_FLOAT) {
    return tensor(dims, strides, type);
  }

  // y = mode(x[, b][, t]); `axis` for GEN_INDEX.
  void pointwise(cudnnPointwiseMode_t mode, Desc x, Desc b, Desc y, Desc t = nullptr, std::int64_t axis = -1,
                 cudnnDataType_t precision = CUDNN_DATA_FLOAT) {
    Desc pw = make(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
    set(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, &mode);
    set(pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, &precision);
    if (axis >= 0) set(pw, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, &axis);
    finalize(pw, "pointwise descriptor");
    Desc op = make(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    set(op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, &pw);
    set(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, &x);
    if (b != nullptr) set(op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, &b);
    if (t != nullptr) set(op, CUDNN_ATTR_OPERATION_POINTWISE_TDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, &t);
    set(op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, &y);
    add(op, "pointwise");
  }
  void reduction(cudnnReduceTensorOp_t op_kind, Desc x, Desc y) {
    Desc r = make(CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
    const cudnnDataType_t precision = CUDNN_DATA_FLOAT;
    set(r, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, &op_kind);
    set(r, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, &precision);
    finalize(r, "reduction descriptor");
    Desc op = make(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
    set(op, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, &x);
    set(op, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, &y);
    set(op, CUDNN_ATTR_OPERATION_REDUCTION_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, &r);
    add(op, "reduction");
  }
  void matmul(Desc a, Desc b, Desc c) {
    Desc m = make(CUDNN_BACKEND_MATMUL_DESCRIPTOR);
    const cudnnDataType_t precision = CUDNN_DATA_FLOAT;
    set(m, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, &precision);
    finalize(m, "matmul descriptor");
    Desc op = make(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
    set(op, CUDNN_ATTR_OPERATION_MATMUL_ADESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, &a);
    set(op, CUDNN_ATTR_OPERATION_MATMUL_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, &b);
    set(op, CUDNN_ATTR_OPERATION_MATMUL_CDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, &c);
    set(op, CUDNN_ATTR_OPERATION_MATMUL_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, &m);
    add(op, "matmul");
  }
  // A transposed view of x (the same elements, dims and strides permuted).
  void reshape(Desc x, Desc y) {
    Desc op = make(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR);
    set(op, CUDNN_ATTR_OPERATION_RESHAPE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, &x);
    set(op, CUDNN_ATTR_OPERATION_RESHAPE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, &y);
    add(op, "reshape");
  }

  // The graph of the operations added, finalized; then the first engine config of the
  // heuristics that yields a plan. Returns false with cuDNN's reason when there is none.
  bool finish(cudnnHandle_t handle, std::string& why) {
    if (handle == nullptr) {
      why = "no cuDNN handle (the operations are built, the graph is not)";
      return false;
    }
    Desc graph = make(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    set(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, ops_.data(),
        static_cast<std::int64_t>(ops_.size()));
    set(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, &handle);
    if (const cudnnStatus_t s = cudnnBackendFinalize(graph); s != CUDNN_STATUS_SUCCESS) {
      why = fmt::format("the operation graph does not finalize ({})", cudnnGetErrorString(s));
      return false;
    }
    Desc heuristics = make(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    const cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
    set(heuristics, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, &graph);
    set(heuristics, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, &mode);
    if (const cudnnStatus_t s = cudnnBackendFinalize(heuristics); s != CUDNN_STATUS_SUCCESS) {
      why = fmt::format("the heuristics do not take the graph ({})", cudnnGetErrorString(s));
      return false;
    }
    std::int64_t available = 0;
    check(cudnnBackendGetAttribute(heuristics, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0,
                                   &available, nullptr),
          "engine config count");
    if (available == 0) {
      why = "the heuristics offer no engine config for the graph";
      return false;
    }
    std::vector<Desc> configs;
    for (std::int64_t i = 0; i < available; ++i) configs.push_back(make(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR));
    std::int64_t returned = 0;
    check(cudnnBackendGetAttribute(heuristics, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                   available, &returned, configs.data()),
          "engine configs");
    cudnnStatus_t last = CUDNN_STATUS_NOT_SUPPORTED;
    for (std::int64_t i = 0; i < returned; ++i) {
      Desc plan = make(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
      set(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, &handle);
      set(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, &configs[static_cast<std::size_t>(i)]);
      last = cudnnBackendFinalize(plan);
      if (last != CUDNN_STATUS_SUCCESS) continue;
      std::int64_t workspace = 0;
      std::int64_t count = 0;
      check(cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &count,
                                     &workspace),
            "plan workspace size");
      owner_.plan_ = plan;
      owner_.workspace_bytes_ = static_cast<std::size_t>(workspace);
      return true;
    }
    why = fmt::format("none of the {} engine configs builds a plan (last: {})", returned, cudnnGetErrorString(last));
    return false;
  }

 private:
  void add(Desc op, const char* what) {
    finalize(op, what);
    ops_.push_back(op);
  }

  FusedAttention& owner_;
  std::vector<Desc> ops_;
  std::int64_t next_virtual_ = kFirstVirtual;
};

namespace {

// Row-major strides of [b, h, rows, cols], and the same tensor read transposed ([b, h, cols, rows]).
Dims strides(const Dims& d) { return {d[1] * d[2] * d[3], d[2] * d[3], d[3], 1}; }
Dims transposed(const Dims& d) { return {d[0], d[1], d[3], d[2]}; }
Dims transposed_strides(const Dims& d) {
  const Dims s = strides(d);
  return {s[0], s[1], s[3], s[2]};
}

// scale·S masked causally (row >= column; the rest -inf): the graph's score tensor.
Desc scaled_causal_scores(GraphBuilder& g, Desc scores, const Dims& sd, Desc scale, Desc mask_value) {
  const Dims ss = strides(sd);
  Desc scaled = g.like(sd, ss);
  g.pointwise(CUDNN_POINTWISE_MUL, scores, scale, scaled);
  Desc row = g.like(sd, ss), column = g.like(sd, ss);
  g.pointwise(CUDNN_POINTWISE_GEN_INDEX, scaled, nullptr, row, nullptr, 2);
  g.pointwise(CUDNN_POINTWISE_GEN_INDEX, scaled, nullptr, column, nullptr, 3);
  Desc visible = g.like(sd, ss, CUDNN_DATA_BOOLEAN);
  g.pointwise(CUDNN_POINTWISE_CMP_GE, row, column, visible, nullptr, -1, CUDNN_DATA_BOOLEAN);
  Desc masked = g.like(sd, ss);
  g.pointwise(CUDNN_POINTWISE_BINARY_SELECT, scaled, mask_value, masked, visible);
  return masked;
}

}  // namespace

std::unique_ptr<FusedAttention> FusedAttention::make(cudnnHandle_t handle, const FusedAttentionShape& shape,
                                                     std::string& why) {
  try {
    return build(handle, shape, why);
  } catch (const DeviceError& e) {
    // An operation cuDNN rejects when it is finalized (e.g. the backward's GQA matmuls into K/V
    // heads fewer than the query heads) is a graph it does not take.
    why = e.what();
    return nullptr;
  }
}

std::unique_ptr<FusedAttention> FusedAttention::build(cudnnHandle_t handle, const FusedAttentionShape& shape,
                                                      std::string& why) {
  std::unique_ptr<FusedAttention> fa(new FusedAttention(handle, shape));
  fa->scale_ = 1.0f / std::sqrt(static_cast<float>(shape.head_dim));
  GraphBuilder g(*fa);
  const std::int64_t b = shape.batch, hq = shape.q_heads, hk = shape.kv_heads, s = shape.len, d = shape.head_dim;
  const Dims qd{b, hq, s, d}, kvd{b, hk, s, d}, sd{b, hq, s, s}, rd{b, hq, s, 1}, unit{1, 1, 1, 1};
  const cudnnDataType_t bf16 = CUDNN_DATA_BFLOAT16;
  Desc q = g.tensor(qd, strides(qd), bf16, kQ);
  Desc kt = g.tensor(transposed(kvd), transposed_strides(kvd), bf16, kK);  // Kᵀ read in place
  Desc o = g.tensor(qd, strides(qd), bf16, kO);
  Desc stats = g.tensor(rd, strides(rd), CUDNN_DATA_FLOAT, kStats);
  Desc scale = g.tensor(unit, unit, CUDNN_DATA_FLOAT, kScale, true);
  Desc mask_value = g.tensor(unit, unit, CUDNN_DATA_FLOAT, kMaskValue, true);
  const Dims ss = strides(sd), rs = strides(rd);

  Desc scores = g.like(sd, ss);
  g.matmul(q, kt, scores);
  Desc masked = scaled_causal_scores(g, scores, sd, scale, mask_value);
  if (!shape.backward) {
    Desc v = g.tensor(kvd, strides(kvd), bf16, kV);
    Desc max = g.like(rd, rs), shifted = g.like(sd, ss), exp = g.like(sd, ss), sum = g.like(rd, rs),
         log_sum = g.like(rd, rs);
    g.reduction(CUDNN_REDUCE_TENSOR_MAX, masked, max);
    g.pointwise(CUDNN_POINTWISE_SUB, masked, max, shifted);
    g.pointwise(CUDNN_POINTWISE_EXP, shifted, nullptr, exp);
    g.reduction(CUDNN_REDUCE_TENSOR_ADD, exp, sum);
    g.pointwise(CUDNN_POINTWISE_LOG, sum, nullptr, log_sum);
    g.pointwise(CUDNN_POINTWISE_ADD, max, log_sum, stats);
    Desc probabilities = g.tensor(sd, ss, CUDNN_DATA_FLOAT, 0, false, true);
    g.pointwise(CUDNN_POINTWISE_DIV, exp, sum, probabilities);
    g.matmul(probabilities, v, o);
  } else {
    Desc vt = g.tensor(transposed(kvd), transposed_strides(kvd), bf16, kV);
    Desc d_o = g.tensor(qd, strides(qd), bf16, kDO);
    Desc dq = g.tensor(qd, strides(qd), bf16, kDQ);
    Desc dk = g.tensor(kvd, strides(kvd), bf16, kDK);
    Desc dv = g.tensor(kvd, strides(kvd), bf16, kDV);
    Desc softmax_sum = g.tensor(rd, rs, CUDNN_DATA_FLOAT, kSoftmaxSum);
    // softmax_sum = Σ_d dO ⊙ O.
    Desc product = g.like(qd, strides(qd));
    g.pointwise(CUDNN_POINTWISE_MUL, d_o, o, product);
    g.reduction(CUDNN_REDUCE_TENSOR_ADD, product, softmax_sum);
    // P recomputed from the stats.
    Desc shifted = g.like(sd, ss), probabilities = g.like(sd, ss);
    g.pointwise(CUDNN_POINTWISE_SUB, masked, stats, shifted);
    g.pointwise(CUDNN_POINTWISE_EXP, shifted, nullptr, probabilities);
    // dV = Pᵀ · dO, P cast to bf16 before the transposed view (a reshape keeps the data type).
    Desc p16 = g.like(sd, ss, bf16), pt = g.tensor(transposed(sd), transposed_strides(sd), bf16);
    g.pointwise(CUDNN_POINTWISE_IDENTITY, probabilities, nullptr, p16);
    g.reshape(p16, pt);
    g.matmul(pt, d_o, dv);
    // dS = P ⊙ (dO · Vᵀ − softmax_sum) · scale.
    Desc dp = g.like(sd, ss), centred = g.like(sd, ss), ds = g.like(sd, ss), ds_scaled = g.like(sd, ss);
    g.matmul(d_o, vt, dp);
    g.pointwise(CUDNN_POINTWISE_SUB, dp, softmax_sum, centred);
    g.pointwise(CUDNN_POINTWISE_MUL, centred, probabilities, ds);
    g.pointwise(CUDNN_POINTWISE_MUL, ds, scale, ds_scaled);
    // dQ = dS · K, dK = dSᵀ · Q.
    Desc k = g.tensor(kvd, strides(kvd), bf16);
    g.reshape(kt, k);
    g.matmul(ds_scaled, k, dq);
    Desc dst = g.tensor(transposed(sd), transposed_strides(sd), CUDNN_DATA_FLOAT);
    g.reshape(ds_scaled, dst);
    g.matmul(dst, q, dk);
  }
  if (!g.finish(handle, why)) return nullptr;
  return fa;
}

FusedAttention::~FusedAttention() {
  for (Desc d : packs_) cudnnBackendDestroyDescriptor(d);
  for (auto it = owned_.rbegin(); it != owned_.rend(); ++it) cudnnBackendDestroyDescriptor(*it);
}

int FusedAttention::bind(const FusedAttentionBuffers& t, void* workspace) {
  // The by-value scalars are read through these pointers at execution: they live in this object.
  std::vector<std::int64_t> uids{kQ, kK, kV, kO, kStats, kScale, kMaskValue};
  std::vector<void*> pointers{t.q, t.k, t.v, t.o, t.stats, &scale_, &mask_value_};
  if (shape_.backward) {
    for (std::int64_t uid : {kDO, kDQ, kDK, kDV, kSoftmaxSum}) uids.push_back(uid);
    for (void* p : {t.d_o, t.dq, t.dk, t.dv, t.softmax_sum}) pointers.push_back(p);
  }
  for (void* p : pointers) {
    if (p == nullptr) throw InternalError("fused attention: a buffer of the graph is missing");
  }
  cudnnBackendDescriptor_t pack = nullptr;
  check(cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &pack), "variant pack");
  packs_.push_back(pack);
  check(cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64,
                                 static_cast<std::int64_t>(uids.size()), uids.data()),
        "variant pack ids");
  check(cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR,
                                 static_cast<std::int64_t>(pointers.size()), pointers.data()),
        "variant pack pointers");
  check(cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace),
        "variant pack workspace");
  check(cudnnBackendFinalize(pack), "variant pack");
  return static_cast<int>(packs_.size()) - 1;
}

void FusedAttention::run(int binding, cudaStream_t stream) const {
  check(cudnnSetStream(handle_, stream), "cudnnSetStream");
  check(cudnnBackendExecute(handle_, plan_, packs_.at(static_cast<std::size_t>(binding))), "cudnnBackendExecute");
}

}  // namespace kareus::executor::cuda
