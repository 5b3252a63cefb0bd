// GPU-timed clocks: the fake stream's device timeline, and the plan cursor on it. A training loop
// whose host runs ahead of the GPU issues each instruction's work on the stream; with the stream,
// every instruction starts on the GPU at its planned clock, whatever the host's lead; without it,
// the clock is asked for when the host begins the instruction and lands early by that lead.
#include "kareus/runtime/stream_marker.hpp"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "kareus/core/error.hpp"
#include "kareus/runtime/fake_gpu.hpp"
#include "kareus/runtime/plan_cursor.hpp"
#include "runtime/runtime_test_util.hpp"

namespace kareus::runtime {
namespace {

TEST(FakeStream, FiresEachMarkerWhenTheWorkBeforeItHasRun) {
  FakeStream stream;
  std::vector<double> fired;
  stream.enqueue_work(2.0);
  stream.enqueue([&] { fired.push_back(stream.now_s()); });
  stream.enqueue_work(1.0);
  stream.enqueue([&] { fired.push_back(stream.now_s()); });
  stream.run_until(1.5);
  EXPECT_TRUE(fired.empty());
  stream.run_until(2.5);
  EXPECT_EQ(fired, (std::vector<double>{2.0}));
  // Work issued while the device is idle starts when it is issued.
  stream.drain();
  EXPECT_EQ(fired, (std::vector<double>{2.0, 3.0}));
  stream.run_until(10);
  stream.enqueue_work(1.0);
  stream.enqueue([&] { fired.push_back(stream.now_s()); });
  EXPECT_EQ(stream.device_free_s(), 11.0);
  stream.drain();
  EXPECT_EQ(fired.back(), 11.0);
  EXPECT_THROW(stream.run_until(5), InternalError);
}

// The whole loop on a fake stream: the host issues instruction after instruction, running up to
// `lead` instructions ahead of the GPU (a launch queue that deep); a probe enqueued after each
// instruction's marker reads the GPU's clock as the GPU begins it (once the controller has applied
// what was asked by then).
struct LoopResult {
  std::size_t instructions = 0;
  std::size_t at_planned_clock = 0;
};

LoopResult run_loop(const plan::Plan& plan, int stage, int lead, bool gpu_timed, const std::vector<double>& work_s) {
  auto gpu = std::make_shared<FakeGpu>(make_fake_gpu_config());
  FrequencyController controller({gpu});
  PlanCursor cursor(plan, stage, &controller);
  auto stream = std::make_shared<FakeStream>();
  if (gpu_timed) cursor.set_stream(stream);
  const auto& order = plan.stages[static_cast<std::size_t>(stage)];
  LoopResult result;
  std::vector<double> starts;  // when the GPU begins each instruction
  for (std::size_t k = 0; k < order.size(); ++k) {
    // The host may begin instruction k once the GPU has begun instruction k - lead.
    if (k >= static_cast<std::size_t>(lead)) {
      stream->run_until(std::max(stream->now_s(), starts[k - static_cast<std::size_t>(lead)]));
    }
    starts.push_back(std::max(stream->device_free_s(), stream->now_s()));
    cursor.on_instruction_begin(schedule::to_string(order[k].type), order[k].microbatch);
    stream->enqueue([&, k] {
      controller.wait_idle();
      const auto locked = gpu->locked_sm_clocks_mhz();
      ++result.instructions;
      result.at_planned_clock += locked && locked->second == static_cast<int>(order[k].freq_mhz);
    });
    stream->enqueue_work(work_s[k % work_s.size()]);
  }
  stream->drain();
  cursor.on_step_end();
  return result;
}

RC_GTEST_PROP(GpuTimedClocks, LandOnThePlannedInstructionWhateverTheHostsLead, ()) {
  const int stages = *rc::gen::inRange(1, 4);
  const int microbatches = *rc::gen::inRange(1, 6);
  plan::Plan plan = testing::make_test_plan(stages, microbatches);
  const auto clocks = *rc::gen::container<std::vector<int>>(rc::gen::element(810, 1005, 1200, 1410));
  RC_PRE(!clocks.empty());
  std::size_t c = 0;
  for (auto& list : plan.stages)
    for (auto& ins : list) ins.freq_mhz = clocks[c++ % clocks.size()];
  const int stage = *rc::gen::inRange(0, stages);
  const int lead = *rc::gen::inRange(1, 5);
  const auto work = *rc::gen::nonEmpty(rc::gen::container<std::vector<double>>(rc::gen::map(rc::gen::inRange(1, 100), [](int ms) { return ms * 1e-3; })));
  const LoopResult timed = run_loop(plan, stage, lead, true, work);
  RC_ASSERT(timed.at_planned_clock == timed.instructions);
  // Host-timed, the clock at each GPU start is the one the host asked for last: the instruction
  // `lead - 1` further on, which misses wherever the clocks differ.
  const LoopResult early = run_loop(plan, stage, lead, false, work);
  const auto& order = plan.stages[static_cast<std::size_t>(stage)];
  std::size_t expected = 0;
  for (std::size_t k = 0; k < order.size(); ++k) {
    const std::size_t asked = std::min(order.size() - 1, k + static_cast<std::size_t>(lead) - 1);
    expected += order[asked].freq_mhz == order[k].freq_mhz;
  }
  RC_ASSERT(early.at_planned_clock == expected);
}

TEST(GpuTimedClocks, WithoutTheCudaDriverItIsADeviceErrorAndTheCursorStaysHostTimed) {
  if (::access("/dev/nvidiactl", F_OK) == 0) GTEST_SKIP() << "this machine has an NVIDIA driver";
  try {
    cuda_stream_marker(nullptr);
    // A machine with libcuda.so.1 but no device gets here: the marker exists, enqueueing fails.
  } catch (const DeviceError& e) {
    EXPECT_NE(std::string(e.what()).find("CUDA driver"), std::string::npos) << e.what();
  }
  PlanCursor cursor(testing::make_test_plan(), 0, nullptr);
  EXPECT_FALSE(cursor.gpu_timed());
  cursor.set_stream(std::make_shared<FakeStream>());
  EXPECT_TRUE(cursor.gpu_timed());
  cursor.set_stream(nullptr);
  EXPECT_FALSE(cursor.gpu_timed());
}

}  // namespace
}  // namespace kareus::runtime
