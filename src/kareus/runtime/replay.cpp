#include "kareus/runtime/replay.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <set>
#include <tuple>

#include "kareus/core/error.hpp"
#include "kareus/hardware/gpu.hpp"
#include "kareus/schedule/dag.hpp"
#include "kareus/schedule/schedule.hpp"
#include "kareus/plan/validate.hpp"
#include "kareus/runtime/energy_monitor.hpp"
#include "kareus/runtime/fake_gpu.hpp"
#include "kareus/runtime/frequency_controller.hpp"
#include "kareus/runtime/plan_cursor.hpp"

namespace kareus::runtime {
namespace {

// The fake devices' power model for one plan (see the file comment).
struct ReplayPowerModel {
  hardware::GpuSpec shape = hardware::load_gpu_preset("a100-sxm4-40gb");
  double max_clock_mhz = 0;  // the plan's top clock, mapped onto the shape's
  double idle_w = 0;
  double peak_dynamic_w = 1;

  // Full-load dynamic power at `sm_clock_mhz` over that at the top clock, in (0, 1].
  double dynamic_scale(double sm_clock_mhz) const {
    auto dynamic_at = [&](double f) {
      return hardware::dynamic_power_w(shape, std::clamp(f, 1.0, shape.max_clock_mhz), hardware::full_load_activity(shape));
    };
    return dynamic_at(sm_clock_mhz * shape.max_clock_mhz / max_clock_mhz) / dynamic_at(shape.max_clock_mhz);
  }
  double load_for(const plan::PlannedInstruction& i) const {
    double dynamic_w = i.energy_j / i.time_s - idle_w;
    return std::clamp(dynamic_w / (peak_dynamic_w * dynamic_scale(i.freq_mhz)), 0.0, 1.0);
  }
  double power_w(double sm_clock_mhz, double load) const {
    return idle_w + load * peak_dynamic_w * dynamic_scale(sm_clock_mhz);
  }
};

// One model for every plan replayed, so that switching plans switches only clocks and loads.
ReplayPowerModel power_model_for(const std::vector<plan::Plan>& plans,
                                 std::vector<int>& clocks_mhz) {
  ReplayPowerModel model;
  model.idle_w = plans.front().p_blocking_w;
  std::set<int> clocks;
  for (const auto& plan : plans) {
    for (const auto& stage : plan.stages) {
      for (const auto& i : stage) clocks.insert(static_cast<int>(std::lround(i.freq_mhz)));
    }
  }
  double max_mhz = std::max(1410.0, static_cast<double>(*clocks.rbegin()));
  model.max_clock_mhz = max_mhz;
  double peak = 1;
  for (const auto& plan : plans) {
    for (const auto& stage : plan.stages) {
      for (const auto& i : stage) {
        peak = std::max(peak,
                        (i.energy_j / i.time_s - model.idle_w) / model.dynamic_scale(i.freq_mhz));
      }
    }
  }
  model.peak_dynamic_w = peak;
  // The device supports an A100-like grid plus every clock the plan names, so nothing is snapped.
  for (int f = 210; f <= static_cast<int>(max_mhz); f += 15) clocks.insert(f);
  clocks_mhz.assign(clocks.rbegin(), clocks.rend());
  return model;
}

// When each instruction of a plan runs in one iteration, as events in time order; at equal times
// an instruction ends before the next begins, so the stage's load switches cleanly.
struct Event {
  double time_s;
  bool begin;
  int stage;
  std::size_t position;
};

struct Timeline {
  std::vector<Event> events;
  double iteration_s = 0;
};

Timeline timeline_of(const plan::Plan& plan, const schedule::PipelineSchedule& schedule) {
  // Each instruction starts at its earliest start in the schedule's dependency DAG.
  schedule::InstructionDag dag(schedule);
  std::vector<double> durations(dag.num_nodes());
  for (std::size_t v = 0; v < dag.num_nodes(); ++v) {
    const auto& ins = dag.instruction(v);
    std::size_t position = v - dag.node_of(ins.stage, 0);
    durations[v] = plan.stages[static_cast<std::size_t>(ins.stage)][position].time_s;
  }
  std::vector<double> finish = dag.earliest_finish(std::span<const double>(durations));
  Timeline timeline;
  timeline.iteration_s = *std::max_element(finish.begin(), finish.end());
  // Starts taken from the predecessors' finishes themselves (not finish - duration, which can
  // round below the previous instruction's end and overlap it).
  std::vector<double> start(dag.num_nodes(), 0.0);
  for (std::size_t v = 0; v < dag.num_nodes(); ++v) {
    for (std::size_t k = dag.predecessor_begin(v); k < dag.predecessor_begin(v + 1); ++k) {
      start[v] = std::max(start[v], finish[dag.edge_from(dag.predecessor_edge(k))]);
    }
  }
  for (std::size_t v = 0; v < dag.num_nodes(); ++v) {
    const auto& ins = dag.instruction(v);
    std::size_t position = v - dag.node_of(ins.stage, 0);
    timeline.events.push_back({start[v], true, ins.stage, position});
    timeline.events.push_back({finish[v], false, ins.stage, position});
  }
  std::sort(timeline.events.begin(), timeline.events.end(), [](const Event& a, const Event& b) {
    return std::tie(a.time_s, a.begin, a.stage, a.position) <
           std::tie(b.time_s, b.begin, b.stage, b.position);
  });
  return timeline;
}

}  // namespace

ReplayReport replay_plans(const std::vector<plan::Plan>& plans, std::size_t start_index, const ReplayOptions& options) {
  if (options.iterations < 1) throw InputError({"", 0, 0, "--iterations"}, "must be at least 1");
  plan::validate_set(plans, options.source);
  if (start_index >= plans.size()) throw InputError({options.source, 0, 0, "plans"}, "the start plan is out of range");
  const plan::Plan& first = plans[start_index];
  auto schedule = schedule::PipelineSchedule::make(first.schedule, first.num_stages, first.num_microbatches, first.virtual_stages);
  std::vector<Timeline> timelines;
  for (const plan::Plan& p : plans) timelines.push_back(timeline_of(p, schedule));

  std::vector<int> clocks_mhz;
  ReplayPowerModel model = power_model_for(plans, clocks_mhz);
  auto time = std::make_shared<ManualTimeSource>();
  std::vector<std::shared_ptr<FakeGpu>> fakes;
  std::vector<std::shared_ptr<Gpu>> gpus;
  std::vector<std::unique_ptr<FrequencyController>> controllers;
  std::vector<PlanCursor> cursors;
  const auto& straggler = options.straggler;
  for (int s = 0; s < first.num_stages; ++s) {
    FakeGpuConfig config = make_fake_gpu_config(s, time);
    config.name = fmt::format("Fake GPU of stage {} (simulated)", s);
    config.sm_clocks_mhz = clocks_mhz;
    config.power_w = [model](double f, double load) { return model.power_w(f, load); };
    // A power limit that never binds: the plan's power is what the fake should draw.
    int limit_mw = static_cast<int>(std::ceil((model.idle_w + model.peak_dynamic_w) * 1000)) + 1000;
    config.power_limits = {limit_mw, limit_mw, limit_mw};
    fakes.push_back(std::make_shared<FakeGpu>(config));
    gpus.push_back(fakes.back());
    controllers.push_back(std::make_unique<FrequencyController>(std::vector<std::shared_ptr<Gpu>>{fakes.back()}));
    if (straggler) {
      cursors.emplace_back(plans, start_index, s, controllers.back().get(), options.source);
    } else {
      cursors.emplace_back(plans[start_index], s, controllers.back().get(), options.source);
    }
  }
  ReplayReport report;
  report.straggler_s = straggler ? straggler->slowdown * first.time_s : 0;
  if (straggler) {
    // Every rank is told the same iteration, so the whole pipeline switches at once.
    for (auto& cursor : cursors) cursor.on_straggler(report.straggler_s, straggler->iteration);
  }
  EnergyMonitorOptions monitor_options{.time = time};
  if (options.energy_log) monitor_options.log_csv = *options.energy_log;
  EnergyMonitor monitor(gpus, monitor_options);

  for (int it = 0; it < options.iterations; ++it) {
    const std::size_t index = cursors.front().plan_index();
    for (const auto& cursor : cursors) {
      KAREUS_CHECK(cursor.plan_index() == index, "the stages of one pipeline run different plans");
    }
    const Timeline& timeline = timelines[index];
    const plan::Plan& plan = plans[index];
    const double base_s = time->now_s();
    std::string window = fmt::format("iteration {}", it);
    monitor.begin_window(window);
    for (const Event& e : timeline.events) {
      time->set_s(std::max(time->now_s(), base_s + e.time_s));
      auto stage = static_cast<std::size_t>(e.stage);
      const auto& ins = plan.stages[stage][e.position];
      if (e.begin) {
        cursors[stage].on_instruction_begin(ins.type, ins.microbatch);
        // The simulated time stands still until the clock is on the device: a real loop would
        // lose the controller's latency here, which `kareus simulate` models and this does not.
        controllers[stage]->wait_idle();
        fakes[stage]->set_load(model.load_for(ins));
      } else {
        fakes[stage]->set_load(0);
      }
    }
    double wall_s = timeline.iteration_s;
    if (straggler && it >= straggler->iteration) wall_s = std::max(wall_s, report.straggler_s);
    time->set_s(std::max(time->now_s(), base_s + wall_s));
    Measurement m = monitor.end_window(window);
    for (auto& cursor : cursors) cursor.on_step_end();
    ReplayIteration r{index, m.elapsed_s, m.gpu_energy_j};
    for (double e : r.stage_energy_j) r.energy_j += e;
    // Idle time beyond a plan's own is charged at P_blocking on every stage, as the plans charge it.
    auto waiting = [&](const plan::Plan& p) { return p.energy_j + (r.time_s - p.time_s) * p.p_blocking_w * p.num_stages; };
    r.planned_energy_j = straggler ? waiting(plan) : plan.energy_j;
    r.on_start_plan_j = waiting(first);
    const double time_error = straggler ? 0 : std::abs(r.time_s - plan.time_s) / plan.time_s;
    report.worst_relative = std::max({report.worst_relative, time_error,
                                      std::abs(r.energy_j - r.planned_energy_j) / std::max(1e-12, r.planned_energy_j)});
    report.iterations.push_back(std::move(r));
  }
  for (auto& controller : controllers) controller->stop();
  const auto n = static_cast<double>(report.iterations.size());
  for (int s = 0; s < first.num_stages; ++s) {
    auto stage = static_cast<std::size_t>(s);
    ReplayStage out;
    for (const auto& r : report.iterations) {
      for (const auto& i : plans[r.plan_index].stages[stage]) out.busy_s += i.time_s;
      out.energy_j += r.stage_energy_j[stage];
    }
    out.busy_s /= n;
    out.energy_j /= n;
    out.instructions = first.stages[stage].size();
    out.clock_changes = controllers[stage]->stats(0).applied;
    report.stages.push_back(out);
  }
  return report;
}

}  // namespace kareus::runtime
