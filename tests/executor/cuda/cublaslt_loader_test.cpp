// The GPU executor's cuBLASLt is opened at its first call (cublaslt_loader.cpp), not when the
// program starts: before any call the library is not in the process, after one it is, and the call
// reached the real library (its own description of a status). Needs no GPU.
#include <cublasLt.h>
#include <link.h>
#include <gtest/gtest.h>

#include <string>

namespace {

bool cublaslt_loaded() {
  bool found = false;
  dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* data) {
        if (info->dlpi_name != nullptr && std::string(info->dlpi_name).find("libcublasLt") != std::string::npos) {
          *static_cast<bool*>(data) = true;
        }
        return 0;
      },
      &found);
  return found;
}

TEST(CublasLtLoader, OpensTheLibraryAtTheFirstCallOnly) {
  ASSERT_FALSE(cublaslt_loaded()) << "libcublasLt was loaded at start-up";
  // The library's own descriptions (cuBLAS 13), which no stand-in would know.
  EXPECT_STREQ(cublasLtGetStatusString(CUBLAS_STATUS_NOT_INITIALIZED), "the library was not initialized");
  EXPECT_TRUE(cublaslt_loaded());
  EXPECT_STREQ(cublasLtGetStatusString(CUBLAS_STATUS_INVALID_VALUE),
               "an unsupported value or parameter was passed to the function");
}

}  // namespace
