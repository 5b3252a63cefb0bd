// `kareus replay`: runs a plan's instruction stream through the runtime (plan cursors, frequency
// controllers, energy monitor) against simulated GPUs, one per stage, on an injected clock that
// follows the plan's instruction times, so the whole loop can be seen without hardware, instantly
// and deterministically.
//
// Each fake GPU draws P_blocking when idle and, while an instruction runs, a load chosen so that
// it draws the instruction's planned power at the instruction's planned clock (the load scales the
// A100 preset's DVFS model of dynamic power, stretched to the plan's top clock). The measured energy therefore equals the plan's exactly when, and
// only when, every clock reaches the device before its instruction starts; a clock that is late,
// wrong or snapped shows up as a difference.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <set>
#include <tuple>

#include "kareus/cli/commands.hpp"
#include "kareus/core/error.hpp"
#include "kareus/hardware/gpu.hpp"
#include "kareus/pipeline/dag.hpp"
#include "kareus/pipeline/schedule.hpp"
#include "kareus/runtime/energy_monitor.hpp"
#include "kareus/runtime/fake_gpu.hpp"
#include "kareus/runtime/frequency_controller.hpp"
#include "kareus/runtime/plan_cursor.hpp"

namespace kareus::cli {
namespace {

struct ReplayFlags {
  std::string plan;
  std::optional<std::size_t> index;
  std::string gpu = "fake";
  int iterations = 1;
  std::string energy_log;
};

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

ReplayPowerModel power_model_for(const plan::Plan& plan, std::vector<int>& clocks_mhz) {
  ReplayPowerModel model;
  model.idle_w = plan.p_blocking_w;
  std::set<int> clocks;
  for (const auto& stage : plan.stages) {
    for (const auto& i : stage) clocks.insert(static_cast<int>(std::lround(i.freq_mhz)));
  }
  double max_mhz = std::max(1410.0, static_cast<double>(*clocks.rbegin()));
  model.max_clock_mhz = max_mhz;
  double peak = 1;
  for (const auto& stage : plan.stages) {
    for (const auto& i : stage) {
      peak = std::max(peak, (i.energy_j / i.time_s - model.idle_w) / model.dynamic_scale(i.freq_mhz));
    }
  }
  model.peak_dynamic_w = peak;
  // The device supports an A100-like grid plus every clock the plan names, so nothing is snapped.
  for (int f = 210; f <= static_cast<int>(max_mhz); f += 15) clocks.insert(f);
  clocks_mhz.assign(clocks.rbegin(), clocks.rend());
  return model;
}

void check_plan(const plan::Plan& plan, const pipeline::PipelineSchedule& schedule,
                const std::string& source) {
  for (int s = 0; s < plan.num_stages; ++s) {
    auto order = schedule.stage_order(s);
    const auto& planned = plan.stages[static_cast<std::size_t>(s)];
    if (planned.size() != order.size()) {
      throw InputError(
          {source, 0, 0, fmt::format("stages[{}].instructions", s)},
          fmt::format("has {} instructions; {} with {} microbatches has {}", planned.size(),
                      pipeline::to_string(plan.schedule), plan.num_microbatches, order.size()));
    }
    for (std::size_t k = 0; k < order.size(); ++k) {
      const auto& i = planned[k];
      if (i.type != order[k].type || i.microbatch != order[k].microbatch) {
        throw InputError(
            {source, 0, 0, fmt::format("stages[{}].instructions[{}]", s, k)},
            fmt::format("is {} of microbatch {}; the {} schedule runs {} of microbatch {} here",
                        pipeline::to_string(i.type), i.microbatch,
                        pipeline::to_string(plan.schedule), pipeline::to_string(order[k].type),
                        order[k].microbatch));
      }
      if (!(i.time_s > 0) || !std::isfinite(i.time_s) || !(i.energy_j >= 0) ||
          !std::isfinite(i.energy_j)) {
        throw InputError({source, 0, 0, fmt::format("stages[{}].instructions[{}]", s, k)},
                         "needs a positive time_s and a non-negative energy_j");
      }
    }
  }
}

int run_replay(const ReplayFlags& flags) {
  if (flags.iterations < 1) throw InputError({"", 0, 0, "--iterations"}, "must be at least 1");
  plan::Plan plan = plan::read_plan(flags.plan, flags.index);
  std::string source =
      flags.index ? fmt::format("{} plans[{}]", flags.plan, *flags.index) : flags.plan;
  auto schedule =
      pipeline::PipelineSchedule::make(plan.schedule, plan.num_stages, plan.num_microbatches, plan.virtual_stages);
  check_plan(plan, schedule, source);

  // When each instruction runs: its earliest start in the schedule's dependency DAG.
  pipeline::InstructionDag dag(schedule);
  std::vector<double> durations(dag.num_nodes());
  for (std::size_t v = 0; v < dag.num_nodes(); ++v) {
    const auto& ins = dag.instruction(v);
    std::size_t position = v - dag.node_of(ins.stage, 0);
    durations[v] = plan.stages[static_cast<std::size_t>(ins.stage)][position].time_s;
  }
  std::vector<double> finish = dag.earliest_finish(std::span<const double>(durations));
  const double iteration_s = *std::max_element(finish.begin(), finish.end());
  // Starts taken from the predecessors' finishes themselves (not finish - duration, which can
  // round below the previous instruction's end and overlap it).
  std::vector<double> start(dag.num_nodes(), 0.0);
  for (std::size_t v = 0; v < dag.num_nodes(); ++v) {
    for (std::size_t k = dag.predecessor_begin(v); k < dag.predecessor_begin(v + 1); ++k) {
      start[v] = std::max(start[v], finish[dag.edge_from(dag.predecessor_edge(k))]);
    }
  }

  // Events of one iteration, in time order; at equal times an instruction ends before the next
  // begins, so the stage's load switches cleanly.
  struct Event {
    double time_s;
    bool begin;
    int stage;
    std::size_t position;
  };
  std::vector<Event> events;
  for (std::size_t v = 0; v < dag.num_nodes(); ++v) {
    const auto& ins = dag.instruction(v);
    std::size_t position = v - dag.node_of(ins.stage, 0);
    events.push_back({start[v], true, ins.stage, position});
    events.push_back({finish[v], false, ins.stage, position});
  }
  std::sort(events.begin(), events.end(), [](const Event& a, const Event& b) {
    return std::tie(a.time_s, a.begin, a.stage, a.position) <
           std::tie(b.time_s, b.begin, b.stage, b.position);
  });

  std::vector<int> clocks_mhz;
  ReplayPowerModel model = power_model_for(plan, clocks_mhz);
  auto time = std::make_shared<runtime::ManualTimeSource>();
  std::vector<std::shared_ptr<runtime::FakeGpu>> fakes;
  std::vector<std::shared_ptr<runtime::Gpu>> gpus;
  std::vector<std::unique_ptr<runtime::FrequencyController>> controllers;
  std::vector<runtime::PlanCursor> cursors;
  for (int s = 0; s < plan.num_stages; ++s) {
    runtime::FakeGpuConfig config = runtime::make_fake_gpu_config(s, time);
    config.name = fmt::format("Fake GPU of stage {} (simulated)", s);
    config.sm_clocks_mhz = clocks_mhz;
    config.power_w = [model](double f, double load) { return model.power_w(f, load); };
    // A power limit that never binds: the plan's power is what the fake should draw.
    int limit_mw = static_cast<int>(std::ceil((model.idle_w + model.peak_dynamic_w) * 1000)) + 1000;
    config.power_limits = {limit_mw, limit_mw, limit_mw};
    fakes.push_back(std::make_shared<runtime::FakeGpu>(config));
    gpus.push_back(fakes.back());
    controllers.push_back(std::make_unique<runtime::FrequencyController>(
        std::vector<std::shared_ptr<runtime::Gpu>>{fakes.back()}));
    cursors.emplace_back(plan, s, controllers.back().get(), source);
  }
  runtime::EnergyMonitorOptions monitor_options{.time = time};
  if (!flags.energy_log.empty()) monitor_options.log_csv = flags.energy_log;
  runtime::EnergyMonitor monitor(gpus, monitor_options);

  struct IterationResult {
    double time_s;
    std::vector<double> stage_energy_j;
  };
  std::vector<IterationResult> results;
  for (int it = 0; it < flags.iterations; ++it) {
    const double base_s = time->now_s();
    std::string window = fmt::format("iteration {}", it);
    monitor.begin_window(window);
    for (const Event& e : events) {
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
    time->set_s(std::max(time->now_s(), base_s + iteration_s));
    runtime::Measurement m = monitor.end_window(window);
    for (auto& cursor : cursors) cursor.on_step_end();
    results.push_back({m.elapsed_s, m.gpu_energy_j});
  }
  for (auto& controller : controllers) controller->stop();

  fmt::print(
      "Replay of {} on {} fake GPUs, one per stage (simulated: a model, not a measurement)\n",
      source, plan.num_stages);
  fmt::print(
      "Fake GPUs draw P_blocking = {} W when idle and each instruction's planned power at its "
      "planned clock,\nso measured equals planned when every clock reaches the GPU in time.\n",
      plan.p_blocking_w);
  fmt::print("Energy: {}\n", plan.energy_scope);
  fmt::print("  {:>9} {:>12} {:>14} {:>17} {:>19}\n", "iteration", "time (s)", "energy (J)",
             "planned time (s)", "planned energy (J)");
  double worst_rel = 0;
  for (std::size_t it = 0; it < results.size(); ++it) {
    double energy_j = 0;
    for (double e : results[it].stage_energy_j) energy_j += e;
    worst_rel = std::max({worst_rel, std::abs(results[it].time_s - plan.time_s) / plan.time_s,
                          std::abs(energy_j - plan.energy_j) / std::max(1e-12, plan.energy_j)});
    fmt::print("  {:>9} {:>12.4f} {:>14.1f} {:>17.4f} {:>19.1f}\n", it, results[it].time_s,
               energy_j, plan.time_s, plan.energy_j);
  }
  fmt::print("Per stage, mean over {} iteration{}:\n", results.size(),
             results.size() == 1 ? "" : "s");
  // No set latencies here: on fakes they are thread hand-offs, not device calls, and printing
  // them would make the output vary from run to run.
  fmt::print("  {:>5} {:>10} {:>12} {:>14} {:>14}\n", "stage", "busy (s)", "energy (J)",
             "instructions", "clock changes");
  for (int s = 0; s < plan.num_stages; ++s) {
    auto stage = static_cast<std::size_t>(s);
    double busy_s = 0, energy_j = 0;
    for (const auto& i : plan.stages[stage]) busy_s += i.time_s;
    for (const auto& r : results) energy_j += r.stage_energy_j[stage];
    runtime::ControllerGpuStats stats = controllers[stage]->stats(0);
    fmt::print("  {:>5} {:>10.4f} {:>12.1f} {:>14} {:>14}\n", s, busy_s,
               energy_j / static_cast<double>(results.size()), plan.stages[stage].size(),
               stats.applied);
  }
  if (worst_rel <= 1e-6) {
    fmt::print("Measured time and energy match the plan (within {:.1e}).\n", worst_rel);
  } else {
    fmt::print("Measured time or energy differs from the plan by up to {:.3g}%.\n",
               worst_rel * 100);
  }
  if (!flags.energy_log.empty()) fmt::print("Wrote the energy log {}\n", flags.energy_log);
  return 0;
}

}  // namespace

Action register_replay(CLI::App& app) {
  auto flags = std::make_shared<ReplayFlags>();
  CLI::App* cmd = app.add_subcommand(
      "replay", "Run a plan's instruction stream through the runtime against simulated GPUs");
  cmd->add_option("--plan", flags->plan,
                  "A kareus-plan file, or a plan set (plans.json) with --index")
      ->required();
  cmd->add_option("--index", flags->index, "Which plan of a plan set to replay");
  cmd->add_option("--gpu", flags->gpu, "Devices to replay on: fake (one simulated GPU per stage)")
      ->check(CLI::IsMember({"fake"}))
      ->capture_default_str();
  cmd->add_option("--iterations", flags->iterations, "Training iterations to run")
      ->capture_default_str();
  cmd->add_option("--energy-log", flags->energy_log,
                  "Write the energy monitor's CSV log (one row per iteration) to this file");
  return [flags] { return run_replay(*flags); };
}

}  // namespace kareus::cli
