// cuBLASLt loaded at its first use instead of at program start. Loading libcublasLt runs its
// static initialisers, which take ~60 ms and ~100 MB of page faults; linked into `kareus` that was
// paid by every command, `kareus --help` included, though only the GPU executor calls it. So the
// executor is linked against these definitions of the cuBLASLt functions it calls (the header's
// own declarations, so the compiler checks every signature), each forwarding to the library
// opened with dlopen on the first call. They are hidden: nothing else in the process binds to them.
#include <cublasLt.h>
#include <dlfcn.h>
#include <fmt/format.h>

#include <string>

#include "kareus/core/error.hpp"

#define KAREUS_STRINGIFY_(x) #x
#define KAREUS_STRINGIFY(x) KAREUS_STRINGIFY_(x)

namespace kareus::executor {
namespace {

void* library() {
  static void* const handle = [] {
    const std::string soname = "libcublasLt.so." KAREUS_STRINGIFY(CUBLAS_VER_MAJOR);
    void* h = dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL);
#ifdef KAREUS_CUBLASLT_DIR
    if (h == nullptr) h = dlopen((std::string(KAREUS_CUBLASLT_DIR) + "/" + soname).c_str(), RTLD_NOW | RTLD_LOCAL);
#endif
    if (h == nullptr) throw DeviceError(fmt::format("cuBLASLt: cannot load {}: {}", soname, dlerror()));
    return h;
  }();
  return handle;
}

template <typename Function>
Function resolve(const char* name) {
  void* symbol = dlsym(library(), name);
  if (symbol == nullptr) throw DeviceError(fmt::format("cuBLASLt: the loaded library lacks {}", name));
  return reinterpret_cast<Function>(symbol);
}

}  // namespace
}  // namespace kareus::executor

// The real function, resolved once per call site's function.
#define KAREUS_REAL(name) \
  static const auto real = ::kareus::executor::resolve<decltype(&::name)>(#name)

#define KAREUS_HIDDEN __attribute__((visibility("hidden")))

extern "C" {

KAREUS_HIDDEN cublasStatus_t cublasLtCreate(cublasLtHandle_t* lightHandle) {
  KAREUS_REAL(cublasLtCreate);
  return real(lightHandle);
}

KAREUS_HIDDEN cublasStatus_t cublasLtDestroy(cublasLtHandle_t lightHandle) {
  KAREUS_REAL(cublasLtDestroy);
  return real(lightHandle);
}

KAREUS_HIDDEN const char* cublasLtGetStatusString(cublasStatus_t status) {
  KAREUS_REAL(cublasLtGetStatusString);
  return real(status);
}

KAREUS_HIDDEN cublasStatus_t cublasLtMatmul(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc,
                                            const void* alpha, const void* A, cublasLtMatrixLayout_t Adesc,
                                            const void* B, cublasLtMatrixLayout_t Bdesc, const void* beta,
                                            const void* C, cublasLtMatrixLayout_t Cdesc, void* D,
                                            cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t* algo,
                                            void* workspace, size_t workspaceSizeInBytes, cudaStream_t stream) {
  KAREUS_REAL(cublasLtMatmul);
  return real(lightHandle, computeDesc, alpha, A, Adesc, B, Bdesc, beta, C, Cdesc, D, Ddesc, algo, workspace,
              workspaceSizeInBytes, stream);
}

KAREUS_HIDDEN cublasStatus_t cublasLtMatmulAlgoGetHeuristic(
    cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t operationDesc, cublasLtMatrixLayout_t Adesc,
    cublasLtMatrixLayout_t Bdesc, cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
    cublasLtMatmulPreference_t preference, int requestedAlgoCount,
    cublasLtMatmulHeuristicResult_t heuristicResultsArray[], int* returnAlgoCount) {
  KAREUS_REAL(cublasLtMatmulAlgoGetHeuristic);
  return real(lightHandle, operationDesc, Adesc, Bdesc, Cdesc, Ddesc, preference, requestedAlgoCount,
              heuristicResultsArray, returnAlgoCount);
}

KAREUS_HIDDEN cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* matmulDesc,
                                                      cublasComputeType_t computeType, cudaDataType_t scaleType) {
  KAREUS_REAL(cublasLtMatmulDescCreate);
  return real(matmulDesc, computeType, scaleType);
}

KAREUS_HIDDEN cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t matmulDesc) {
  KAREUS_REAL(cublasLtMatmulDescDestroy);
  return real(matmulDesc);
}

KAREUS_HIDDEN cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t matmulDesc,
                                                            cublasLtMatmulDescAttributes_t attr, const void* buf,
                                                            size_t sizeInBytes) {
  KAREUS_REAL(cublasLtMatmulDescSetAttribute);
  return real(matmulDesc, attr, buf, sizeInBytes);
}

KAREUS_HIDDEN cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
  KAREUS_REAL(cublasLtMatmulPreferenceCreate);
  return real(pref);
}

KAREUS_HIDDEN cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  KAREUS_REAL(cublasLtMatmulPreferenceDestroy);
  return real(pref);
}

KAREUS_HIDDEN cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                                  cublasLtMatmulPreferenceAttributes_t attr,
                                                                  const void* buf, size_t sizeInBytes) {
  KAREUS_REAL(cublasLtMatmulPreferenceSetAttribute);
  return real(pref, attr, buf, sizeInBytes);
}

KAREUS_HIDDEN cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* matLayout, cudaDataType type,
                                                        uint64_t rows, uint64_t cols, int64_t ld) {
  KAREUS_REAL(cublasLtMatrixLayoutCreate);
  return real(matLayout, type, rows, cols, ld);
}

KAREUS_HIDDEN cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t matLayout) {
  KAREUS_REAL(cublasLtMatrixLayoutDestroy);
  return real(matLayout);
}

KAREUS_HIDDEN cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t matLayout,
                                                              cublasLtMatrixLayoutAttribute_t attr, const void* buf,
                                                              size_t sizeInBytes) {
  KAREUS_REAL(cublasLtMatrixLayoutSetAttribute);
  return real(matLayout, attr, buf, sizeInBytes);
}

}  // extern "C"
