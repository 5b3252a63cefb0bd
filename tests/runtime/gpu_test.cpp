// Tests of the device layer: clock snapping, CUDA_VISIBLE_DEVICES, the fake GPU's energy and
// clocks, and NVML failing cleanly where there is no driver.
#include "kareus/runtime/gpu.hpp"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cstdlib>

#include "kareus/runtime/cuda_order.hpp"
#include "kareus/runtime/fake_gpu.hpp"
#include "kareus/runtime/nvml_gpu.hpp"
#include "runtime/runtime_test_util.hpp"

namespace kareus::runtime {
namespace {

using kareus::testing::input_error_of;
using testing::Contains;

TEST(NearestClock, PicksTheClosestAndTiesGoUp) {
  std::vector<int> clocks = {1410, 1395, 1005, 990};
  EXPECT_EQ(nearest_clock_mhz(clocks, 1000), 1005);
  EXPECT_EQ(nearest_clock_mhz(clocks, 996), 990);
  EXPECT_EQ(nearest_clock_mhz({1000, 1010}, 1005), 1010);  // a tie goes to the higher clock
  EXPECT_EQ(nearest_clock_mhz(clocks, 5000), 1410);
  EXPECT_EQ(nearest_clock_mhz(clocks, 1), 990);
  EXPECT_EQ(nearest_clock_mhz({}, 1234), 1234);
}

RC_GTEST_PROP(NearestClock, NoSupportedClockIsCloser, (std::vector<int> clocks, int target)) {
  RC_PRE(!clocks.empty());
  for (int& c : clocks) c = std::abs(c % 3000) + 1;
  target = std::abs(target % 4000);
  int chosen = nearest_clock_mhz(clocks, target);
  RC_ASSERT(std::find(clocks.begin(), clocks.end(), chosen) != clocks.end());
  for (int c : clocks) RC_ASSERT(std::abs(c - target) >= std::abs(chosen - target));
}

// Two NVML devices in bus order: an A40 at 0000:3b, an A100 at 0000:86 (NVML index 0 and 1).
std::vector<NvmlDeviceIdentity> mixed_machine() {
  return {{0, "00000000:3B:00.0", "GPU-aaaa1111-0000", "NVIDIA A40"},
          {1, "00000000:86:00.0", "GPU-bbbb2222-0000", "NVIDIA A100-SXM4-40GB"}};
}

TEST(CudaOrder, OrdinalsAreMatchedToNvmlByPciBusId) {
  // CUDA's default order puts the faster A100 first: ordinal 0 is NVML's device 1. Mapping by
  // position (what the runtime did) would set the A40's clocks for the A100's work.
  const std::vector<std::string> cuda = {"0000:86:00.0", "0000:3b:00.0"};
  EXPECT_EQ(cuda_to_nvml_indices({}, mixed_machine(), cuda), (std::vector<int>{1, 0}));
  // The driver applied CUDA_VISIBLE_DEVICES=1 (one device): the A40.
  EXPECT_EQ(cuda_to_nvml_indices({"1", std::nullopt}, mixed_machine(),
                                 std::vector<std::string>{"0000:3B:00.0"}),
            (std::vector<int>{0}));
  EXPECT_EQ(normalize_pci_bus_id("00000000:3B:00.0"), "0000:3b:00.0");
  EXPECT_TRUE(Contains(input_error_of([&] {
                         cuda_to_nvml_indices({}, mixed_machine(),
                                              std::vector<std::string>{"0000:99:00.0"});
                       }),
                       "CUDA device 0 (PCI 0000:99:00.0) matches 0 of NVML's 2 devices"));
  auto twins = mixed_machine();
  twins[1].pci_bus_id = twins[0].pci_bus_id;
  EXPECT_FALSE(input_error_of([&] {
                 cuda_to_nvml_indices({}, twins, std::vector<std::string>{"0000:3b:00.0"});
               }).empty());
}

TEST(CudaOrder, WithoutTheCudaDriverTheEnvironmentMustFixTheOrder) {
  const auto mixed = mixed_machine();
  // PCI_BUS_ID order: CUDA counts by bus, as NVML does.
  CudaEnvironment pci{"1,0", "PCI_BUS_ID"};
  EXPECT_EQ(cuda_to_nvml_indices(pci, mixed, std::nullopt), (std::vector<int>{1, 0}));
  // UUIDs (and unique prefixes) name the GPU whatever the order.
  EXPECT_EQ(cuda_to_nvml_indices({"GPU-bbbb2222", std::nullopt}, mixed, std::nullopt),
            (std::vector<int>{1}));
  // Fastest first over different GPUs: which is which only the driver knows; refused.
  std::string refused = input_error_of([&] {
    cuda_to_nvml_indices({"0", std::nullopt}, mixed, std::nullopt);
  });
  EXPECT_TRUE(Contains(refused, "CUDA_DEVICE_ORDER=PCI_BUS_ID")) << refused;
  EXPECT_TRUE(Contains(refused, "NVIDIA A100-SXM4-40GB, NVIDIA A40")) << refused;
  EXPECT_FALSE(input_error_of([&] { cuda_to_nvml_indices({}, mixed, std::nullopt); }).empty());
  // Identical GPUs: fastest first ties fall back to bus order.
  std::vector<NvmlDeviceIdentity> same = {{0, "0000:86:00.0", "GPU-1", "A100"},
                                          {1, "0000:3b:00.0", "GPU-2", "A100"},
                                          {2, "0000:07:00.0", "GPU-3", "A100"}};
  EXPECT_EQ(cuda_to_nvml_indices({}, same, std::nullopt), (std::vector<int>{2, 1, 0}));
  EXPECT_EQ(cuda_to_nvml_indices({"2,0", std::nullopt}, same, std::nullopt),
            (std::vector<int>{0, 2}));
  EXPECT_EQ(cuda_to_nvml_indices({" 1 , 2", std::nullopt}, same, std::nullopt),
            (std::vector<int>{1, 0}));
  EXPECT_TRUE(cuda_to_nvml_indices({"", std::nullopt}, same, std::nullopt).empty());
  // CUDA stops at the first invalid entry: out of range, repeated, not a number, unknown UUID.
  EXPECT_EQ(cuda_to_nvml_indices({"1,7,0", std::nullopt}, same, std::nullopt),
            (std::vector<int>{1}));
  EXPECT_EQ(cuda_to_nvml_indices({"1,1,0", std::nullopt}, same, std::nullopt),
            (std::vector<int>{1}));
  EXPECT_EQ(cuda_to_nvml_indices({"0,x,1", std::nullopt}, same, std::nullopt),
            (std::vector<int>{2}));
  EXPECT_EQ(cuda_to_nvml_indices({"GPU-3,GPU-9", std::nullopt}, same, std::nullopt),
            (std::vector<int>{2}));
  // An ambiguous UUID prefix, and MIG instances, are refused.
  EXPECT_TRUE(Contains(input_error_of([&] {
                         cuda_to_nvml_indices({"GPU-", std::nullopt}, same, std::nullopt);
                       }),
                       "names 3 GPUs"));
  EXPECT_FALSE(input_error_of([&] {
                 cuda_to_nvml_indices({"MIG-1234", std::nullopt}, same, std::nullopt);
               }).empty());
}

TEST(GpuCollection, PositionIsTheCudaIndex) {
  auto time = std::make_shared<ManualTimeSource>();
  GpuCollection gpus({std::make_shared<FakeGpu>(make_fake_gpu_config(0, time)),
                      std::make_shared<FakeGpu>(make_fake_gpu_config(1, time))});
  EXPECT_EQ(gpus.size(), 2u);
  EXPECT_EQ(gpus.at(1).index(), 1);
  EXPECT_THROW(gpus.at(2), InputError);
  EXPECT_THROW(GpuCollection({std::make_shared<FakeGpu>(make_fake_gpu_config(3, time))}),
               InputError);
}

TEST(FakeGpu, EnergyAdvancesAtThePowerOfItsClockAndLoad) {
  auto time = std::make_shared<ManualTimeSource>();
  FakeGpu gpu(make_fake_gpu_config(0, time));
  const hardware::GpuSpec a100 = hardware::load_gpu_preset("a100-sxm4-40gb");
  auto power_w = [&](double f, double load) { return model_power_w(a100, f, load); };
  EXPECT_EQ(gpu.current_sm_clock_mhz(), 1410);  // unlocked: the highest clock
  time->advance_s(2);                           // idle
  EXPECT_NEAR(gpu.total_energy_mj(), a100.static_power_w * 2 * 1000, 1e-6);

  gpu.set_locked_sm_clocks(1005, 1005);
  gpu.set_load(1.0);
  time->advance_s(0.5);
  double expected_mj = (a100.static_power_w * 2 + power_w(1005, 1.0) * 0.5) * 1000;
  EXPECT_NEAR(gpu.total_energy_mj(), expected_mj, 1e-6);
  EXPECT_NEAR(gpu.instant_power_mw(), power_w(1005, 1.0) * 1000, 1e-9);
  EXPECT_EQ(gpu.current_sm_clock_mhz(), 1005);

  gpu.reset_locked_sm_clocks();
  EXPECT_EQ(gpu.current_sm_clock_mhz(), 1410);
  // The hardware model: power falls with the clock; full load at the max clock is the TDP.
  EXPECT_GT(power_w(1410, 1.0), power_w(1005, 1.0));
  EXPECT_GT(power_w(1005, 1.0), power_w(705, 1.0));
  EXPECT_NEAR(power_w(1410, 1.0), a100.tdp_w, 1e-6 * a100.tdp_w);
}

TEST(FakeGpu, LockBetweenSupportedClocksRunsAtTheLowerOne) {
  FakeGpu gpu(make_fake_gpu_config(0, std::make_shared<ManualTimeSource>()));
  gpu.set_locked_sm_clocks(1000, 1000);
  EXPECT_EQ(gpu.current_sm_clock_mhz(), 990);
  EXPECT_THROW(gpu.set_locked_sm_clocks(1200, 1000), DeviceError);
}

TEST(FakeGpu, PowerLimitLowersTheClockUnderLoad) {
  FakeGpu gpu(make_fake_gpu_config(0, std::make_shared<ManualTimeSource>()));
  gpu.set_load(1.0);
  gpu.set_power_limit_mw(250'000);
  int capped = gpu.current_sm_clock_mhz();
  EXPECT_LT(capped, 1410);
  EXPECT_LE(gpu.instant_power_mw(), 250'000);
  EXPECT_GT(gpu.power_w(capped + 15, 1.0), 250);
  gpu.reset_power_limit();
  EXPECT_EQ(gpu.power_limit_mw(), 400'000);
  EXPECT_EQ(gpu.current_sm_clock_mhz(), 1410);
  EXPECT_THROW(gpu.set_power_limit_mw(50'000), DeviceError);
}

TEST(FakeGpu, CounterWithAnUpdatePeriodMovesInSteps) {
  auto time = std::make_shared<ManualTimeSource>();
  FakeGpuConfig config = make_fake_gpu_config(0, time);
  config.energy_update_period_s = 0.1;
  config.power_w = [](double, double) { return 100.0; };
  FakeGpu gpu(config);
  time->advance_s(0.05);
  EXPECT_EQ(gpu.total_energy_mj(), 0);
  time->advance_s(0.1);  // t = 0.15: the update at 0.1 s is visible
  EXPECT_NEAR(gpu.total_energy_mj(), 10'000, 1e-6);
  time->advance_s(0.2);  // t = 0.35: the update at 0.3 s
  EXPECT_NEAR(gpu.total_energy_mj(), 30'000, 1e-6);
}

TEST(FakeGpu, RejectsBadConfigurations) {
  FakeGpuConfig config = make_fake_gpu_config();
  config.sm_clocks_mhz.clear();
  EXPECT_THROW(FakeGpu{config}, InputError);
  config = make_fake_gpu_config();
  config.power_w = nullptr;
  EXPECT_THROW(FakeGpu{config}, InputError);
  FakeGpu gpu(make_fake_gpu_config());
  EXPECT_THROW(gpu.set_load(1.5), InputError);
}

TEST(NvmlGpu, MissingLibraryIsAClearDeviceError) {
  try {
    NvmlLibrary::load("libnvidia-ml-does-not-exist.so.1");
    FAIL() << "loading a missing library must fail";
  } catch (const DeviceError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("NVML not available: ", 0), 0u) << e.what();
    EXPECT_TRUE(Contains(e.what(), "libnvidia-ml-does-not-exist.so.1"));
  }
}

TEST(NvmlGpu, WithoutADriverEveryEntryPointFailsCleanly) {
  // On a machine with a driver this test has nothing to show.
  try {
    NvmlLibrary::load();
    GTEST_SKIP() << "NVML is available here";
  } catch (const DeviceError& e) {
    EXPECT_TRUE(Contains(e.what(), "NVML not available"));
  }
  EXPECT_THROW(open_nvml_gpu(0), DeviceError);
  EXPECT_THROW(GpuCollection::open_nvml(), DeviceError);
}

TEST(NvmlGpu, ErrorCodesMapToOneErrorTypeEach) {
  try {
    throw_nvml_error(4, "Insufficient Permissions", "nvmlDeviceSetGpuLockedClocks", 1);
  } catch (const GpuPermissionError& e) {
    EXPECT_TRUE(
        Contains(e.what(), "GPU 1: nvmlDeviceSetGpuLockedClocks failed: Insufficient Permissions"));
    EXPECT_TRUE(Contains(e.what(), "NVML_ERROR_NO_PERMISSION"));
    EXPECT_TRUE(Contains(e.what(), "root or the CAP_SYS_ADMIN capability"));
  }
  EXPECT_THROW(throw_nvml_error(3, "Not Supported", "nvmlDeviceGetTotalEnergyConsumption", 0),
               GpuNotSupportedError);
  try {
    throw_nvml_error(15, "GPU is lost", "nvmlDeviceGetPowerUsage", 0);
  } catch (const GpuPermissionError&) {
    FAIL();
  } catch (const GpuNotSupportedError&) {
    FAIL();
  } catch (const DeviceError& e) {
    EXPECT_TRUE(Contains(e.what(), "NVML_ERROR_GPU_IS_LOST"));
  }
  try {
    throw_nvml_error(12345, "Something new", "nvmlDeviceGetName", 0);
  } catch (const DeviceError& e) {
    EXPECT_TRUE(Contains(e.what(), "NVML error 12345"));
  }
}

}  // namespace
}  // namespace kareus::runtime
