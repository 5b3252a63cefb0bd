// The C API (kareus_runtime.h) over the C++ runtime: handles own shared references, and every
// exception becomes a status code and a thread-local message at this boundary.
#include <algorithm>
#include <cstring>
#include <memory>
#include <string>

#include "kareus/runtime/energy_monitor.hpp"
#include "kareus/runtime/fake_gpu.hpp"
#include "kareus/runtime/frequency_controller.hpp"
#include "kareus/runtime/kareus_runtime.h"
#include "kareus/runtime/nvml_gpu.hpp"
#include "kareus/runtime/plan_cursor.hpp"

using namespace kareus;
using namespace kareus::runtime;

struct kareus_clock {
  std::shared_ptr<ManualTimeSource> time;
};
struct kareus_gpu {
  std::shared_ptr<Gpu> gpu;
};
struct kareus_controller {
  std::shared_ptr<FrequencyController> controller;
};
struct kareus_cursor {
  std::shared_ptr<FrequencyController> controller;  // kept alive while the cursor uses it
  std::unique_ptr<PlanCursor> cursor;
  std::string knobs_json;
};
struct kareus_monitor {
  std::unique_ptr<EnergyMonitor> monitor;
};

namespace {

thread_local std::string g_last_error;

template <typename F>
kareus_status guarded(F&& body) noexcept {
  try {
    body();
    return KAREUS_OK;
  } catch (const GpuPermissionError& e) {
    g_last_error = e.what();
    return KAREUS_ERROR_PERMISSION;
  } catch (const DeviceError& e) {
    g_last_error = e.what();
    return KAREUS_ERROR_DEVICE;
  } catch (const InputError& e) {
    g_last_error = e.what();
    return KAREUS_ERROR_INPUT;
  } catch (const std::exception& e) {
    g_last_error = e.what();
    return KAREUS_ERROR_INTERNAL;
  } catch (...) {
    g_last_error = "unknown error";
    return KAREUS_ERROR_INTERNAL;
  }
}

template <typename T>
T& need(T* pointer, const char* what) {
  if (!pointer) throw InputError(std::string(what) + " is NULL");
  return *pointer;
}

const char* need_text(const char* text, const char* what) {
  if (!text) throw InputError(std::string(what) + " is NULL");
  return text;
}

std::vector<std::shared_ptr<Gpu>> gpu_list(kareus_gpu* const* gpus, size_t count) {
  if (!gpus && count > 0) throw InputError("gpus is NULL");
  std::vector<std::shared_ptr<Gpu>> list;
  for (size_t k = 0; k < count; ++k) list.push_back(need(gpus[k], "a GPU handle").gpu);
  return list;
}

FakeGpu& fake(const kareus_gpu* gpu) {
  auto* f = dynamic_cast<FakeGpu*>(need(gpu, "gpu").gpu.get());
  if (!f) throw InputError("this call needs a fake GPU (kareus_gpu_open_fake)");
  return *f;
}

}  // namespace

extern "C" {

const char* kareus_last_error(void) {
  return g_last_error.c_str();
}

kareus_status kareus_clock_new_manual(kareus_clock** out) {
  return guarded(
      [&] { need(out, "out") = new kareus_clock{std::make_shared<ManualTimeSource>()}; });
}

kareus_status kareus_clock_advance_s(kareus_clock* clock, double seconds) {
  return guarded([&] { need(clock, "clock").time->advance_s(seconds); });
}

kareus_status kareus_clock_now_s(const kareus_clock* clock, double* out_s) {
  return guarded([&] { need(out_s, "out_s") = need(clock, "clock").time->now_s(); });
}

void kareus_clock_free(kareus_clock* clock) {
  delete clock;
}

kareus_status kareus_gpu_count_nvml(int* out_count) {
  return guarded([&] {
    need(out_count, "out_count") =
        static_cast<int>(cuda_visible_nvml_indices(*NvmlLibrary::load()).size());
  });
}

kareus_status kareus_gpu_open_nvml(int cuda_index, kareus_gpu** out) {
  return guarded([&] { need(out, "out") = new kareus_gpu{open_nvml_gpu(cuda_index)}; });
}

kareus_status kareus_gpu_open_fake(int index, kareus_clock* clock, kareus_gpu** out) {
  return guarded([&] {
    std::shared_ptr<TimeSource> time;
    if (clock) time = clock->time;
    need(out, "out") = new kareus_gpu{std::make_shared<FakeGpu>(make_fake_gpu_config(index, time))};
  });
}

void kareus_gpu_free(kareus_gpu* gpu) {
  delete gpu;
}

kareus_status kareus_gpu_index(const kareus_gpu* gpu, int* out_index) {
  return guarded([&] { need(out_index, "out_index") = need(gpu, "gpu").gpu->index(); });
}

kareus_status kareus_gpu_name(const kareus_gpu* gpu, char* buffer, size_t size) {
  return guarded([&] {
    std::string name = need(gpu, "gpu").gpu->name();
    if (!buffer || size == 0) throw InputError("buffer is NULL or empty");
    size_t n = std::min(name.size(), size - 1);
    std::memcpy(buffer, name.data(), n);
    buffer[n] = '\0';
  });
}

kareus_status kareus_gpu_supported_sm_clocks_mhz(const kareus_gpu* gpu, int* clocks_mhz,
                                                 size_t capacity, size_t* out_count) {
  return guarded([&] {
    auto clocks = need(gpu, "gpu").gpu->supported_sm_clocks_mhz();
    std::sort(clocks.rbegin(), clocks.rend());
    if (clocks_mhz) std::copy_n(clocks.begin(), std::min(capacity, clocks.size()), clocks_mhz);
    need(out_count, "out_count") = clocks.size();
  });
}

kareus_status kareus_gpu_current_sm_clock_mhz(const kareus_gpu* gpu, int* out_mhz) {
  return guarded([&] { need(out_mhz, "out_mhz") = need(gpu, "gpu").gpu->current_sm_clock_mhz(); });
}

kareus_status kareus_gpu_total_energy_mj(const kareus_gpu* gpu, double* out_mj) {
  return guarded([&] { need(out_mj, "out_mj") = need(gpu, "gpu").gpu->total_energy_mj(); });
}

kareus_status kareus_gpu_instant_power_mw(const kareus_gpu* gpu, double* out_mw) {
  return guarded([&] { need(out_mw, "out_mw") = need(gpu, "gpu").gpu->instant_power_mw(); });
}

kareus_status kareus_fake_gpu_set_load(kareus_gpu* gpu, double load) {
  return guarded([&] { fake(gpu).set_load(load); });
}

kareus_status kareus_fake_gpu_locked_sm_clock_mhz(const kareus_gpu* gpu, int* out_locked,
                                                  int* out_mhz) {
  return guarded([&] {
    auto locked = fake(gpu).locked_sm_clocks_mhz();
    need(out_locked, "out_locked") = locked ? 1 : 0;
    if (locked) need(out_mhz, "out_mhz") = locked->second;
  });
}

kareus_status kareus_controller_new(kareus_gpu* const* gpus, size_t count,
                                    kareus_controller** out) {
  return guarded([&] {
    auto& slot = need(out, "out");
    slot = new kareus_controller{std::make_shared<FrequencyController>(gpu_list(gpus, count))};
  });
}

kareus_status kareus_controller_request_sm_clock(kareus_controller* controller, int clock_mhz) {
  return guarded([&] { need(controller, "controller").controller->request_sm_clock(clock_mhz); });
}

kareus_status kareus_controller_request_reset(kareus_controller* controller) {
  return guarded([&] { need(controller, "controller").controller->request_reset(); });
}

kareus_status kareus_controller_wait_idle(kareus_controller* controller) {
  return guarded([&] { need(controller, "controller").controller->wait_idle(); });
}

kareus_status kareus_controller_stop(kareus_controller* controller) {
  return guarded([&] { need(controller, "controller").controller->stop(); });
}

kareus_status kareus_controller_stats_of(const kareus_controller* controller, size_t position,
                                         kareus_controller_stats* out) {
  return guarded([&] {
    ControllerGpuStats s = need(controller, "controller").controller->stats(position);
    need(out, "out") = {s.requests,     s.unchanged, s.superseded,       s.snapped,
                        s.applied,      s.errors,    s.mean_latency_s(), s.median_latency_s(),
                        s.max_latency_s};
  });
}

void kareus_controller_free(kareus_controller* controller) {
  delete controller;
}

kareus_status kareus_cursor_new(const char* plan_path, int plan_index, int stage,
                                kareus_controller* controller, kareus_cursor** out) {
  return guarded([&] {
    auto& slot = need(out, "out");
    std::optional<std::size_t> index;
    if (plan_index >= 0) index = static_cast<std::size_t>(plan_index);
    auto handle = std::make_unique<kareus_cursor>();
    if (controller) handle->controller = controller->controller;
    handle->cursor = std::make_unique<PlanCursor>(PlanCursor::open(
        need_text(plan_path, "plan_path"), stage, handle->controller.get(), index));
    slot = handle.release();
  });
}

kareus_status kareus_cursor_on_instruction_begin(kareus_cursor* cursor, const char* type,
                                                 int microbatch, const char** out_knobs_json) {
  return guarded([&] {
    auto& c = need(cursor, "cursor");
    std::optional<int> mb;
    if (microbatch >= 0) mb = microbatch;
    const CommKnobs& knobs =
        c.cursor->on_instruction_begin(std::string_view(need_text(type, "type")), mb);
    c.knobs_json = plan::to_json(knobs).dump();
    if (out_knobs_json) *out_knobs_json = c.knobs_json.c_str();
  });
}

kareus_status kareus_cursor_new_frontier(const char* plans_path, const char* start, int stage,
                                         kareus_controller* controller, kareus_cursor** out) {
  return guarded([&] {
    auto& slot = need(out, "out");
    plan::Target target = start ? plan::parse_target(start) : plan::Target{};
    auto handle = std::make_unique<kareus_cursor>();
    if (controller) handle->controller = controller->controller;
    handle->cursor = std::make_unique<PlanCursor>(PlanCursor::open_frontier(
        need_text(plans_path, "plans_path"), stage, handle->controller.get(), target));
    slot = handle.release();
  });
}

kareus_status kareus_cursor_iteration(const kareus_cursor* cursor, long* out_iteration) {
  return guarded(
      [&] { need(out_iteration, "out_iteration") = need(cursor, "cursor").cursor->iteration(); });
}

kareus_status kareus_cursor_set_target_time(kareus_cursor* cursor, double target_time_s,
                                            long effective_iteration, size_t* out_plan_index) {
  return guarded([&] {
    std::size_t chosen =
        need(cursor, "cursor").cursor->set_target_time(target_time_s, effective_iteration);
    if (out_plan_index) *out_plan_index = chosen;
  });
}

kareus_status kareus_cursor_on_straggler(kareus_cursor* cursor, double iteration_time_s,
                                         long effective_iteration, size_t* out_plan_index) {
  return guarded([&] {
    std::size_t chosen =
        need(cursor, "cursor").cursor->on_straggler(iteration_time_s, effective_iteration);
    if (out_plan_index) *out_plan_index = chosen;
  });
}

kareus_status kareus_cursor_plan_index(const kareus_cursor* cursor, size_t* out_plan_index,
                                       double* out_time_s, double* out_energy_j) {
  return guarded([&] {
    const PlanCursor& c = *need(cursor, "cursor").cursor;
    if (out_plan_index) *out_plan_index = c.plan_index();
    if (out_time_s) *out_time_s = c.plan().time_s;
    if (out_energy_j) *out_energy_j = c.plan().energy_j;
  });
}

kareus_status kareus_cursor_on_step_end(kareus_cursor* cursor) {
  return guarded([&] { need(cursor, "cursor").cursor->on_step_end(); });
}

kareus_status kareus_cursor_position(const kareus_cursor* cursor, size_t* out_position) {
  return guarded(
      [&] { need(out_position, "out_position") = need(cursor, "cursor").cursor->position(); });
}

kareus_status kareus_cursor_set_cuda_stream(kareus_cursor* cursor, void* cuda_stream) {
  return guarded([&] {
    auto& c = need(cursor, "cursor");
    c.cursor->set_stream(cuda_stream_marker(cuda_stream), c.controller);
  });
}

namespace {

// A marker the C caller enqueues: each callback's closure is handed over through `arg`.
class CallerMarker final : public StreamMarker {
 public:
  CallerMarker(kareus_marker_enqueue caller_enqueue, void* user) : enqueue_(caller_enqueue), user_(user) {}
  void enqueue(std::function<void()> at_gpu) override {
    auto closure = std::make_unique<std::function<void()>>(std::move(at_gpu));
    if (enqueue_(user_, &run, closure.get()) != 0) throw DeviceError("the caller's marker could not be enqueued");
    closure.release();  // run() owns it now
  }
  std::string describe() const override { return "the caller's marker"; }

 private:
  static void run(void* arg) {
    std::unique_ptr<std::function<void()>> fn(static_cast<std::function<void()>*>(arg));
    try {
      (*fn)();
    } catch (...) {  // nothing may unwind into C
    }
  }
  kareus_marker_enqueue enqueue_;
  void* user_;
};

}  // namespace

kareus_status kareus_cursor_set_marker(kareus_cursor* cursor, kareus_marker_enqueue enqueue, void* user) {
  return guarded([&] {
    auto& c = need(cursor, "cursor");
    c.cursor->set_stream(enqueue ? std::make_shared<CallerMarker>(enqueue, user) : nullptr, c.controller);
  });
}

void kareus_cursor_free(kareus_cursor* cursor) {
  delete cursor;
}

kareus_status kareus_monitor_new(kareus_gpu* const* gpus, size_t count, const char* log_csv,
                                 kareus_clock* clock, kareus_monitor** out) {
  return guarded([&] {
    auto& slot = need(out, "out");
    EnergyMonitorOptions options;
    if (log_csv) options.log_csv = log_csv;
    if (clock) options.time = clock->time;
    slot = new kareus_monitor{std::make_unique<EnergyMonitor>(gpu_list(gpus, count), options)};
  });
}

kareus_status kareus_monitor_begin_window(kareus_monitor* monitor, const char* name) {
  return guarded([&] { need(monitor, "monitor").monitor->begin_window(need_text(name, "name")); });
}

kareus_status kareus_monitor_end_window(kareus_monitor* monitor, const char* name,
                                        double* out_elapsed_s, double* gpu_energy_j,
                                        size_t capacity) {
  return guarded([&] {
    Measurement m = need(monitor, "monitor").monitor->end_window(need_text(name, "name"));
    if (out_elapsed_s) *out_elapsed_s = m.elapsed_s;
    if (gpu_energy_j) {
      std::copy_n(m.gpu_energy_j.begin(), std::min(capacity, m.gpu_energy_j.size()), gpu_energy_j);
    }
  });
}

kareus_status kareus_monitor_cancel_window(kareus_monitor* monitor, const char* name) {
  return guarded([&] { need(monitor, "monitor").monitor->cancel_window(need_text(name, "name")); });
}

void kareus_monitor_free(kareus_monitor* monitor) {
  delete monitor;
}

}  // extern "C"
