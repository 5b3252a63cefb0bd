// Where the GPU reaches a point of a stream. In a training loop the host runs ahead of the GPU:
// when the loop begins an instruction, the GPU may still be running the previous one for many
// milliseconds. A marker enqueued on the framework's stream runs a callback on a host thread once
// everything enqueued on that stream before it has finished, so the plan cursor can ask for an
// instruction's clock when the GPU reaches the instruction rather than when the host issues it,
// and the host never waits (Zeus's frequency optimizer synchronises the device instead).
//
// The CUDA marker uses the CUDA driver's cuLaunchHostFunc (libcuda.so.1, loaded at run time as
// NVML is). A runtime API stream (cudaStream_t, torch.cuda.current_stream().cuda_stream) is the
// same handle as the driver's CUstream; the call needs the stream's context current on the calling
// thread, as it is on the framework's own. The callback runs on a CUDA driver thread and holds the
// stream until it returns, so it must be quick and call no CUDA API (FrequencyController's
// requests only record a clock for its worker).
//
// The fake stream stands for a device in tests: the host enqueues work of a given duration and
// markers; the device's time advances only when the test says, firing each marker when the work
// before it has run.
//
// Thread-safety: enqueue may be called from one thread at a time per marker; callbacks run on
// another thread (CUDA) or on the thread that advances a fake stream.
// Example:
//   auto stream = cuda_stream_marker(reinterpret_cast<void*>(torch_stream_handle));
//   cursor.set_stream(std::move(stream));   // clocks now change when the GPU gets there
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <string>

namespace kareus::runtime {

class StreamMarker {
 public:
  virtual ~StreamMarker() = default;
  // Runs `at_gpu` once the stream's work enqueued before this call has finished; never blocks.
  // Throws DeviceError when the marker cannot be enqueued.
  virtual void enqueue(std::function<void()> at_gpu) = 0;
  virtual std::string describe() const = 0;
};

// A framework's CUDA stream (a cudaStream_t or CUstream; null is the legacy default stream).
// DeviceError when the CUDA driver cannot be loaded or lacks cuLaunchHostFunc.
std::shared_ptr<StreamMarker> cuda_stream_marker(void* stream);

class FakeStream final : public StreamMarker {
 public:
  // Work the host issues now: it runs on the device after everything issued before it, and not
  // before now.
  void enqueue_work(double duration_s);
  void enqueue(std::function<void()> at_gpu) override;
  std::string describe() const override { return "fake stream"; }
  // Advances the time to `time_s` (never backwards), firing on this thread, in order, every marker
  // the device has reached by then.
  void run_until(double time_s);
  void drain();                                  // runs until everything enqueued has run
  double now_s() const { return now_s_; }
  double device_free_s() const { return tail_s_; }  // when everything enqueued so far has run

 private:
  struct Marker {
    double fires_s = 0;
    std::function<void()> fn;
  };
  std::deque<Marker> markers_;
  double now_s_ = 0;
  double tail_s_ = 0;
};

}  // namespace kareus::runtime
