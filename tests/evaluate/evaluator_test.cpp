// The Evaluator wrapper: knobs outside the partition's space are InputErrors naming the field,
// bad results become failures, calls and failures are counted, capabilities are passed through.
#include "kareus/evaluate/evaluator.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <thread>

#include "kareus/core/error.hpp"
#include "test_util.hpp"
#include "kareus/evaluate/simulated.hpp"

namespace kareus::evaluate {
namespace {

using testing::input_error_of;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Returns a fixed result, or throws, as told.
class Scripted final : public EvaluatorImpl {
 public:
  Scripted(hardware::GpuSpec gpu, EvalResult result, bool throws = false)
      : gpu_(std::move(gpu)), result_(std::move(result)), throws_(throws) {}
  std::string name() const override { return "scripted"; }
  Provenance provenance() const override { return Provenance::kMeasurement; }
  bool thread_safe() const override { return false; }
  const hardware::GpuSpec& gpu() const override { return gpu_; }
  EvalResult evaluate(const workload::Partition&, const workload::Knob&) const override {
    if (throws_) throw DeviceError("the GPU fell off the bus");
    return result_;
  }

 private:
  hardware::GpuSpec gpu_;
  EvalResult result_;
  bool throws_;
};

class EvaluatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    gpu_ = hardware::load_gpu_preset("a100-sxm4-40gb");
    auto model = workload::load_model("llama-3.2-3b");
    parts_ =
        workload::build_partitions(model, workload::validated(model, workload::ParallelConfig{}));
    extra_ = workload::non_partition_work(
        model, workload::validated(model, workload::ParallelConfig{}), 0);
  }
  const workload::Partition& part(const char* key) { return workload::find_partition(parts_, key); }
  hardware::GpuSpec gpu_;
  std::vector<workload::Partition> parts_, extra_;
};

TEST_F(EvaluatorTest, KnobsOutsideTheSpaceNameTheirField) {
  Evaluator eval = make_simulated_evaluator(gpu_);
  const auto& p = part("fwd_mlp");
  EXPECT_TRUE(contains(input_error_of([&] {
                         eval.evaluate(p, {1412, 12, "linear_0"});
                       }),
                       "field 'freq_mhz': 1412 MHz is not an SM clock of a100-sxm4-40gb"));
  EXPECT_TRUE(contains(input_error_of([&] {
                         eval.evaluate(p, {1500, 12, "linear_0"});
                       }),
                       "210-1410 MHz"));
  EXPECT_TRUE(contains(input_error_of([&] {
                         eval.evaluate(p, {1410, 0, "linear_0"});
                       }),
                       "field 'sms': 0 SMs for the collective is outside 1..107"));
  EXPECT_TRUE(contains(input_error_of([&] {
                         eval.evaluate(p, {1410, 108, "none"});
                       }),
                       "outside 1..107"));
  std::string slot = input_error_of([&] { eval.evaluate(p, {1410, 12, "attn_0"}); });
  EXPECT_TRUE(contains(slot, "field 'slot': partition fwd_mlp has no launch slot 'attn_0'"));
  EXPECT_TRUE(contains(slot, "norm_0, linear_0, act_0, linear_1, none"));
  // Without a collective the knob takes 0 SMs and the sequential slot.
  const auto& embedding_bwd = extra_[1];
  ASSERT_FALSE(embedding_bwd.collective);
  EXPECT_TRUE(eval.evaluate(embedding_bwd, {1410, 0, "none"}).ok());
  EXPECT_TRUE(contains(input_error_of([&] {
                         eval.evaluate(embedding_bwd, {1410, 12, "none"});
                       }),
                       "has no collective"));
  EXPECT_TRUE(contains(input_error_of([&] {
                         eval.evaluate(embedding_bwd, {1410, 0, "norm_0"});
                       }),
                       "no launch slot"));
  EXPECT_EQ(eval.calls(), 1);  // rejected knobs are not calls
}

TEST_F(EvaluatorTest, CountsCallsAndDeclaresCapabilities) {
  Evaluator eval = make_simulated_evaluator(gpu_);
  EXPECT_TRUE(eval.thread_safe());
  EXPECT_EQ(eval.provenance(), Provenance::kModel);
  EXPECT_EQ(eval.name(), "simulated");
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&] {
      for (int k = 0; k < 250; ++k)
        EXPECT_TRUE(eval.evaluate(part("fwd_attn"), {1410, 3 + k % 20, "linear_0"}).ok());
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(eval.calls(), 1000);
  EXPECT_EQ(eval.failures(), 0);
  Evaluator moved(std::move(eval));
  EXPECT_EQ(moved.calls(), 1000);
}

TEST_F(EvaluatorTest, NonFiniteNegativeOrThrowingResultsAreFailures) {
  for (EvalResult bad : {EvalResult::success(std::nan(""), 1), EvalResult::success(1, INFINITY),
                         EvalResult::success(-1, 1), EvalResult::success(1, -1)}) {
    Evaluator eval(std::make_unique<Scripted>(gpu_, bad));
    EXPECT_FALSE(eval.thread_safe());
    EvalResult r = eval.evaluate(part("fwd_mlp"), {1410, 12, "linear_0"});
    EXPECT_EQ(r.status, EvalStatus::kFailed);
    EXPECT_TRUE(contains(r.message, "must be finite and >= 0")) << r.message;
    EXPECT_EQ(eval.failures(), 1);
  }
  Evaluator throws(std::make_unique<Scripted>(gpu_, EvalResult::success(1, 1), true));
  EvalResult r = throws.evaluate(part("fwd_mlp"), {1410, 12, "linear_0"});
  EXPECT_EQ(r.status, EvalStatus::kFailed);
  EXPECT_TRUE(contains(r.message, "fell off the bus"));
  Evaluator unmeasured(
      std::make_unique<Scripted>(gpu_, EvalResult::failure(EvalStatus::kNotMeasured, "no")));
  EXPECT_EQ(unmeasured.evaluate(part("fwd_mlp"), {1410, 12, "none"}).status,
            EvalStatus::kNotMeasured);
  EXPECT_EQ(unmeasured.failures(), 1);
}

}  // namespace
}  // namespace kareus::evaluate
