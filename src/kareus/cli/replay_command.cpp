// `kareus replay`: runs a plan's instruction stream through the runtime (plan cursors, frequency
// controllers, energy monitor) against simulated GPUs, one per stage, on an injected clock that
// follows the plan's instruction times, so the whole loop can be seen without hardware, instantly
// and deterministically.
//
// Each fake GPU draws P_blocking when idle and, while an instruction runs, a load chosen so that
// it draws the instruction's planned power at the instruction's planned clock (the load scales the
// A100 preset's DVFS model of dynamic power, stretched to the plan's top clock). The measured
// energy therefore equals the plan's exactly when, and only when, every clock reaches the device
// before its instruction starts; a clock that is late, wrong or snapped shows up as a difference.
//
// With --straggler F@iteration:N the plan file is a whole frontier (plans.json): the pipeline
// starts on its fastest plan, and from iteration N on another data-parallel pipeline (the
// straggler) takes F times that plan's time, so every iteration lasts that long (the gradient
// synchronisation waits for it; the fakes idle at P_blocking meanwhile). Every stage's cursor is
// told so up front (on_straggler with iteration N) and switches at N to the least-energy plan
// that still meets the straggler's time; the output sets each iteration's energy against staying
// on the fastest plan and waiting.
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
#include "kareus/plan/select.hpp"
#include "kareus/plan/validate.hpp"
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
  std::string straggler;
};

struct Straggler {
  double slowdown = 1;  // the straggler's iteration time over our fastest plan's
  long iteration = 0;   // from which iteration on
};

Straggler parse_straggler(const std::string& text) {
  const std::string form = "expected SLOWDOWN@iteration:N, e.g. 1.2@iteration:3";
  auto at = text.find("@iteration:");
  if (at == std::string::npos)
    throw InputError({"", 0, 0, "--straggler"}, fmt::format("'{}': {}", text, form));
  Straggler straggler;
  try {
    std::size_t used = 0;
    straggler.slowdown = std::stod(text.substr(0, at), &used);
    if (used != at) throw std::invalid_argument("trailing text");
    std::string iteration = text.substr(at + 11);
    straggler.iteration = std::stol(iteration, &used);
    if (used != iteration.size()) throw std::invalid_argument("trailing text");
  } catch (const std::logic_error&) {
    throw InputError({"", 0, 0, "--straggler"}, fmt::format("'{}': {}", text, form));
  }
  if (!(straggler.slowdown >= 1) || !std::isfinite(straggler.slowdown) || straggler.iteration < 0) {
    throw InputError(
        {"", 0, 0, "--straggler"},
        fmt::format("'{}': the slowdown must be at least 1 and the iteration at least 0", text));
  }
  return straggler;
}

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

Timeline timeline_of(const plan::Plan& plan, const pipeline::PipelineSchedule& schedule) {
  // Each instruction starts at its earliest start in the schedule's dependency DAG.
  pipeline::InstructionDag dag(schedule);
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

int run_replay(const ReplayFlags& flags) {
  if (flags.iterations < 1) throw InputError({"", 0, 0, "--iterations"}, "must be at least 1");
  std::optional<Straggler> straggler;
  if (!flags.straggler.empty()) straggler = parse_straggler(flags.straggler);
  if (straggler && flags.index) {
    throw InputError(
        {"", 0, 0, "--index"},
        "--straggler replays a whole plan set, switching between its plans; drop --index");
  }
  std::vector<plan::Plan> plans;
  std::size_t start_index = 0;
  const std::string source = straggler ? flags.plan : plan::plan_source(flags.plan, flags.index);
  if (straggler) {
    plans = plan::read_plan_set(flags.plan);
    plan::validate_set(plans, flags.plan);
    std::vector<TimeEnergy> points;
    for (const auto& p : plans) points.push_back({p.time_s, p.energy_j});
    start_index = plan::select_plan(points, {plan::Target::Kind::kMaxThroughput, 0});
  } else {
    plans.push_back(plan::read_plan(flags.plan, flags.index));
    plan::validate(plans.front(), source);
  }
  const plan::Plan& first = plans[start_index];
  auto schedule =
      pipeline::PipelineSchedule::make(first.schedule, first.num_stages, first.num_microbatches,
                                       first.virtual_stages);
  std::vector<Timeline> timelines;
  for (const plan::Plan& p : plans) timelines.push_back(timeline_of(p, schedule));

  std::vector<int> clocks_mhz;
  ReplayPowerModel model = power_model_for(plans, clocks_mhz);
  auto time = std::make_shared<runtime::ManualTimeSource>();
  std::vector<std::shared_ptr<runtime::FakeGpu>> fakes;
  std::vector<std::shared_ptr<runtime::Gpu>> gpus;
  std::vector<std::unique_ptr<runtime::FrequencyController>> controllers;
  std::vector<runtime::PlanCursor> cursors;
  for (int s = 0; s < first.num_stages; ++s) {
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
    if (straggler) {
      cursors.emplace_back(plans, start_index, s, controllers.back().get(), source);
    } else {
      cursors.emplace_back(plans.front(), s, controllers.back().get(), source);
    }
  }
  const double fastest_s = first.time_s;
  const double straggler_s = straggler ? straggler->slowdown * fastest_s : 0;
  if (straggler) {
    // Every rank is told the same iteration, so the whole pipeline switches at once.
    for (auto& cursor : cursors) cursor.on_straggler(straggler_s, straggler->iteration);
  }
  runtime::EnergyMonitorOptions monitor_options{.time = time};
  if (!flags.energy_log.empty()) monitor_options.log_csv = flags.energy_log;
  runtime::EnergyMonitor monitor(gpus, monitor_options);

  struct IterationResult {
    std::size_t plan_index;
    double time_s;
    std::vector<double> stage_energy_j;
  };
  std::vector<IterationResult> results;
  for (int it = 0; it < flags.iterations; ++it) {
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
    if (straggler && it >= straggler->iteration) wall_s = std::max(wall_s, straggler_s);
    time->set_s(std::max(time->now_s(), base_s + wall_s));
    runtime::Measurement m = monitor.end_window(window);
    for (auto& cursor : cursors) cursor.on_step_end();
    results.push_back({index, m.elapsed_s, m.gpu_energy_j});
  }
  for (auto& controller : controllers) controller->stop();

  fmt::print(
      "Replay of {} on {} fake GPUs, one per stage (simulated: a model, not a measurement)\n",
      source, first.num_stages);
  fmt::print(
      "Fake GPUs draw P_blocking = {} W when idle and each instruction's planned power at its "
      "planned clock,\nso measured equals planned when every clock reaches the GPU in time.\n",
      first.p_blocking_w);
  fmt::print("Energy: {}\n", first.energy_scope);
  auto total = [](const std::vector<double>& energies) {
    double sum = 0;
    for (double e : energies) sum += e;
    return sum;
  };
  double worst_rel = 0;
  if (!straggler) {
    const plan::Plan& plan = plans.front();
    fmt::print("  {:>9} {:>12} {:>14} {:>17} {:>19}\n", "iteration", "time (s)", "energy (J)",
               "planned time (s)", "planned energy (J)");
    for (std::size_t it = 0; it < results.size(); ++it) {
      double energy_j = total(results[it].stage_energy_j);
      worst_rel = std::max({worst_rel, std::abs(results[it].time_s - plan.time_s) / plan.time_s,
                            std::abs(energy_j - plan.energy_j) / std::max(1e-12, plan.energy_j)});
      fmt::print("  {:>9} {:>12.4f} {:>14.1f} {:>17.4f} {:>19.1f}\n", it, results[it].time_s,
                 energy_j, plan.time_s, plan.energy_j);
    }
  } else {
    // Staying on the fastest plan: its energy, plus idling at P_blocking on every stage until the
    // straggler is done.
    fmt::print(
        "Straggler: from iteration {} on another pipeline takes {:.4g} x {:.4f} s = {:.4f} s per "
        "iteration;\nthis pipeline switches to the least-energy plan of the {} in {} that meets "
        "it.\n",
        straggler->iteration, straggler->slowdown, fastest_s, straggler_s, plans.size(),
        flags.plan);
    fmt::print("  {:>9} {:>5} {:>14} {:>10} {:>12} {:>23} {:>11}\n", "iteration", "plan",
               "plan time (s)", "time (s)", "energy (J)", "on fastest plan (J)", "saved");
    for (std::size_t it = 0; it < results.size(); ++it) {
      const plan::Plan& plan = plans[results[it].plan_index];
      double energy_j = total(results[it].stage_energy_j);
      double planned_j =
          plan.energy_j + (results[it].time_s - plan.time_s) * plan.p_blocking_w * plan.num_stages;
      worst_rel = std::max(worst_rel, std::abs(energy_j - planned_j) / std::max(1e-12, planned_j));
      double stay_j = first.energy_j +
                      (results[it].time_s - first.time_s) * first.p_blocking_w * first.num_stages;
      double saved_pct = 100 * (stay_j - energy_j) / stay_j;
      if (std::abs(saved_pct) < 0.005) saved_pct = 0;  // rounding noise prints as 0.00%, not -0.00%
      fmt::print("  {:>9} {:>5} {:>14.4f} {:>10.4f} {:>12.1f} {:>23.1f} {:>10.2f}%\n", it,
                 results[it].plan_index, plan.time_s, results[it].time_s, energy_j, stay_j, saved_pct);
    }
  }
  fmt::print("Per stage, mean over {} iteration{}:\n", results.size(),
             results.size() == 1 ? "" : "s");
  // No set latencies here: on fakes they are thread hand-offs, not device calls, and printing
  // them would make the output vary from run to run.
  fmt::print("  {:>5} {:>10} {:>12} {:>14} {:>14}\n", "stage", "busy (s)", "energy (J)",
             "instructions", "clock changes");
  for (int s = 0; s < first.num_stages; ++s) {
    auto stage = static_cast<std::size_t>(s);
    double busy_s = 0, energy_j = 0;
    for (const auto& r : results) {
      for (const auto& i : plans[r.plan_index].stages[stage]) busy_s += i.time_s;
      energy_j += r.stage_energy_j[stage];
    }
    runtime::ControllerGpuStats stats = controllers[stage]->stats(0);
    const auto n = static_cast<double>(results.size());
    fmt::print("  {:>5} {:>10.4f} {:>12.1f} {:>14} {:>14}\n", s, busy_s / n, energy_j / n,
               first.stages[stage].size(), stats.applied);
  }
  const char* what = straggler ? "Measured energy matches the plans' (idle time at P_blocking)"
                               : "Measured time and energy match the plan";
  if (worst_rel <= 1e-6) {
    fmt::print("{} (within {:.1e}).\n", what, worst_rel);
  } else {
    fmt::print("Measured time or energy differs from the plan{} by up to {:.3g}%.\n",
               straggler ? "s" : "", worst_rel * 100);
  }
  if (!flags.energy_log.empty()) fmt::print("Wrote the energy log {}\n", flags.energy_log);
  return 0;
}

}  // namespace

Action register_replay(CLI::App& app) {
  auto flags = std::make_shared<ReplayFlags>();
  CLI::App* cmd = app.add_subcommand(
      "replay", "Run a plan's instruction stream through the runtime against simulated GPUs");
  cmd->add_option(
         "--plan", flags->plan,
         "A kareus-plan file, or a plan set (plans.json) with --index (or with --straggler)")
      ->required();
  cmd->add_option("--index", flags->index, "Which plan of a plan set to replay");
  cmd->add_option("--gpu", flags->gpu, "Devices to replay on: fake (one simulated GPU per stage)")
      ->check(CLI::IsMember({"fake"}))
      ->capture_default_str();
  cmd->add_option("--iterations", flags->iterations, "Training iterations to run")
      ->capture_default_str();
  cmd->add_option("--energy-log", flags->energy_log,
                  "Write the energy monitor's CSV log (one row per iteration) to this file");
  cmd->add_option(
      "--straggler", flags->straggler,
      "SLOWDOWN@iteration:N: from iteration N on another data-parallel pipeline takes "
      "SLOWDOWN x the fastest plan's time; --plan is then a whole plan set (plans.json), "
      "and the replay switches to the least-energy plan meeting that time and shows the "
      "energy saved against staying on the fastest plan");
  return [flags] { return run_replay(*flags); };
}

}  // namespace kareus::cli
