// `kareus._kareus`, the compiled half of the `kareus` Python package (python/kareus/ adds the
// Zeus-compatible classes): the runtime's GPUs, frequency controller, plan cursor and energy
// monitor for a Python training loop (Megatron, NeMo, plain PyTorch). Same calls as the C++ API;
// errors are kareus.InputError (a ValueError), kareus.DeviceError (a RuntimeError) and
// kareus.GpuPermissionError (a DeviceError).
//
//   import kareus
//   gpu = kareus.nvml_gpu(torch.cuda.current_device())
//   with kareus.FrequencyController([gpu]) as controller:
//       cursor = kareus.PlanCursor("plan.json", stage=pp_rank, controller=controller)
//       knobs = cursor.on_instruction_begin("forward")
//       # {"partitions": [{"key": "fwd_attn", "slot": "linear_1", "sms": 12}, ...], "recompute":
//       []}
//       ...
//       cursor.on_step_end()
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kareus/runtime/energy_monitor.hpp"
#include "kareus/runtime/fake_gpu.hpp"
#include "kareus/runtime/frequency_controller.hpp"
#include "kareus/runtime/nvml_gpu.hpp"
#include "kareus/runtime/plan_cursor.hpp"
#include "kareus/runtime/replay_gpu.hpp"

namespace py = pybind11;
using namespace pybind11::literals;
using namespace kareus::runtime;

namespace {

py::object to_python(const nlohmann::json& value) {
  switch (value.type()) {
    case nlohmann::json::value_t::null:
      return py::none();
    case nlohmann::json::value_t::boolean:
      return py::bool_(value.get<bool>());
    case nlohmann::json::value_t::number_integer:
      return py::int_(value.get<long long>());
    case nlohmann::json::value_t::number_unsigned:
      return py::int_(value.get<unsigned long long>());
    case nlohmann::json::value_t::number_float:
      return py::float_(value.get<double>());
    case nlohmann::json::value_t::string:
      return py::str(value.get<std::string>());
    case nlohmann::json::value_t::array: {
      py::list list;
      for (const auto& item : value) list.append(to_python(item));
      return list;
    }
    case nlohmann::json::value_t::object: {
      py::dict dict;
      for (const auto& [key, item] : value.items()) dict[py::str(key)] = to_python(item);
      return dict;
    }
    default:
      return py::none();
  }
}

// The cursor keeps its controller alive for as long as Python holds the cursor.
struct PyPlanCursor {
  std::shared_ptr<FrequencyController> controller;
  std::unique_ptr<PlanCursor> cursor;
};

// A window's measurement under both our names and Zeus's (`time`, `gpu_energy` keyed by the GPU's
// CUDA index, `total_energy`), so code written for zeus.monitor.ZeusMonitor reads it unchanged.
struct PyMeasurement {
  Measurement measurement;
  std::vector<int> gpu_indices;  // index() of each monitored GPU, in the monitor's order
};

PyMeasurement measured(const EnergyMonitor& monitor, Measurement m) {
  PyMeasurement out{std::move(m), {}};
  for (const auto& gpu : monitor.gpus()) out.gpu_indices.push_back(gpu->index());
  return out;
}

py::object knobs_dict(const CommKnobs& knobs) {
  return to_python(kareus::plan::to_json(knobs));
}

py::list instruction_list(const PlanCursor& cursor) {
  py::list list;
  for (std::size_t k = 0; k < cursor.instructions_per_iteration(); ++k) {
    const auto& i = cursor.instruction(k);
    list.append(py::dict("type"_a = std::string(kareus::schedule::to_string(i.type)),
                         "microbatch"_a = i.microbatch, "freq_mhz"_a = i.freq_mhz,
                         "time_s"_a = i.time_s, "energy_j"_a = i.energy_j,
                         "knobs"_a = knobs_dict(cursor.knobs(k))));
  }
  return list;
}

py::dict stats_dict(const ControllerGpuStats& s) {
  return py::dict("requests"_a = s.requests, "unchanged"_a = s.unchanged,
                  "superseded"_a = s.superseded, "snapped"_a = s.snapped, "applied"_a = s.applied,
                  "errors"_a = s.errors, "last_error"_a = s.last_error,
                  "mean_latency_s"_a = s.mean_latency_s(),
                  "median_latency_s"_a = s.median_latency_s(), "max_latency_s"_a = s.max_latency_s);
}

}  // namespace

PYBIND11_MODULE(_kareus, m) {
  m.doc() =
      "Kareus runtime: apply a Kareus plan's GPU clocks and communication knobs inside a "
      "training loop, and measure time and energy.";

  // Translators run newest first: the subclass must come after its base.
  static py::exception<kareus::InputError> input_error(m, "InputError", PyExc_ValueError);
  static py::exception<kareus::DeviceError> device_error(m, "DeviceError", PyExc_RuntimeError);
  static py::exception<GpuPermissionError> permission_error(m, "GpuPermissionError",
                                                            device_error.ptr());
  static py::exception<kareus::InternalError> internal_error(m, "InternalError",
                                                             PyExc_RuntimeError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const GpuPermissionError& e) {
      permission_error(e.what());
    } catch (const kareus::DeviceError& e) {
      device_error(e.what());
    } catch (const kareus::InputError& e) {
      input_error(e.what());
    } catch (const kareus::InternalError& e) {
      internal_error(e.what());
    }
  });

  py::class_<TimeSource, std::shared_ptr<TimeSource>>(m, "TimeSource")
      .def_property_readonly("now_s", &TimeSource::now_s);
  py::class_<ManualTimeSource, TimeSource, std::shared_ptr<ManualTimeSource>>(
      m, "ManualClock", "A clock that moves only when told to, for deterministic simulated runs.")
      .def(py::init<double>(), "start_s"_a = 0.0)
      .def("advance_s", &ManualTimeSource::advance_s, "seconds"_a)
      .def("set_s", &ManualTimeSource::set_s, "time_s"_a);

  py::class_<PowerLimitConstraints>(m, "PowerLimitConstraints")
      .def_readonly("min_power_limit_mw", &PowerLimitConstraints::min_power_limit_mw)
      .def_readonly("max_power_limit_mw", &PowerLimitConstraints::max_power_limit_mw)
      .def_readonly("default_power_limit_mw", &PowerLimitConstraints::default_power_limit_mw);

  py::class_<Gpu, std::shared_ptr<Gpu>>(m, "Gpu",
                                        "A GPU: clocks, power limit, energy (units in names).")
      .def_property_readonly("index", &Gpu::index)
      .def_property_readonly("name", &Gpu::name)
      .def("supported_sm_clocks_mhz", &Gpu::supported_sm_clocks_mhz)
      .def("supported_memory_clocks_mhz", &Gpu::supported_memory_clocks_mhz)
      .def("current_sm_clock_mhz", &Gpu::current_sm_clock_mhz)
      .def("set_locked_sm_clocks", &Gpu::set_locked_sm_clocks, "min_clock_mhz"_a, "max_clock_mhz"_a)
      .def("reset_locked_sm_clocks", &Gpu::reset_locked_sm_clocks)
      .def("lock_memory_clock", &Gpu::lock_memory_clock, "clock_mhz"_a)
      .def("reset_memory_clock", &Gpu::reset_memory_clock)
      .def("power_limit_constraints", &Gpu::power_limit_constraints)
      .def("power_limit_mw", &Gpu::power_limit_mw)
      .def("set_power_limit_mw", &Gpu::set_power_limit_mw, "power_limit_mw"_a)
      .def("reset_power_limit", &Gpu::reset_power_limit)
      .def("total_energy_mj", &Gpu::total_energy_mj)
      .def("instant_power_mw", &Gpu::instant_power_mw)
      .def("energy_update_period_s", &Gpu::energy_update_period_s);

  py::class_<NvmlGpu, Gpu, std::shared_ptr<NvmlGpu>>(m, "NvmlGpu")
      .def_property_readonly("nvml_index", &NvmlGpu::nvml_index)
      .def_property_readonly("has_energy_counter", &NvmlGpu::has_energy_counter);
  m.def(
      "nvml_gpu", [](int cuda_index) { return open_nvml_gpu(cuda_index); }, "cuda_index"_a,
      "The GPU CUDA numbers cuda_index in this process (honours CUDA_VISIBLE_DEVICES).");
  m.def(
      "nvml_gpus", [] { return GpuCollection::open_nvml().all(); },
      "Every GPU this process sees, in CUDA order.");

  py::class_<FakeGpu, Gpu, std::shared_ptr<FakeGpu>>(
      m, "FakeGpu",
      "A simulated A100 SXM4 40GB (the hardware DVFS model); energy advances at the power of its clock and load.")
      .def(py::init([](int index, std::shared_ptr<TimeSource> clock) {
             return std::make_shared<FakeGpu>(make_fake_gpu_config(index, std::move(clock)));
           }),
           "index"_a = 0, "clock"_a = nullptr)
      .def("set_load", &FakeGpu::set_load, "load"_a)
      .def_property_readonly("load", &FakeGpu::load)
      .def("power_w", &FakeGpu::power_w, "sm_clock_mhz"_a, "load"_a)
      .def_property_readonly("locked_sm_clock_mhz",
                             [](const FakeGpu& gpu) -> std::optional<int> {
                               auto locked = gpu.locked_sm_clocks_mhz();
                               if (!locked) return std::nullopt;
                               return locked->second;
                             })
      .def_property_readonly("locked_memory_clock_mhz", &FakeGpu::locked_memory_clock_mhz)
      .def_property_readonly("sm_clock_calls", &FakeGpu::sm_clock_calls);

  py::class_<ReplayGpu, Gpu, std::shared_ptr<ReplayGpu>>(m, "ReplayGpu",
                                                         "Plays back an EnergyMonitor CSV log.")
      .def(py::init([](const std::filesystem::path& csv_path, int index,
                       std::shared_ptr<TimeSource> clock, std::optional<double> time_offset_s) {
             return std::make_shared<ReplayGpu>(
                 csv_path, index, ReplayGpuOptions{std::move(clock), time_offset_s, {}, {}});
           }),
           "csv_path"_a, "index"_a = 0, "clock"_a = nullptr, "time_offset_s"_a = std::nullopt);

  py::class_<FrequencyController, std::shared_ptr<FrequencyController>>(
      m, "FrequencyController",
      "Sets SM clocks on worker threads (requests never block); resets them on stop, exit, "
      "SIGINT and SIGTERM. Use as a context manager.")
      .def(py::init([](std::vector<std::shared_ptr<Gpu>> gpus, bool lock_memory_clock,
                       bool reset_power_limit, bool reset_on_signals, bool require_privilege) {
             return std::make_shared<FrequencyController>(
                 std::move(gpus), FrequencyControllerOptions{lock_memory_clock, reset_power_limit,
                                                             reset_on_signals, require_privilege});
           }),
           "gpus"_a, "lock_memory_clock"_a = true, "reset_power_limit"_a = true,
           "reset_on_signals"_a = true, "require_privilege"_a = false)
      .def("request_sm_clock", py::overload_cast<int>(&FrequencyController::request_sm_clock),
           "clock_mhz"_a)
      .def("request_sm_clock",
           py::overload_cast<std::size_t, int>(&FrequencyController::request_sm_clock),
           "position"_a, "clock_mhz"_a)
      .def("request_reset", &FrequencyController::request_reset)
      .def("wait_idle", &FrequencyController::wait_idle, py::call_guard<py::gil_scoped_release>())
      .def("stop", &FrequencyController::stop, py::call_guard<py::gil_scoped_release>())
      .def(
          "stats",
          [](const FrequencyController& c, std::size_t position) {
            return stats_dict(c.stats(position));
          },
          "position"_a = 0)
      .def("report", &FrequencyController::report)
      .def_property_readonly("clocks_enabled", &FrequencyController::clocks_enabled)
      .def_property_readonly("halted", &FrequencyController::halted)
      .def("__len__", &FrequencyController::size)
      .def("__enter__", [](std::shared_ptr<FrequencyController> self) { return self; })
      .def("__exit__", [](FrequencyController& self, py::args) {
        py::gil_scoped_release release;
        self.stop();
      });

  py::class_<FakeStream, std::shared_ptr<FakeStream>>(
      m, "FakeStream",
      "A stand-in for a CUDA stream in tests: the host enqueues work of a duration (enqueue_work) and "
      "the cursor its markers; run_until(t) advances the device's time, firing every marker the device "
      "has reached.")
      .def(py::init<>())
      .def("enqueue_work", &FakeStream::enqueue_work, "duration_s"_a)
      .def("run_until", &FakeStream::run_until, "time_s"_a)
      .def("drain", &FakeStream::drain)
      .def_property_readonly("now_s", &FakeStream::now_s)
      .def_property_readonly("device_free_s", &FakeStream::device_free_s);

  py::class_<PyPlanCursor>(m, "PlanCursor",
                           "Walks one pipeline stage through a plan: checks each instruction, asks "
                           "the controller for its clock and returns its communication knobs. "
                           "PlanCursor.frontier() holds a whole plan set and switches plans for "
                           "stragglers.")
      .def(py::init([](const std::filesystem::path& plan_path, int stage,
                       std::shared_ptr<FrequencyController> controller,
                       std::optional<std::size_t> index) {
             auto cursor = std::make_unique<PlanCursor>(
                 PlanCursor::open(plan_path, stage, controller.get(), index));
             return PyPlanCursor{std::move(controller), std::move(cursor)};
           }),
           "plan_path"_a, "stage"_a, "controller"_a = nullptr, "index"_a = std::nullopt)
      .def_static(
          "frontier",
          [](const std::filesystem::path& plans_path, int stage,
             std::shared_ptr<FrequencyController> controller, const std::string& start) {
            auto cursor = std::make_unique<PlanCursor>(PlanCursor::open_frontier(
                plans_path, stage, controller.get(), kareus::plan::parse_target(start)));
            return PyPlanCursor{std::move(controller), std::move(cursor)};
          },
          "plans_path"_a, "stage"_a, "controller"_a = nullptr, "start"_a = "max-throughput",
          "Every plan of a plan set (plans.json), starting on the one `start` selects "
          "(max-throughput, min-energy, deadline:SECONDS or energy:JOULES).")
      .def(
          "on_instruction_begin",
          [](PyPlanCursor& self, const std::string& type, std::optional<int> microbatch) {
            return knobs_dict(self.cursor->on_instruction_begin(type, microbatch));
          },
          "type"_a, "microbatch"_a = std::nullopt,
          "Checks the instruction, requests its clock and returns its knobs: {'partitions': "
          "[{'key', 'slot', 'sms'}, ...], 'recompute': [...]} (docs/plan-format.md).")
      .def("on_step_end", [](PyPlanCursor& self) { self.cursor->on_step_end(); })
      .def(
          "set_stream",
          [](PyPlanCursor& self, py::object stream) {
            if (stream.is_none()) {
              self.cursor->set_stream(nullptr);
            } else if (py::isinstance<FakeStream>(stream)) {
              self.cursor->set_stream(stream.cast<std::shared_ptr<FakeStream>>(), self.controller);
            } else {
              const auto handle = stream.cast<std::uintptr_t>();
              self.cursor->set_stream(cuda_stream_marker(reinterpret_cast<void*>(handle)), self.controller);
            }
          },
          "stream"_a,
          "GPU-timed clocks: from the next instruction on, ask for each clock when the GPU reaches the "
          "instruction on `stream` (an int CUDA stream handle such as "
          "torch.cuda.current_stream().cuda_stream, or a FakeStream), the host never waiting; None: when "
          "the host begins it (the default).")
      .def_property_readonly("gpu_timed", [](const PyPlanCursor& self) { return self.cursor->gpu_timed(); })
      .def(
          "set_target_time",
          [](PyPlanCursor& self, double target_time_s, long iteration) {
            return self.cursor->set_target_time(target_time_s, iteration);
          },
          "target_time_s"_a, "iteration"_a,
          "From iteration `iteration` on, run the least-energy plan taking at most target_time_s "
          "(the fastest when none does); returns its index. Give every rank of the pipeline the "
          "same iteration, one that has not begun on it: all ranks then switch together.")
      .def(
          "on_straggler",
          [](PyPlanCursor& self, double iteration_time_s, long iteration) {
            return self.cursor->on_straggler(iteration_time_s, iteration);
          },
          "iteration_time_s"_a, "iteration"_a,
          "set_target_time with the slowest data-parallel pipeline's iteration time.")
      .def_property_readonly("stage", [](const PyPlanCursor& self) { return self.cursor->stage(); })
      .def_property_readonly("position",
                             [](const PyPlanCursor& self) { return self.cursor->position(); })
      .def_property_readonly("iteration",
                             [](const PyPlanCursor& self) { return self.cursor->iteration(); })
      .def_property_readonly("plan_index",
                             [](const PyPlanCursor& self) { return self.cursor->plan_index(); })
      .def_property_readonly("frontier_size",
                             [](const PyPlanCursor& self) { return self.cursor->frontier_size(); })
      .def_property_readonly("plan_time_s",
                             [](const PyPlanCursor& self) { return self.cursor->plan().time_s; })
      .def_property_readonly("plan_energy_j",
                             [](const PyPlanCursor& self) { return self.cursor->plan().energy_j; })
      .def_property_readonly(
          "num_stages", [](const PyPlanCursor& self) { return self.cursor->plan().num_stages; })
      .def_property_readonly(
          "instructions", [](const PyPlanCursor& self) { return instruction_list(*self.cursor); },
          "This iteration's plan for the stage: type, microbatch, freq_mhz, time_s, energy_j, "
          "knobs.");

  py::class_<PyMeasurement>(m, "Measurement",
                            "One window's time and energy; Zeus's names (time, gpu_energy, "
                            "total_energy) answer too.")
      .def_property_readonly("elapsed_s",
                             [](const PyMeasurement& me) { return me.measurement.elapsed_s; })
      .def_property_readonly("gpu_energy_j",
                             [](const PyMeasurement& me) { return me.measurement.gpu_energy_j; })
      .def_property_readonly(
          "total_energy_j", [](const PyMeasurement& me) { return me.measurement.total_energy_j(); })
      .def_property_readonly("time",
                             [](const PyMeasurement& me) { return me.measurement.elapsed_s; })
      .def_property_readonly("gpu_energy",
                             [](const PyMeasurement& me) {
                               py::dict energy;
                               for (std::size_t k = 0; k < me.gpu_indices.size(); ++k) {
                                 energy[py::int_(me.gpu_indices[k])] =
                                     me.measurement.gpu_energy_j[k];
                               }
                               return energy;
                             })
      .def_property_readonly(
          "total_energy", [](const PyMeasurement& me) { return me.measurement.total_energy_j(); })
      .def("__repr__", [](const PyMeasurement& me) {
        return "Measurement(elapsed_s=" + std::to_string(me.measurement.elapsed_s) +
               ", total_energy_j=" + std::to_string(me.measurement.total_energy_j()) + ")";
      });

  py::class_<EnergyMonitor>(m, "EnergyMonitor",
                            "Time and per-GPU energy over named windows that may nest or overlap.")
      .def(py::init([](std::vector<std::shared_ptr<Gpu>> gpus,
                       std::optional<std::filesystem::path> log_csv,
                       std::shared_ptr<TimeSource> clock, bool approximate_short_windows) {
             return std::make_unique<EnergyMonitor>(
                 std::move(gpus), EnergyMonitorOptions{std::move(log_csv), std::move(clock),
                                                       approximate_short_windows});
           }),
           "gpus"_a, "log_csv"_a = std::nullopt, "clock"_a = nullptr,
           "approximate_short_windows"_a = false)
      .def("begin_window", &EnergyMonitor::begin_window, "name"_a)
      .def(
          "end_window",
          [](EnergyMonitor& self, const std::string& name) {
            return measured(self, self.end_window(name));
          },
          "name"_a)
      .def_property_readonly("gpu_indices",
                             [](const EnergyMonitor& self) {
                               std::vector<int> indices;
                               for (const auto& gpu : self.gpus()) indices.push_back(gpu->index());
                               return indices;
                             })
      .def("cancel_window", &EnergyMonitor::cancel_window, "name"_a)
      .def("is_open", &EnergyMonitor::is_open, "name"_a);
}
