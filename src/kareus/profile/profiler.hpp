// Everything one rank of a profiling run holds, built in the right order and torn down in the
// reverse: the MPI world (or this process alone), the rank's TP and CP groups, its GPU (NVML, or a
// fake one driven by the simulated model), the runtime's frequency controller and energy monitor
// on it, the executor (CUDA, or the fake), the measurer and the session. Shared by `kareus profile`
// and `kareus plan --evaluator gpu`.
//
// Rank r uses the GPU CUDA numbers by its local rank on the node (OMPI_COMM_WORLD_LOCAL_RANK, else
// 0). The clocks are locked only through the controller, which needs the privilege to do so (the
// profiler refuses to measure without it) and resets them when the profiler is destroyed, on
// SIGINT/SIGTERM and at exit.
//
// Thread-safety: one thread per rank.
// Example:
//   Profiler profiler(model, parallel, gpu_spec, partitions, identity, {});
//   if (profiler.leader()) { auto eval = profiler.session().evaluator(); ... }
//   else profiler.session().serve();
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kareus/profile/fake_executor.hpp"
#include "kareus/profile/group.hpp"
#include "kareus/profile/measurer.hpp"
#include "kareus/profile/session.hpp"

namespace kareus::profile {

enum class DeviceKind { kNvml, kFake };
enum class CollectiveKind { kNccl, kCopy };
std::optional<DeviceKind> parse_device_kind(std::string_view text);          // "nvml" | "fake"
std::optional<CollectiveKind> parse_collective_kind(std::string_view text);  // "nccl" | "copy"

struct ProfilerOptions {
  DeviceKind device = DeviceKind::kNvml;
  CollectiveKind collective = CollectiveKind::kNccl;
  MeasurementOptions measurement;
  // Fake devices: rank r runs (1 + r · this) times slower than the model.
  double fake_rank_slowdown = 0;
  // Fake devices: faults of runtime::parse_gpu_fault, each "RANK:FAULT" for that rank's GPU, e.g.
  // "2:total_energy@5:kill" (rank 2 dies at its fifth energy reading, in its third knob's window).
  std::vector<std::string> fake_faults;
  // Fake devices: seeded noise on the model's time and energy (--noise); the device's name says it,
  // so a noisy journal never resumes a noise-free profile.
  evaluate::NoiseOptions fake_noise;
};

// Whether this build has the CUDA executor.
bool built_with_cuda_executor();

class Profiler {
 public:
  // Collective call on every rank. Throws DeviceError when the GPU or the CUDA executor cannot be
  // had ("no NVIDIA GPU ...", "built without the CUDA toolkit ..."), InputError for a world that
  // does not hold whole TP x CP groups or ranks started differently.
  Profiler(const workload::ModelSpec& model, const workload::ParallelConfig& parallel, hardware::GpuSpec gpu,
           std::vector<workload::Partition> partitions, const nlohmann::json& identity, ProfilerOptions options);
  ~Profiler();
  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;

  bool leader() const { return world_->rank() == 0; }
  Group& world() const { return *world_; }
  ProfileSession& session() const { return *session_; }
  runtime::FrequencyController& controller() const { return *controller_; }
  executor::PartitionExecutor& executor() const { return *executor_; }
  runtime::EnergyMonitor& monitor() const { return *monitor_; }
  const MeasurementOptions& measurement() const { return measurer_->options(); }
  // The fake executor and device when DeviceKind::kFake, else null.
  const FakeExecutor* fake_executor() const { return fake_executor_; }
  const runtime::FakeGpu* fake_gpu() const { return fake_gpu_.get(); }
  // Stops the session (rank 0), the controller (clocks reset) and waits for every rank.
  void close();

 private:
  std::unique_ptr<Group> world_;
  std::unique_ptr<CollectiveGroups> groups_;
  std::shared_ptr<runtime::FakeGpu> fake_gpu_;
  std::shared_ptr<runtime::Gpu> gpu_;
  std::unique_ptr<runtime::FrequencyController> controller_;
  std::unique_ptr<runtime::EnergyMonitor> monitor_;
  std::unique_ptr<executor::PartitionExecutor> executor_;
  const FakeExecutor* fake_executor_ = nullptr;
  std::unique_ptr<Measurer> measurer_;
  std::unique_ptr<ProfileSession> session_;
  bool closed_ = false;
};

// What `--evaluator gpu` gives the planner: on rank 0, an Evaluator ("gpu:<device>") that measures
// through a Profiler it owns (closed when the Evaluator is destroyed). On the other ranks this call
// serves rank 0's measurements until rank 0 is done, then returns nullopt: the caller has nothing
// left to do. Throws as the Profiler does (e.g. DeviceError on a machine without a GPU).
std::optional<evaluate::Evaluator> open_gpu_evaluator(const workload::ModelSpec& model,
                                                      const workload::ParallelConfig& parallel, hardware::GpuSpec gpu,
                                                      std::vector<workload::Partition> partitions,
                                                      const nlohmann::json& identity, ProfilerOptions options);

}  // namespace kareus::profile
