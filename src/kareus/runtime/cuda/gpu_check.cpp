// kareus_gpu_check (run by scripts/gpu-check.sh): on a machine with an NVIDIA GPU, lists its
// clocks, measures how long locking the SM clock takes, runs the same busy kernel at the highest
// and a low clock through the frequency controller and the energy monitor (time, energy, power),
// times a GPU-timed clock change (a stream marker) and the host time it saves against a loop that
// synchronises at every instruction, and shows the clocks were reset after. Without a GPU it says so and exits 0; without the CUDA
// toolkit at build time it skips the kernel.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <numeric>
#include <thread>
#include <vector>

#include "kareus/runtime/energy_monitor.hpp"
#include "kareus/runtime/frequency_controller.hpp"
#include "kareus/runtime/nvml_gpu.hpp"
#include "kareus/runtime/stream_marker.hpp"

#ifdef KAREUS_HAVE_CUDA
#include "busy_kernel.hpp"
#endif

namespace {

using namespace kareus::runtime;

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::string clock_list(const std::vector<int>& clocks) {
  if (clocks.empty()) return "(not reported)";
  if (clocks.size() <= 6) return fmt::format("{} MHz", fmt::join(clocks, ", "));
  return fmt::format("{} .. {} MHz ({} clocks; {}, {}, {}, ...)", clocks.front(), clocks.back(),
                     clocks.size(), clocks[0], clocks[1], clocks[2]);
}

struct LatencySummary {
  double median_ms, mean_ms, max_ms;
};

LatencySummary summarize(std::vector<double> seconds) {
  std::sort(seconds.begin(), seconds.end());
  double sum = std::accumulate(seconds.begin(), seconds.end(), 0.0);
  return {seconds[seconds.size() / 2] * 1e3, sum / static_cast<double>(seconds.size()) * 1e3,
          seconds.back() * 1e3};
}

#ifdef KAREUS_HAVE_CUDA
// GPU-timed clocks (PlanCursor::set_stream): a marker behind queued work fires when the GPU reaches
// it, and the controller then sets the clock. Measures when the marker fires against when the work
// before it ends, how long after it the new clock is in effect, and the host time per instruction
// of a loop that synchronises at every instruction (Zeus's optimizer) against one that enqueues a
// marker instead.
void gpu_timed_check(NvmlGpu& gpu, FrequencyController& controller, int max_mhz, int low_mhz, double per_launch_s) {
  auto cuda = [](const std::string& error) {
    if (!error.empty()) throw kareus::DeviceError("CUDA: " + error);
  };
  auto marker = cuda_stream_marker(nullptr);  // the legacy default stream the busy kernel runs on
  controller.request_sm_clock(max_mhz);
  controller.wait_idle();
  const long launches = std::max(1L, static_cast<long>(0.3 / per_launch_s));
  std::atomic<double> fired_s{-1};
  const auto t0 = std::chrono::steady_clock::now();
  cuda(cuda_check::busy_start(launches));
  marker->enqueue([&] {
    fired_s = seconds_since(t0);
    controller.request_sm_clock(low_mhz);
  });
  const double enqueued_s = seconds_since(t0);
  double in_effect_s = -1;
  while (seconds_since(t0) < 5 && in_effect_s < 0) {
    if (fired_s >= 0 && gpu.current_sm_clock_mhz() <= low_mhz + 15) in_effect_s = seconds_since(t0);
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  double work_s = 0;
  cuda(cuda_check::busy_wait(&work_s));
  fmt::print(
      "\nGPU-timed clock change (a marker after {:.0f} ms of queued work, enqueued in {:.3f} ms):\n"
      "  marker fired at {:.2f} ms (the work took {:.2f} ms on the GPU); {} MHz in effect {:.2f} ms after the marker\n",
      work_s * 1e3, enqueued_s * 1e3, fired_s * 1e3, work_s * 1e3, low_mhz,
      in_effect_s < 0 ? -1.0 : (in_effect_s - fired_s) * 1e3);

  // 20 instructions of about 2 ms each: the host's time per instruction either way.
  const long per_instruction = std::max(1L, static_cast<long>(2e-3 / per_launch_s));
  double gpu_s = 0, sync_host_s = 0;
  for (int k = 0; k < 20; ++k) {
    const auto start = std::chrono::steady_clock::now();
    cuda(cuda_check::busy_wait(&gpu_s));  // the device drained, as torch.cuda.synchronize does
    controller.request_sm_clock(k % 2 ? max_mhz : low_mhz);
    cuda(cuda_check::busy_start(per_instruction));
    sync_host_s += seconds_since(start);
  }
  cuda(cuda_check::busy_wait(&gpu_s));
  const auto start = std::chrono::steady_clock::now();
  for (int k = 0; k < 20; ++k) {
    const int mhz = k % 2 ? max_mhz : low_mhz;
    marker->enqueue([&controller, mhz] { controller.request_sm_clock(mhz); });
    cuda(cuda_check::busy_start(per_instruction));
  }
  const double timed_host_s = seconds_since(start);
  cuda(cuda_check::busy_wait(&gpu_s));
  fmt::print("  host time per instruction: {:.3f} ms synchronising, {:.3f} ms GPU-timed (20 instructions of "
             "{:.2f} ms)\n",
             sync_host_s / 20 * 1e3, timed_host_s / 20 * 1e3, static_cast<double>(per_instruction) * per_launch_s * 1e3);
  controller.wait_idle();
}
#endif

int run(int cuda_index, double target_s) {
  std::shared_ptr<NvmlGpu> gpu;
  try {
    gpu = open_nvml_gpu(cuda_index);
  } catch (const kareus::DeviceError& e) {
    fmt::print(
        "gpu-check: no NVIDIA GPU to check on this machine ({}).\n"
        "gpu-check: the build works; nothing else to do here.\n",
        e.what());
    return 0;
  } catch (const kareus::InputError& e) {
    fmt::print("gpu-check: no usable NVIDIA GPU: {}.\n", e.what());
    return 0;
  }

  auto sm_clocks = gpu->supported_sm_clocks_mhz();
  auto limits = gpu->power_limit_constraints();
  fmt::print("GPU {}: {} (NVML index {})\n", gpu->index(), gpu->name(), gpu->nvml_index());
  fmt::print("  SM clocks:      {}\n", clock_list(sm_clocks));
  fmt::print("  memory clocks:  {}\n", clock_list(gpu->supported_memory_clocks_mhz()));
  fmt::print("  power limit:    {:.0f} W (default {:.0f} W, range {:.0f}-{:.0f} W)\n",
             gpu->power_limit_mw() / 1e3, limits.default_power_limit_mw / 1e3,
             limits.min_power_limit_mw / 1e3, limits.max_power_limit_mw / 1e3);
  fmt::print("  energy counter: {}; SM clock now {} MHz; power now {:.1f} W\n",
             gpu->has_energy_counter() ? "yes" : "no (integrating sampled power)",
             gpu->current_sm_clock_mhz(), gpu->instant_power_mw() / 1e3);
  if (sm_clocks.empty()) {
    fmt::print("gpu-check: the GPU reports no SM clocks; clock locking cannot be checked.\n");
    return 1;
  }
  const int max_mhz = sm_clocks.front();
  const int low_mhz = nearest_clock_mhz(sm_clocks, max_mhz / 2);

  // Latency of the raw NVML setter, alternating so that every call changes the clock.
  std::vector<double> set_s;
  double reset_s = 0;
  try {
    for (int k = 0; k < 20; ++k) {
      int mhz = k % 2 == 0 ? max_mhz : low_mhz;
      auto start = std::chrono::steady_clock::now();
      gpu->set_locked_sm_clocks(mhz, mhz);
      set_s.push_back(seconds_since(start));
    }
    auto start = std::chrono::steady_clock::now();
    gpu->reset_locked_sm_clocks();
    reset_s = seconds_since(start);
  } catch (const GpuPermissionError& e) {
    fmt::print("gpu-check: cannot lock clocks: {}\n", e.what());
    try {
      gpu->reset_locked_sm_clocks();
    } catch (const kareus::DeviceError&) {
    }
    return 1;
  }
  LatencySummary latency = summarize(set_s);
  fmt::print(
      "\nLocking the SM clock (nvmlDeviceSetGpuLockedClocks), 20 calls alternating {} / {} MHz:\n"
      "  median {:.2f} ms, mean {:.2f} ms, max {:.2f} ms; reset {:.2f} ms\n",
      max_mhz, low_mhz, latency.median_ms, latency.mean_ms, latency.max_ms, reset_s * 1e3);

#ifdef KAREUS_HAVE_CUDA
  int sm_count = 0;
  auto cuda = [](const std::string& error) {
    if (!error.empty()) throw kareus::DeviceError("CUDA: " + error);
  };
  cuda(cuda_check::busy_init(cuda_index, &sm_count));
  double per_launch_s = 0;
  {
    FrequencyController controller({gpu});
    EnergyMonitor monitor({gpu});
    // Size the work at the highest clock, then run the same work at each clock.
    controller.request_sm_clock(max_mhz);
    controller.wait_idle();
    double probe_s = 0;
    cuda(cuda_check::busy_start(20));
    cuda(cuda_check::busy_wait(&probe_s));
    per_launch_s = std::max(1e-6, probe_s / 20);
    long launches = std::max(1L, static_cast<long>(target_s / per_launch_s));
    fmt::print("\nBusy kernel ({} SMs), the same {} launches at each clock, one GPU:\n", sm_count,
               launches);
    fmt::print("  {:>11} {:>10} {:>10} {:>11} {:>10} {:>16}\n", "clock (MHz)", "time (s)",
               "GPU (s)", "energy (J)", "power (W)", "SM clock seen");
    for (int mhz : {max_mhz, low_mhz}) {
      controller.request_sm_clock(mhz);
      controller.wait_idle();
      std::string window = fmt::format("busy@{}", mhz);
      monitor.begin_window(window);
      cuda(cuda_check::busy_start(launches));
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      int seen_mhz = gpu->current_sm_clock_mhz();
      double gpu_s = 0;
      cuda(cuda_check::busy_wait(&gpu_s));
      Measurement m = monitor.end_window(window);
      fmt::print("  {:>11} {:>10.3f} {:>10.3f} {:>11.1f} {:>10.1f} {:>12} MHz\n", mhz, m.elapsed_s,
                 gpu_s, m.total_energy_j(), m.total_energy_j() / m.elapsed_s, seen_mhz);
    }
    gpu_timed_check(*gpu, controller, max_mhz, low_mhz, per_launch_s);
    controller.stop();
    fmt::print("\nFrequency controller:\n  {}", controller.report());
  }
  // After the controller stopped: the clock should follow the driver again under load.
  double after_s = 0;
  cuda(cuda_check::busy_start(std::max(1L, static_cast<long>(1.5 / per_launch_s))));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  int after_mhz = gpu->current_sm_clock_mhz();
  cuda(cuda_check::busy_wait(&after_s));
  fmt::print("\nAfter stop: SM clock under load {} MHz (low clock was {} MHz): locked clocks {}.\n",
             after_mhz, low_mhz, after_mhz > low_mhz ? "released" : "STILL LOCKED?");
  return after_mhz > low_mhz ? 0 : 1;
#else
  (void)target_s;
  fmt::print(
      "\nBuilt without the CUDA toolkit: the busy-kernel part is skipped. Clocks were reset; "
      "SM clock now {} MHz.\n",
      gpu->current_sm_clock_mhz());
  return 0;
#endif
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Checks GPU clock control and energy measurement on this machine's NVIDIA GPU"};
  int gpu = 0;
  double target_s = 4;
  app.add_option("--gpu", gpu, "GPU index as CUDA numbers it")->capture_default_str();
  app.add_option("--seconds", target_s, "Busy-kernel time at the highest clock")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  spdlog::set_pattern("gpu-check: %v");
  try {
    return run(gpu, target_s);
  } catch (const std::exception& e) {
    fmt::print(stderr, "gpu-check: error: {}\n", e.what());
    return 1;
  }
}
