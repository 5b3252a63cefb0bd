# The CUDA toolkit and the NVIDIA libraries the GPU parts use, found once for the whole build, with
# one line saying what was found and what is skipped. Included by the top-level CMakeLists.txt
# before the modules; they read the results:
#   KAREUS_HAVE_CUDA      nvcc and the CUDA runtime; the CUDA language is enabled
#   KAREUS_HAVE_CUBLASLT  CUDA::cublasLt
#   KAREUS_HAVE_NCCL      kareus::nccl (headers and library)
#   KAREUS_HAVE_CUDNN     kareus::cudnn, cuDNN 9 (its graph API header, cudnn_graph.h)
#   KAREUS_BUILD_GPU_EXECUTOR  the CUDA partition executor (CUDA, cuBLASLt and NCCL)
#   KAREUS_CUDA_ARCHITECTURES_DEFAULT  true unless CMAKE_CUDA_ARCHITECTURES was given
# Off with -DKAREUS_CUDA=OFF; -DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=ON builds as on a machine
# without the toolkit.
option(KAREUS_CUDA "Build the CUDA parts (the GPU executor, gpu-check's busy kernel) where the toolkit is found" ON)

# Sets `target`'s CUDA architectures to `ARGN` unless the user chose them (CMAKE_CUDA_ARCHITECTURES).
function(kareus_cuda_architectures target)
  if(KAREUS_CUDA_ARCHITECTURES_DEFAULT)
    set_target_properties(${target} PROPERTIES CUDA_ARCHITECTURES "${ARGN}")
  endif()
endfunction()

set(KAREUS_HAVE_CUDA OFF)
set(KAREUS_HAVE_CUBLASLT OFF)
set(KAREUS_HAVE_NCCL OFF)
set(KAREUS_HAVE_CUDNN OFF)
set(KAREUS_BUILD_GPU_EXECUTOR OFF)
set(KAREUS_CUDA_ARCHITECTURES_DEFAULT OFF)

if(NOT KAREUS_CUDA)
  message(STATUS "kareus: CUDA off (KAREUS_CUDA=OFF); skipped: the GPU executor, gpu-check's busy kernel")
  return()
endif()

# The toolkit first, so that a build told it is absent never enables the CUDA language.
find_package(CUDAToolkit QUIET)
if(CUDAToolkit_FOUND)
  include(CheckLanguage)
  check_language(CUDA)
endif()
if(NOT CUDAToolkit_FOUND OR NOT CMAKE_CUDA_COMPILER)
  message(STATUS "kareus: no CUDA toolkit found; skipped: the GPU executor, gpu-check's busy kernel")
  return()
endif()
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
  # Ampere and Hopper natively (bf16 tensor cores), plus PTX that newer GPUs compile at load time;
  # a target may widen it (kareus_cuda_architectures).
  set(CMAKE_CUDA_ARCHITECTURES 80-real 90)
  set(KAREUS_CUDA_ARCHITECTURES_DEFAULT ON)
endif()
enable_language(CUDA)
set(KAREUS_HAVE_CUDA ON)

if(TARGET CUDA::cublasLt)
  set(KAREUS_HAVE_CUBLASLT ON)
endif()

# An imported target kareus::<name> for a toolkit-side library found by `header` and `library`,
# and KAREUS_HAVE_<VAR> ON when both are there.
function(kareus_find_toolkit_library name var header library)
  find_path(KAREUS_${var}_INCLUDE_DIR ${header} HINTS ${CUDAToolkit_INCLUDE_DIRS})
  find_library(KAREUS_${var}_LIBRARY ${library} HINTS ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}/lib)
  if(KAREUS_${var}_INCLUDE_DIR AND KAREUS_${var}_LIBRARY)
    add_library(kareus::${name} UNKNOWN IMPORTED GLOBAL)
    set_target_properties(kareus::${name} PROPERTIES IMPORTED_LOCATION ${KAREUS_${var}_LIBRARY}
                                                     INTERFACE_SYSTEM_INCLUDE_DIRECTORIES ${KAREUS_${var}_INCLUDE_DIR})
    set(KAREUS_HAVE_${var} ON PARENT_SCOPE)
  endif()
endfunction()
kareus_find_toolkit_library(nccl NCCL nccl.h nccl)
kareus_find_toolkit_library(cudnn CUDNN cudnn_graph.h cudnn)

if(KAREUS_HAVE_CUBLASLT AND KAREUS_HAVE_NCCL)
  set(KAREUS_BUILD_GPU_EXECUTOR ON)
endif()

# The one line: what was found, then what is built and what is skipped.
set(found "")
set(missing "")
foreach(part IN ITEMS CUBLASLT NCCL CUDNN)
  set(name_CUBLASLT cuBLASLt)
  set(name_NCCL NCCL)
  set(name_CUDNN "cuDNN 9")
  if(KAREUS_HAVE_${part})
    list(APPEND found "${name_${part}}")
  else()
    list(APPEND missing "${name_${part}}")
  endif()
endforeach()
set(built "gpu-check's busy kernel")
set(skipped "")
if(KAREUS_BUILD_GPU_EXECUTOR AND KAREUS_HAVE_CUDNN)
  list(APPEND built "the GPU executor with cuDNN fused attention")
elseif(KAREUS_BUILD_GPU_EXECUTOR)
  list(APPEND built "the GPU executor (attention as chunked cuBLASLt GEMMs: no cuDNN 9)")
else()
  list(APPEND skipped "the GPU executor (needs cuBLASLt and NCCL)")
endif()
list(JOIN found ", " found)
list(JOIN missing ", " missing)
list(JOIN built ", " built)
list(JOIN skipped ", " skipped)
set(line "kareus: CUDA ${CUDAToolkit_VERSION} (${CMAKE_CUDA_COMPILER})")
if(found)
  string(APPEND line "; found: ${found}")
endif()
if(missing)
  string(APPEND line "; not found: ${missing}")
endif()
string(APPEND line "; building ${built}")
if(skipped)
  string(APPEND line "; skipped: ${skipped}")
endif()
message(STATUS "${line}")
unset(found)
unset(missing)
unset(built)
unset(skipped)
unset(line)
