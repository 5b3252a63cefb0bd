// `kareus hw`: GPU presets and their power/performance model.
//   hw show --gpu NAME                 the preset and its model curves
//   hw check --gpu NAME --profile F    the model's shapes against a measured stage profile
//   hw check --gpu NAME --plans F      measured plans (a clock per instruction) on the simulated GPU
//   hw check --gpu NAME --partitions DIR   overlapped over sequential time of measured partitions
//   hw fit --base-gpu NAME --profile F --out G.json   calibrate the power model to a profile
//   hw fit --base-gpu NAME --plans F --out G.json     and/or the time scale to measured plans
//   hw fit --base-gpu NAME --partitions DIR --out G.json   and/or overlap's interference to
//                                                          partitions kareus profile measured
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <map>
#include <optional>
#include <set>

#include "kareus/cli/commands.hpp"
#include "kareus/cli/workload_flags.hpp"
#include "kareus/core/error.hpp"
#include "kareus/core/io.hpp"
#include "kareus/engine/trace_fit.hpp"
#include "kareus/evaluate/simulated.hpp"
#include "kareus/calibrate/gpu_fit.hpp"
#include "kareus/hardware/gpu.hpp"
#include "kareus/hardware/stage_model.hpp"

namespace kareus::cli {
namespace {

struct HwFlags {
  std::string gpu;
  std::vector<std::string> profiles;
  std::vector<std::string> plans;
  std::vector<std::string> partitions;  // kareus profile output directories
  std::string plan_clocks;
  std::optional<double> power_limit_w;
  std::string base_gpu;
  std::string out;
  std::string name, display_name, source;
  std::string engine{engine::kDefaultEngine};  // --plans: the engine the plans were measured through;
                                               // --engine-trace: the engine whose costs it refits
  std::string engine_trace;
};

// The engine the overlap gains are also reported under: the artifact's without its host overhead.
constexpr std::string_view kGraphsEngine = "cuda-graphs";

// The engine measured plans are evaluated under: the same instruction-level host side for every plan.
planner::PlannerOptions plan_options(const HwFlags& flags) {
  planner::PlannerOptions options;
  options.engine = load_engine_flag(flags.engine);
  return options;
}

std::string describe_clocks(const hardware::GpuSpec& gpu) {
  const auto& c = gpu.sm_clocks_mhz;
  std::string steps;
  if (c.size() >= 2) {
    std::set<double> gaps;
    for (std::size_t i = 1; i < c.size(); ++i)
      gaps.insert(std::round((c[i] - c[i - 1]) * 1000) / 1000);
    if (gaps.size() == 1) steps = fmt::format(" in {:g} MHz steps", *gaps.begin());
  }
  return fmt::format("{:g}-{:g} MHz, {} clocks{}", gpu.min_clock_mhz(), gpu.max_clock_mhz, c.size(),
                     steps);
}

// A handful of supported clocks from min to max, the knee among them.
std::vector<double> show_clocks(const hardware::GpuSpec& gpu) {
  std::set<double> clocks;
  constexpr int kPoints = 8;
  for (int i = 0; i < kPoints; ++i) {
    double f = gpu.min_clock_mhz() + (gpu.max_clock_mhz - gpu.min_clock_mhz()) * i / (kPoints - 1);
    clocks.insert(gpu.nearest_clock_mhz(f));
  }
  clocks.insert(gpu.nearest_clock_mhz(gpu.power.knee_clock_mhz));
  return {clocks.begin(), clocks.end()};
}

hardware::GpuSpec load_limited(const HwFlags& flags) {
  hardware::GpuSpec gpu = hardware::load_gpu(flags.gpu);
  if (flags.power_limit_w) gpu = hardware::with_power_limit(std::move(gpu), *flags.power_limit_w, "--power-limit");
  return gpu;
}

void print_spec(const hardware::GpuSpec& gpu) {
  const hardware::PowerModel& p = gpu.power;
  fmt::print("{} ({})\n", gpu.display_name, gpu.name);
  fmt::print("  {:<18} {}\n", "SMs", gpu.sms);
  fmt::print("  {:<18} {}\n", "SM clocks", describe_clocks(gpu));
  fmt::print("  {:<18} {:.1f} TFLOP/s dense bf16 at {:g} MHz\n", "peak", gpu.peak_bf16_flops / 1e12,
             gpu.max_clock_mhz);
  fmt::print("  {:<18} {:g} GB/s\n", "HBM bandwidth", gpu.hbm_bandwidth_bps / 1e9);
  fmt::print("  {:<18} {:g} GB/s per direction\n", "NVLink bandwidth",
             gpu.nvlink_bandwidth_bps / 1e9);
  fmt::print("  {:<18} {:g} W\n", "TDP", gpu.tdp_w);
  fmt::print("  {:<18} {:g} W (the driver lowers the clock to stay under it)\n", "power limit", gpu.power_limit_w);
  if (auto f = hardware::stage_throttle_clock_mhz(gpu)) {
    fmt::print("  {:<18} a GEMM-bound stage locked at {:g} MHz or above runs at the power limit, below its clock\n",
               "throttles from", *f);
  } else {
    fmt::print("  {:<18} no clock: the model's GEMM-bound stage stays under the power limit up to {:g} MHz\n",
               "throttles from", gpu.max_clock_mhz);
  }
  fmt::print("  {:<18} {:g} W (P_blocking: a GPU blocked on P2P)\n", "static power",
             gpu.static_power_w);
  if (gpu.time_scale != 1) {
    fmt::print("  {:<18} {:.4f} (every kernel and collective takes this times the model's time, at its power: "
               "measured plans, see calibration)\n",
               "time scale", gpu.time_scale);
  }
  if (gpu.overlap_compute_slowdown != 1 || gpu.overlap_collective_slowdown != 1) {
    fmt::print("  {:<18} compute {:.4f}x slower beside a moving collective, the collective {:.4f}x slower beside "
               "compute (measured partitions, see calibration)\n",
               "overlap", gpu.overlap_compute_slowdown, gpu.overlap_collective_slowdown);
  }
  fmt::print("  {:<18} V {:.3f} V up to {:g} MHz, linear to {:.3f} V at {:g} MHz\n", "voltage",
             p.v_min_v, p.knee_clock_mhz, p.v_max_v, gpu.max_clock_mhz);
  fmt::print("  {:<18} C_compute {:.4g} nF, C_copy {:.4g} nF, C_idle {:.4g} nF (P = C V^2 f)\n",
             "SM capacitance", p.compute_capacitance_nf, p.copy_capacitance_nf,
             p.idle_sm_capacitance_nf);
  fmt::print("  {:<18} HBM {:g} pJ/B, NVLink {:g} pJ/B\n", "traffic energy", p.hbm_pj_per_byte,
             p.nvlink_pj_per_byte);
  fmt::print("  {:<18} {}\n", "source", gpu.source);
}

// What the preset's calibration records: the power fit's errors, the time scale's, overlap's.
void print_calibration(const hardware::Calibration& c) {
  if (const auto& p = c.power) {
    fmt::print("  {:<18} {} points; time error median {:.2f}% max {:.2f}%, power error median {:.2f}% max {:.2f}%\n",
               "calibration", p->points, p->time_err_median_pct, p->time_err_max_pct, p->power_err_median_pct,
               p->power_err_max_pct);
  }
  if (const auto& t = c.time_scale) {
    fmt::print("  {:<18} time scale from {} measured plans without overlap ({} checked); median error on all, time "
               "{:.2f}% energy {:.2f}% (at scale 1: {:.2f}% and {:.2f}%)\n",
               c.power ? "" : "calibration", t->fitted_plans, t->checked_plans, t->time_err_median_pct,
               t->energy_err_median_pct, t->time_err_median_pct_at_scale_1, t->energy_err_median_pct_at_scale_1);
  }
  if (const auto& o = c.overlap) {
    fmt::print("  {:<18} overlap from {} measured knob pairs (overlapped over sequential time at one clock); "
               "median error of that ratio {:.2f}% (before: {:.2f}%)\n",
               c.power || c.time_scale ? "" : "calibration", o->pairs, o->ratio_err_median_pct,
               o->ratio_err_median_pct_before);
  }
}

// The model's power and stage time at a handful of clocks.
void print_model_curves(const hardware::GpuSpec& gpu) {
  fmt::print("\nModel curves (a model, not a measurement; power of one GPU)\n");
  fmt::print(
      "  full load: every SM at GEMM peak, HBM at full bandwidth; stage: the model's transformer "
      "stage, time relative to max clock\n");
  fmt::print("  {:>9} {:>9} {:>12} {:>12} {:>13} {:>10}\n", "clock_mhz", "voltage_v", "peak_tflops",
             "full_load_w", "stage_power_w", "stage_time");
  const double top_time = hardware::model_transformer_stage(gpu, gpu.max_clock_mhz).time_rel;
  for (double f : show_clocks(gpu)) {
    const auto stage = hardware::model_transformer_stage(gpu, f);
    fmt::print("  {:>9g} {:>9.3f} {:>12.1f} {:>12.1f} {:>13.1f} {:>10.3f}\n", f,
               hardware::voltage_v(gpu, f), hardware::peak_flops_at(gpu, f) / 1e12,
               hardware::power_w(gpu, f, hardware::full_load_activity(gpu)), stage.power_w,
               stage.time_rel / top_time);
  }
}

int run_show(const HwFlags& flags) {
  const hardware::GpuSpec gpu = load_limited(flags);
  print_spec(gpu);
  print_calibration(gpu.calibration);
  print_model_curves(gpu);
  return 0;
}

std::vector<calibrate::ProfileCurve> read_profiles(const std::vector<std::string>& paths) {
  std::vector<calibrate::ProfileCurve> curves;
  for (const auto& path : paths) {
    auto more = calibrate::read_stage_profile(path);
    curves.insert(curves.end(), more.begin(), more.end());
  }
  return curves;
}

void print_rows(const calibrate::ShapeCheck& check) {
  fmt::print("{:<36} {:>5} {:<9} {:>9} {:>9} {:>9} {:>8} {:>9} {:>9} {:>8}\n", "profile", "stage",
             "instr", "clock_mhz", "time_meas", "time_mod", "time_err", "power_meas", "power_mod",
             "power_err");
  for (const auto& r : check.rows) {
    fmt::print(
        "{:<36} {:>5} {:<9} {:>9g} {:>9.4f} {:>9.4f} {:>7.2f}% {:>9.4f} {:>9.4f} {:>7.2f}%\n",
        std::filesystem::path(r.source).filename().string(), r.stage, r.instruction, r.freq_mhz,
        r.measured_time_ratio, r.model_time_ratio, 100 * r.time_err(), r.measured_power_ratio,
        r.model_power_ratio, 100 * r.power_err());
  }
}

// What kind of work the model misses, per frontier (calibrate::MissingWork).
void print_missing_power(const calibrate::PlanCheck& check, const hardware::GpuSpec& gpu) {
  if (check.missing.empty()) return;
  fmt::print("\nWhat the model misses: measured minus model time, and the power of that time (energy over time, per "
             "GPU; {:g} W is a waiting GPU), median over the plans differing by more than 1%; measured over model "
             "time of the fastest and the slowest plan (equal: the missing time grows with the GPU's own time; "
             "falling toward 1: a fixed cost slower kernels hide)\n",
             gpu.static_power_w);
  fmt::print("{:<21} {:<36} {:>10} {:>10} {:>6} {:>10} {:>10}\n", "method", "job", "missing_s", "power_w", "plans",
             "ratio_fast", "ratio_slow");
  for (const auto& m : check.missing) {
    fmt::print("{:<21} {:<36} {:>10.4f} {:>10.1f} {:>6} {:>10.3f} {:>10.3f}\n", planner::to_string(m.method), m.job,
               m.time_s, m.power_w, m.plans, m.time_ratio_fastest, m.time_ratio_slowest);
  }
}

// The plans of every --plans file: the artifact's plans.csv (with plan_clocks.csv) or kareus-plan JSON.
std::vector<calibrate::ReferencePlan> read_plans(const HwFlags& flags) {
  std::vector<calibrate::ReferencePlan> plans;
  for (const std::string& file : flags.plans) {
    std::vector<calibrate::ReferencePlan> more;
    if (file.ends_with(".json")) {
      more = calibrate::read_kareus_plans(file);
    } else {
      std::filesystem::path clocks = flags.plan_clocks.empty()
                                         ? std::filesystem::path(file).parent_path() / "plan_clocks.csv"
                                         : std::filesystem::path(flags.plan_clocks);
      more = calibrate::read_artifact_plans(file, clocks);
    }
    plans.insert(plans.end(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
  }
  if (plans.empty()) throw InputError({flags.plans.front(), 0, 0, ""}, "holds no plans");
  return plans;
}

int run_check_plans(const HwFlags& flags, const hardware::GpuSpec& gpu) {
  const std::vector<calibrate::ReferencePlan> plans = read_plans(flags);
  const evaluate::Evaluator evaluator = evaluate::make_simulated_evaluator(gpu);
  const planner::PlannerOptions options = plan_options(flags);
  const calibrate::PlanCheck check = calibrate::check_plans(plans, evaluator, options, true);

  fmt::print(
      "{} measured plan(s) evaluated on the simulated GPU model of {} (a model, not a measurement): every "
      "instruction at the plan's clock under its method's knob (Perseus: collectives after the compute; "
      "Nanobatching+Perseus: the default nanobatch schedule), 1F1B; energy of one GPU per stage, idle at {:g} W; "
      "time scale {:g}; engine {}\n",
      plans.size(), gpu.display_name, gpu.static_power_w, gpu.time_scale, options.engine.name);
  fmt::print("{:<21} {:<44} {:>10} {:>10} {:>8} {:>11} {:>11} {:>8}\n", "method", "plan", "time_meas", "time_mod",
             "time_err", "energy_meas", "energy_mod", "energy_err");
  for (const auto& r : check.rows) {
    fmt::print("{:<21} {:<44} {:>10.4f} {:>10.4f} {:>+7.2f}% {:>11.1f} {:>11.1f} {:>+7.2f}%\n",
               planner::to_string(r.plan->method), r.plan->label, r.plan->time_s, r.model_time_s, 100 * r.time_err(),
               r.plan->energy_j, r.model_energy_j, 100 * r.energy_err());
  }
  fmt::print("\nFastest plan of each frontier, the reference's against the planner's on the model\n");
  fmt::print("{:<21} {:<36} {:>10} {:>10} {:>8} {:>11} {:>11} {:>8}\n", "method", "job", "time_ref", "time_mod",
             "time_err", "energy_ref", "energy_mod", "energy_err");
  for (const auto& f : check.frontiers) {
    fmt::print("{:<21} {:<36} {:>10.4f} {:>10.4f} {:>+7.2f}% {:>11.1f} {:>11.1f} {:>+7.2f}%\n",
               planner::to_string(f.method), f.job, f.reference_fastest_time_s, f.model_fastest_time_s,
               100 * (f.model_fastest_time_s / f.reference_fastest_time_s - 1), f.reference_fastest_energy_j,
               f.model_fastest_energy_j, 100 * (f.model_fastest_energy_j / f.reference_fastest_energy_j - 1));
  }
  // Beside the model's gain under the plans' engine, its gain with no host overhead: what the
  // artifact would gain with every instruction replayed as a CUDA graph.
  const std::map<std::string, calibrate::OverlapGain> gains = calibrate::overlap_gains(check);
  std::map<std::string, calibrate::OverlapGain> graph_gains = gains;
  if (options.engine.name != kGraphsEngine && !gains.empty()) {
    planner::PlannerOptions graphs = options;
    graphs.engine = load_engine_flag(kGraphsEngine);
    graph_gains = calibrate::overlap_gains(calibrate::check_plans(plans, evaluator, graphs, true));
  }
  if (!gains.empty()) {
    fmt::print("\nNanobatching+Perseus's max-throughput time gain over Perseus (gain_graphs: the model's under {}, "
               "no host overhead)\n{:<36} {:>9} {:>9} {:>9} {:>11}\n",
               kGraphsEngine, "job", "gain_ref", "gain_mod", "diff_pt", "gain_graphs");
  }
  for (const auto& [job, g] : gains) {
    fmt::print("{:<36} {:>+8.2f}% {:>+8.2f}% {:>+9.2f} {:>+10.2f}%\n", job, g.reference_pct, g.model_pct,
               g.model_pct - g.reference_pct, graph_gains.at(job).model_pct);
  }
  print_missing_power(check, gpu);
  fmt::print("{}\n", calibrate::summary_line(check));
  return 0;
}

// The partitions of every --partitions directory.
std::vector<calibrate::MeasuredPartition> read_partitions(const HwFlags& flags) {
  std::vector<calibrate::MeasuredPartition> measured;
  for (const auto& dir : flags.partitions) {
    for (auto& m : calibrate::read_measured_partitions(dir)) measured.push_back(std::move(m));
  }
  return measured;
}

// Each knob pair's measured ratio and the model's, before and after a fit (the same for a check).
void print_overlap_pairs(const std::vector<calibrate::OverlapPair>& pairs, bool fitted) {
  if (fitted) {
    fmt::print("  {:<14} {:>9} {:>4} {:<10} {:>10} {:>12} {:>9} {:>12} {:>9}\n", "partition", "freq_mhz", "sms",
               "slot", "measured", "model_before", "err", "model_after", "err");
  } else {
    fmt::print("  {:<14} {:>9} {:>4} {:<10} {:>10} {:>12} {:>9}\n", "partition", "freq_mhz", "sms", "slot",
               "measured", "model", "err");
  }
  for (const auto& p : pairs) {
    fmt::print("  {:<14} {:>9g} {:>4} {:<10} {:>10.4f} {:>12.4f} {:>+8.2f}%", p.partition, p.knob.freq_mhz, p.knob.sms,
               p.knob.slot, p.measured_ratio, p.model_ratio_before, 100 * p.err_before());
    if (fitted) fmt::print(" {:>12.4f} {:>+8.2f}%", p.model_ratio_after, 100 * p.err_after());
    fmt::print("\n");
  }
}

int run_check_partitions(const HwFlags& flags, const hardware::GpuSpec& gpu) {
  const std::vector<calibrate::MeasuredPartition> measured = read_partitions(flags);
  std::set<std::string> measured_on;
  for (const calibrate::MeasuredPartition& m : measured) measured_on.insert(m.measured_on);
  const calibrate::OverlapCheck check = calibrate::check_overlap(gpu, measured);
  fmt::print("Overlap check of {} (compute {:.4f}x, collective {:.4f}x slower while both run) against {} overlapped "
             "knob(s) measured with their sequential knob at the same clock ({}): each knob's time over the "
             "sequential knob's, measured and on the model; nothing fitted\n",
             gpu.name, gpu.overlap_compute_slowdown, gpu.overlap_collective_slowdown, check.pairs.size(),
             fmt::join(measured_on, "; "));
  print_overlap_pairs(check.pairs, false);
  fmt::print("ratio_err_median={:.2f}\n", 100 * check.err_median);
  return 0;
}

int run_check(const HwFlags& flags) {
  const hardware::GpuSpec gpu = load_limited(flags);
  const int given = !flags.plans.empty() + !flags.profiles.empty() + !flags.partitions.empty();
  if (given > 1) {
    throw InputError({"", 0, 0, flags.plans.empty() ? "--partitions" : "--plans"},
                     "--profile, --plans and --partitions check different things; give one");
  }
  if (!flags.partitions.empty()) return run_check_partitions(flags, gpu);
  if (!flags.plans.empty()) {
    return run_check_plans(flags, gpu);
  }
  if (flags.profiles.empty())
    throw InputError({"", 0, 0, "--profile"}, "give --profile (stage profiles), --plans or --partitions");
  const auto curves = read_profiles(flags.profiles);
  const calibrate::ShapeCheck check = calibrate::check_shape(gpu, curves);
  fmt::print(
      "Shape check of {} against {} measured curve(s): time and average power at each clock over "
      "their values at the curve's highest clock, model = the transformer stage model (a model, "
      "not "
      "a measurement); nothing fitted\n",
      gpu.name, curves.size());
  print_rows(check);
  fmt::print("{}\n", calibrate::summary_line(check.summary));
  return 0;
}

std::string shell_quote(const std::string& s) {
  if (!s.empty() &&
      s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                          "-_./+=:,@") == std::string::npos) {
    return s;
  }
  std::string out = "'";
  for (char c : s) out += (c == '\'') ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

void print_fit(const calibrate::GpuFit& fit, std::size_t curves, std::size_t plans) {
  if (fit.power) {
    const hardware::PowerModel& p = fit.power->gpu.power;
    fmt::print("Fitted the power model of {} to {} measured curve(s) ({} model evaluations)\n", fit.gpu.name, curves,
               fit.power->evaluations);
    fmt::print("  knee {:g} MHz, V_min {:g} V, V_max {:g} V, C_compute {:g} nF, C_idle {:g} nF, C_copy {:g} nF\n",
               p.knee_clock_mhz, p.v_min_v, p.v_max_v, p.compute_capacitance_nf, p.idle_sm_capacitance_nf,
               p.copy_capacitance_nf);
  }
  if (fit.time_scale) {
    fmt::print("Fitted the time scale of {} to {} measured plan(s) of methods without overlap: {:.4f}\n", fit.gpu.name,
               fit.time_scale->fit.plans, fit.time_scale->fit.time_scale);
    fmt::print("  all {} plans at scale 1: {}\n", plans, calibrate::summary_line(fit.time_scale->at_scale_1));
  }
  if (fit.overlap) {
    const calibrate::OverlapFit& o = *fit.overlap;
    fmt::print("Fitted overlap's interference on {} to {} overlapped knob(s) measured with their sequential knob at the "
               "same clock ({}; {} model evaluations)\n",
               fit.gpu.name, o.pairs.size(), fmt::join(fit.measured_on, "; "), o.evaluations);
    fmt::print("  compute {:.4f}x slower beside a moving collective, the collective {:.4f}x slower beside compute\n",
               o.compute_slowdown, o.collective_slowdown);
    print_overlap_pairs(o.pairs, true);
  }
}

// The summary lines, printed last, as hw check prints them.
std::vector<std::string> fit_summaries(const calibrate::GpuFit& fit) {
  std::vector<std::string> lines;
  if (fit.power) lines.push_back(calibrate::summary_line(fit.power->check.summary));
  if (fit.time_scale) lines.push_back(calibrate::summary_line(fit.time_scale->fitted));
  if (fit.overlap) {
    lines.push_back(fmt::format("ratio_err_median={:.2f} (before {:.2f})", 100 * fit.overlap->err_median_after,
                                100 * fit.overlap->err_median_before));
  }
  return lines;
}

// The command that made a GPU file, recorded in its calibration.
std::string fit_command(const HwFlags& flags) {
  std::string command = "kareus hw fit --base-gpu " + shell_quote(flags.base_gpu);
  for (const auto& p : flags.profiles) command += " --profile " + shell_quote(p);
  for (const auto& p : flags.plans) command += " --plans " + shell_quote(p);
  for (const auto& p : flags.partitions) command += " --partitions " + shell_quote(p);
  if (!flags.plan_clocks.empty()) command += " --plan-clocks " + shell_quote(flags.plan_clocks);
  if (!flags.name.empty()) command += " --name " + shell_quote(flags.name);
  if (!flags.display_name.empty()) command += " --display-name " + shell_quote(flags.display_name);
  if (!flags.source.empty()) command += " --source " + shell_quote(flags.source);
  return command + " --out " + shell_quote(flags.out);
}

// Which CPU ops made the host wait for the GPU, the most frequent first.
void print_waits(const std::map<std::string, std::size_t>& waits) {
  std::vector<std::pair<std::size_t, std::string>> by_count;
  std::size_t total = 0;
  for (const auto& [where, n] : waits) by_count.emplace_back(n, where), total += n;
  if (total == 0) {
    fmt::print("No call in the trace blocks the host on the GPU\n");
    return;
  }
  std::ranges::stable_sort(by_count, [](const auto& a, const auto& b) { return a.first > b.first; });
  fmt::print("The host waited for the GPU {} time(s), in (innermost CPU op: call):\n", total);
  for (const auto& [n, where] : by_count) fmt::print("  {:>8}  {}\n", n, where);
}

// hw fit --engine-trace: an engine file, not a GPU file; the fits of a GPU do not combine with it.
int run_fit_engine(const HwFlags& flags) {
  if (!flags.base_gpu.empty() || !flags.profiles.empty() || !flags.plans.empty() || !flags.partitions.empty()) {
    throw InputError({"", 0, 0, "--engine-trace"},
                     "fits an engine file; --base-gpu, --profile, --plans and --partitions fit a GPU file: run them apart");
  }
  const engine::TraceFit fit = engine::fit_engine_trace(load_engine_flag(flags.engine), flags.engine_trace);
  engine::EngineSpec out = fit.engine;
  if (!flags.name.empty()) out.name = flags.name;
  if (!flags.display_name.empty()) out.display_name = flags.display_name;
  if (!flags.source.empty()) out.source = flags.source;
  write_file_atomic(flags.out, engine::to_json(out).dump(2) + "\n");
  fmt::print("Fitted {} host cost(s) of engine {} to {} ({} top-level CPU ops, {:.2f} us of host time each)\n",
             fit.fitted.size(), flags.engine, flags.engine_trace, fit.top_level_ops, fit.host_s_per_top_level_op * 1e6);
  fmt::print("{:<20} {:>6} {:>11} {:>11} {:>11} {:>11}\n", "cost", "spans", "base_us", "fitted_us", "min_us", "max_us");
  const engine::EngineSpec base = load_engine_flag(flags.engine);
  for (const engine::HostCostField& f : engine::host_cost_fields()) {
    auto it = fit.fitted.find(std::string(f.key));
    if (it == fit.fitted.end()) continue;
    fmt::print("{:<20} {:>6} {:>11.2f} {:>11.2f} {:>11.2f} {:>11.2f}\n", f.key, it->second.spans,
               base.host.*f.member * 1e6, it->second.median_s * 1e6, it->second.min_s * 1e6, it->second.max_s * 1e6);
  }
  if (fit.runtime_calls == 0) {
    fmt::print("The trace records no CUDA runtime calls, so it cannot say where the host waits: op_sync kept ({})\n",
               engine::op_sync_name(out));
  } else {
    if (fit.loop_ops > 0) {
      fmt::print("{} of {} nanobatched-loop ops (kareus:partition_op) hold a call that blocks the host on the GPU\n",
                 fit.loop_ops_waiting, fit.loop_ops);
    }
    if (fit.layer_ops > 0) {
      fmt::print("{} of {} un-split module ops (kareus:layer_op) hold a call that blocks the host on the GPU\n",
                 fit.layer_ops_waiting, fit.layer_ops);
    }
    fmt::print("op_sync {}\n", engine::op_sync_name(out));
    print_waits(fit.waits);
  }
  fmt::print("Wrote {}\n", flags.out);
  return 0;
}

int run_fit(const HwFlags& flags) {
  if (!flags.engine_trace.empty()) return run_fit_engine(flags);
  if (flags.base_gpu.empty()) throw InputError({"", 0, 0, "--base-gpu"}, "is required to fit a GPU file");
  calibrate::GpuFitRequest request;
  request.command = fit_command(flags);
  if (!flags.profiles.empty()) request.profiles = read_profiles(flags.profiles);
  if (!flags.plans.empty()) request.plans = read_plans(flags), request.plan_files = flags.plans;
  if (!flags.partitions.empty()) request.partitions = read_partitions(flags), request.partition_dirs = flags.partitions;
  request.plan_options = plan_options(flags);
  calibrate::GpuFit fit = calibrate::fit_gpu(hardware::load_gpu(flags.base_gpu), request);
  print_fit(fit, request.profiles.size(), request.plans.size());
  if (!flags.name.empty()) fit.gpu.name = flags.name;
  if (!flags.display_name.empty()) fit.gpu.display_name = flags.display_name;
  if (!flags.source.empty()) fit.gpu.source = flags.source;
  hardware::validate(fit.gpu, flags.out);
  write_file_atomic(flags.out, hardware::to_json(fit.gpu).dump(2) + "\n");
  fmt::print("Wrote {}\n", flags.out);
  for (const std::string& line : fit_summaries(fit)) fmt::print("{}\n", line);
  return 0;
}

}  // namespace

Action register_hw(CLI::App& app) {
  auto flags = std::make_shared<HwFlags>();
  CLI::App* hw = app.add_subcommand("hw", "GPU presets and their DVFS power/performance model");
  hw->require_subcommand(1);
  const std::string gpu_help = "GPU preset name (see data/gpus/) or path to a GPU JSON file";

  CLI::App* show = hw->add_subcommand("show", "Print a GPU preset and its model curves");
  show->add_option("--gpu", flags->gpu, gpu_help)->required();
  const std::string limit_help = "Power limit in W, as nvidia-smi -pl sets it (default: the GPU's TDP)";
  show->add_option("--power-limit", flags->power_limit_w, limit_help);

  CLI::App* check = hw->add_subcommand(
      "check", "Hold a GPU's model against measured stage profiles, measured plans or measured partitions (fits nothing)");
  check->add_option("--gpu", flags->gpu, gpu_help)->required();
  check->add_option("--profile", flags->profiles,
                    "CSV with columns stage,instruction,frequency,time,energy (repeatable)");
  check->add_option("--plans", flags->plans,
                    "Measured plans to evaluate on the simulated GPU: the Kareus artifact's plans.csv (clocks from "
                    "plan_clocks.csv beside it) or a kareus-plan JSON of a baseline method (repeatable)");
  check->add_option("--power-limit", flags->power_limit_w, limit_help);
  check->add_option("--plan-clocks", flags->plan_clocks, "plan_clocks.csv for --plans CSV files, if not beside them");
  add_engine_flag(*check, flags->engine);
  check->add_option("--partitions", flags->partitions,
                    "Partitions kareus profile measured into this --out directory: each overlapped knob's time over "
                    "its sequential knob's at the same clock, measured and on the model (repeatable)");

  CLI::App* fit = hw->add_subcommand(
      "fit",
      "Fit a GPU's power model to measured stage profiles, its time scale to measured plans and/or overlap's "
      "interference to measured partitions, and write a calibrated GPU JSON");
  fit->add_option("--base-gpu", flags->base_gpu,
                  "GPU whose spec sheet the fitted GPU keeps (required but with --engine-trace): " + gpu_help);
  fit->add_option("--profile", flags->profiles,
                  "Fit the power model's shape and level to this CSV with columns stage,instruction,frequency,time,"
                  "energy (repeatable)");
  fit->add_option("--plans", flags->plans,
                  "Fit the time scale to these measured plans (as hw check --plans takes them): the median over the "
                  "Megatron-LM and Perseus plans of measured over model time (repeatable)");
  fit->add_option("--plan-clocks", flags->plan_clocks, "plan_clocks.csv for --plans CSV files, if not beside them");
  add_engine_flag(*fit, flags->engine);
  fit->add_option("--engine-trace", flags->engine_trace,
                  "Fit the --engine's host costs to a PyTorch profiler trace (Chrome trace JSON) whose calls are "
                  "labelled with record_function(\"kareus:<cost>\"), e.g. kareus:layer_op, and write the engine "
                  "JSON to --out");
  fit->add_option("--partitions", flags->partitions,
                  "Fit overlap's interference (a compute and a collective slowdown while both run) to the partitions "
                  "kareus profile measured into this --out directory: each overlapped knob's time over its "
                  "sequential knob's at the same clock (repeatable)");
  fit->add_option("--out", flags->out, "GPU (or, with --engine-trace, engine) JSON file to write")->required();
  fit->add_option("--name", flags->name, "Preset id of the fitted GPU (default: the base's)");
  fit->add_option("--display-name", flags->display_name, "Display name (default: the base's)");
  fit->add_option("--source", flags->source, "Source note of the fitted GPU (default: the base's)");

  return [flags, show, check, fit] {
    if (show->parsed()) return run_show(*flags);
    if (check->parsed()) return run_check(*flags);
    if (fit->parsed()) return run_fit(*flags);
    return 2;
  };
}

}  // namespace kareus::cli
