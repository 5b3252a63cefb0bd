#include "kareus/profile/profiler.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <charconv>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "kareus/core/error.hpp"
#include "kareus/runtime/nvml_gpu.hpp"

#ifdef KAREUS_HAVE_CUDA_EXECUTOR
#include "kareus/executor/cuda/cuda_executor.hpp"
#endif

namespace kareus::profile {
namespace {

int local_rank() {
  const char* text = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK");
  return text == nullptr ? 0 : std::atoi(text);
}

// Keeps the profiler alive as long as the evaluator measuring through it.
class OwningEvaluator final : public evaluate::EvaluatorImpl {
 public:
  explicit OwningEvaluator(std::unique_ptr<Profiler> profiler)
      : profiler_(std::move(profiler)), inner_(profiler_->session().evaluator()) {}
  std::string name() const override { return inner_.name(); }
  evaluate::Provenance provenance() const override { return inner_.provenance(); }
  bool thread_safe() const override { return false; }
  const hardware::GpuSpec& gpu() const override { return inner_.gpu(); }
  evaluate::EvalResult evaluate(const workload::Partition& partition, const workload::Knob& knob) const override {
    return inner_.impl().evaluate(partition, knob);
  }

 private:
  std::unique_ptr<Profiler> profiler_;
  evaluate::Evaluator inner_;
};

// The faults of `rank` among "RANK:FAULT" texts; every rank parses them all, so a bad one is
// refused everywhere alike.
std::vector<runtime::GpuFault> rank_faults(const std::vector<std::string>& texts, int rank) {
  std::vector<runtime::GpuFault> faults;
  for (const std::string& text : texts) {
    const std::size_t colon = text.find(':');
    int fault_rank = -1;
    const char* end = text.data() + (colon == std::string::npos ? 0 : colon);
    auto [stop, ec] = std::from_chars(text.data(), end, fault_rank);
    if (colon == std::string::npos || ec != std::errc() || stop != end || fault_rank < 0) {
      throw InputError({"", 0, 0, "--fake-fault"}, fmt::format("expected RANK:FAULT, got '{}'", text));
    }
    runtime::GpuFault fault;
    try {
      fault = runtime::parse_gpu_fault(std::string_view(text).substr(colon + 1));
    } catch (const InputError& e) {
      throw InputError({"", 0, 0, "--fake-fault"}, e.what());
    }
    if (fault_rank == rank) faults.push_back(fault);
  }
  return faults;
}

}  // namespace

std::optional<evaluate::Evaluator> open_gpu_evaluator(const workload::ModelSpec& model,
                                                      const workload::ParallelConfig& parallel, hardware::GpuSpec gpu,
                                                      std::vector<workload::Partition> partitions,
                                                      const nlohmann::json& identity, ProfilerOptions options) {
  auto profiler = std::make_unique<Profiler>(model, parallel, std::move(gpu), std::move(partitions), identity,
                                             std::move(options));
  if (!profiler->leader()) {
    profiler->session().serve();
    profiler->close();
    return std::nullopt;
  }
  return evaluate::Evaluator(std::make_unique<OwningEvaluator>(std::move(profiler)));
}

std::optional<DeviceKind> parse_device_kind(std::string_view text) {
  if (text == "nvml") return DeviceKind::kNvml;
  if (text == "fake") return DeviceKind::kFake;
  return std::nullopt;
}

std::optional<CollectiveKind> parse_collective_kind(std::string_view text) {
  if (text == "nccl") return CollectiveKind::kNccl;
  if (text == "copy") return CollectiveKind::kCopy;
  return std::nullopt;
}

bool built_with_cuda_executor() {
#ifdef KAREUS_HAVE_CUDA_EXECUTOR
  return true;
#else
  return false;
#endif
}

Profiler::Profiler(const workload::ModelSpec& model, const workload::ParallelConfig& parallel, hardware::GpuSpec gpu,
                   std::vector<workload::Partition> partitions, const nlohmann::json& identity,
                   ProfilerOptions options) {
  world_ = open_world_group();
  groups_ = std::make_unique<CollectiveGroups>(*world_, parallel);
  const int rank = world_->rank();
  std::string device_name;
  MeasurementOptions measurement = options.measurement;
  runtime::FrequencyControllerOptions control;
  if (options.device == DeviceKind::kFake) {
    // The fake's clock moves only with the simulated work: a 5 s window costs no real time, and
    // the cool-down is the one real wait (so that a run has a pace to interrupt).
    auto time = std::make_shared<runtime::ManualTimeSource>();
    runtime::FakeGpuConfig fake_config = runtime::make_fake_gpu_config(gpu, 0, time);
    fake_config.faults = rank_faults(options.fake_faults, rank);
    fake_gpu_ = std::make_shared<runtime::FakeGpu>(std::move(fake_config));
    gpu_ = fake_gpu_;
    FakeExecutorOptions fake;
    fake.slowdown = 1 + rank * options.fake_rank_slowdown;
    fake.noise = options.fake_noise;
    auto executor = std::make_unique<FakeExecutor>(gpu, fake_gpu_, time, groups_.get(), fake);
    fake_executor_ = executor.get();
    executor_ = std::move(executor);
    measurement.idle = [time](double seconds) {
      std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
      time->advance_s(seconds);
    };
    device_name = fmt::format("fake {} x{}", gpu.display_name, world_->size());
    if (options.fake_noise.sigma > 0) device_name += fmt::format("+{}", evaluate::describe_noise(options.fake_noise));
    monitor_ = std::make_unique<runtime::EnergyMonitor>(std::vector<std::shared_ptr<runtime::Gpu>>{gpu_},
                                                        runtime::EnergyMonitorOptions{.time = time});
  } else {
    const int cuda_index = local_rank();
    std::shared_ptr<runtime::NvmlGpu> nvml;
    try {
      nvml = runtime::open_nvml_gpu(cuda_index);
    } catch (const DeviceError& e) {
      throw DeviceError(fmt::format("measuring on the GPU needs an NVIDIA GPU, and rank {} has none ({})", rank,
                                    e.what()));
    }
    gpu_ = nvml;
#ifdef KAREUS_HAVE_CUDA_EXECUTOR
    executor::CudaExecutorOptions cuda;
    cuda.cuda_device = cuda_index;
    cuda.collective = options.collective == CollectiveKind::kNccl ? executor::CollectiveBackend::kNccl
                                                                  : executor::CollectiveBackend::kCopy;
    cuda.model = model;
    cuda.parallel = parallel;
    cuda.peers = [groups = groups_.get()](workload::ParallelGroup which) {
      Group& g = groups->of(which);
      return executor::CudaCollectivePeers{g.rank(), g.size(), [&g](std::string& bytes) { g.broadcast(bytes); }};
    };
    cuda.world = [world = world_.get()] {
      return executor::CudaCollectivePeers{world->rank(), world->size(),
                                           [world](std::string& bytes) { world->broadcast(bytes); }};
    };
    executor_ = executor::make_cuda_executor(std::move(cuda));
#else
    (void)model;
    throw DeviceError("measuring on the GPU needs the CUDA executor, and this kareus was built without the CUDA "
                      "toolkit (install it and rebuild)");
#endif
    device_name = fmt::format("{} x{} ({}", nvml->name(), world_->size(),
                              options.collective == CollectiveKind::kNccl ? "nccl" : "copy kernel");
    control.require_privilege = true;
    monitor_ = std::make_unique<runtime::EnergyMonitor>(std::vector<std::shared_ptr<runtime::Gpu>>{gpu_});
  }
  if (options.collective == CollectiveKind::kNccl && world_->size() == 1 && options.device == DeviceKind::kNvml) {
    for (const auto& p : partitions) {
      if (p.collective && p.collective->ranks > 1) {
        throw InputError({"", 0, 0, "--collective"},
                         fmt::format("partition {}'s collective spans {} GPUs: run one rank per GPU (mpirun -np {}) "
                                     "or stand in for them with --collective copy",
                                     p.key, p.collective->ranks, parallel.tp * parallel.cp));
      }
    }
  }
  if (options.device == DeviceKind::kNvml) {
    // Every partition prepared up front (a collective call: the same on every rank), so that the
    // header and the journals name how each runs where the executor had a choice (attention
    // through cuDNN's fused SDPA, or the fallback and why).
    for (const auto& p : partitions) executor_->prepare(p);
    const std::string details = executor_->details();
    device_name += details.empty() ? ")" : "; " + details + ")";
  }
  controller_ = std::make_unique<runtime::FrequencyController>(std::vector<std::shared_ptr<runtime::Gpu>>{gpu_}, control);
  measurer_ = std::make_unique<Measurer>(*world_, *executor_, *controller_, *monitor_, measurement);
  session_ = std::make_unique<ProfileSession>(*world_, std::move(partitions), *measurer_, std::move(gpu), device_name,
                                              identity);
}

void Profiler::close() {
  if (closed_) return;
  closed_ = true;
  session_->finish();
  controller_->stop();
  world_->barrier();
}

Profiler::~Profiler() {
  try {
    close();
  } catch (const std::exception& e) {
    spdlog::error("profile: closing: {}", e.what());
  }
}

}  // namespace kareus::profile
