// A compute-bound CUDA kernel for scripts/gpu-check.sh: the same work at different SM clocks shows
// what a clock costs in time and saves in energy. Built only where CMake finds the CUDA toolkit;
// the interface is plain C++ so that the caller compiles without it.
//
// Thread-safety: call from one thread.
// Example:
//   std::string error = busy_init(0, &sm_count);   // "" on success, else CUDA's message
//   busy_start(launches); ...; busy_wait(&elapsed_s);
#pragma once

#include <string>

namespace kareus::runtime::cuda_check {

// Selects the device and reports its SM count.
std::string busy_init(int cuda_device, int* sm_count);
// Enqueues `launches` launches of the kernel and returns at once.
std::string busy_start(long launches);
// Waits for the enqueued launches; *elapsed_s is their GPU time (CUDA events).
std::string busy_wait(double* elapsed_s);

}  // namespace kareus::runtime::cuda_check
