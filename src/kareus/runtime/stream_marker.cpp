#include "kareus/runtime/stream_marker.hpp"

#include <dlfcn.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>
#include <exception>

#include "kareus/core/error.hpp"

namespace kareus::runtime {
namespace {

// The CUDA driver API subset used (cuda.h's stable ABI), resolved at run time.
using CUresult = int;
using CUhostFn = void (*)(void*);
using LaunchHostFunc = CUresult (*)(void*, CUhostFn, void*);
constexpr CUresult kCudaSuccess = 0;

LaunchHostFunc load_launch_host_func() {
  void* handle = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);  // never closed, as the driver likes
  if (!handle) throw DeviceError(fmt::format("GPU-timed clocks need the CUDA driver: {}", ::dlerror()));
  void* address = ::dlsym(handle, "cuLaunchHostFunc");
  if (!address) throw DeviceError("GPU-timed clocks need cuLaunchHostFunc, which this CUDA driver lacks (CUDA 10+)");
  LaunchHostFunc fn = nullptr;
  std::memcpy(&fn, &address, sizeof(fn));
  return fn;
}

// Runs one marker's callback on the driver's thread; nothing may escape into the driver.
void run_marker(void* closure) {
  std::unique_ptr<std::function<void()>> fn(static_cast<std::function<void()>*>(closure));
  try {
    (*fn)();
  } catch (const std::exception& e) {
    spdlog::error("a GPU-timed clock change failed: {}", e.what());
  } catch (...) {
    spdlog::error("a GPU-timed clock change failed");
  }
}

class CudaStreamMarker final : public StreamMarker {
 public:
  explicit CudaStreamMarker(void* stream) : stream_(stream), launch_(load_launch_host_func()) {}

  void enqueue(std::function<void()> at_gpu) override {
    auto closure = std::make_unique<std::function<void()>>(std::move(at_gpu));
    const CUresult status = launch_(stream_, &run_marker, closure.get());
    if (status != kCudaSuccess) {
      throw DeviceError(fmt::format("cuLaunchHostFunc on stream {} failed with CUDA error {} (is the stream's context "
                                    "current on this thread?)",
                                    stream_, status));
    }
    closure.release();  // run_marker owns it now
  }
  std::string describe() const override { return fmt::format("CUDA stream {}", stream_); }

 private:
  void* stream_;
  LaunchHostFunc launch_;
};

}  // namespace

std::shared_ptr<StreamMarker> cuda_stream_marker(void* stream) { return std::make_shared<CudaStreamMarker>(stream); }

void FakeStream::enqueue_work(double duration_s) {
  KAREUS_CHECK(duration_s >= 0, "work takes a non-negative time");
  tail_s_ = std::max(tail_s_, now_s_) + duration_s;
}

void FakeStream::enqueue(std::function<void()> at_gpu) {
  tail_s_ = std::max(tail_s_, now_s_);
  markers_.push_back({tail_s_, std::move(at_gpu)});
}

void FakeStream::run_until(double time_s) {
  KAREUS_CHECK(time_s >= now_s_, "a fake stream's time never runs backwards");
  while (!markers_.empty() && markers_.front().fires_s <= time_s) {
    Marker marker = std::move(markers_.front());
    markers_.pop_front();
    now_s_ = marker.fires_s;
    marker.fn();
  }
  now_s_ = time_s;
}

void FakeStream::drain() { run_until(std::max(now_s_, tail_s_)); }

}  // namespace kareus::runtime
