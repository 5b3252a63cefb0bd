#include "kareus/calibrate/power_fit.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <nlopt.hpp>
#include <numeric>

#include "kareus/core/error.hpp"
#include "kareus/core/median.hpp"
#include "kareus/hardware/stage_model.hpp"
#include "kareus/interop/perseus_profile.hpp"

namespace kareus::calibrate {
namespace {

// Model time and power at every clock the curves use, evaluated once per clock.
std::map<double, hardware::StageSample> model_samples(const GpuSpec& gpu,
                                            std::span<const ProfileCurve> curves) {
  std::map<double, hardware::StageSample> samples;
  for (const ProfileCurve& curve : curves) {
    for (double f : curve.freq_mhz) {
      if (!samples.contains(f)) samples.emplace(f, model_transformer_stage(gpu, f));
    }
  }
  return samples;
}

void check_curves(const GpuSpec& gpu, std::span<const ProfileCurve> curves) {
  if (curves.empty()) throw InputError("no measured profile curves to compare with");
  for (const ProfileCurve& curve : curves) {
    KAREUS_CHECK(curve.freq_mhz.size() >= 2 && curve.time_s.size() == curve.freq_mhz.size() &&
                     curve.power_w.size() == curve.freq_mhz.size(),
                 "malformed profile curve");
    if (curve.freq_mhz.back() > gpu.max_clock_mhz + 1e-6) {
      throw InputError(
          {curve.source, 0, 0, "frequency"},
          fmt::format("stage {} {} was measured at {} MHz, above {}'s max clock {} MHz",
                      curve.stage, curve.instruction, curve.freq_mhz.back(), gpu.name,
                      gpu.max_clock_mhz));
    }
  }
}

ShapeSummary summarize(const std::vector<ShapeRow>& rows) {
  std::vector<double> time_errs, power_errs;
  for (const ShapeRow& row : rows) {
    time_errs.push_back(row.time_err());
    power_errs.push_back(row.power_err());
  }
  ShapeSummary s;
  s.points = rows.size();
  s.time_err_median = median(time_errs);
  s.power_err_median = median(power_errs);
  s.time_err_max = time_errs.empty() ? 0 : *std::max_element(time_errs.begin(), time_errs.end());
  s.power_err_max =
      power_errs.empty() ? 0 : *std::max_element(power_errs.begin(), power_errs.end());
  return s;
}

// Six significant digits: preset files stay readable and the fit reproduces them exactly.
double round6(double x) {
  if (x == 0 || !std::isfinite(x)) return x;
  double scale = std::pow(10.0, 5 - std::floor(std::log10(std::abs(x))));
  return std::round(x * scale) / scale;
}

// Mean over the curves of the measured power at each curve's highest clock: the absolute level.
double measured_top_power_w(std::span<const ProfileCurve> curves) {
  double sum = 0;
  for (const ProfileCurve& c : curves) sum += c.power_w.back();
  return sum / static_cast<double>(curves.size());
}

// The fitted parameters, each as a fraction of its range so the optimiser's steps are comparable.
struct FitSpace {
  double knee_lo_mhz, knee_hi_mhz;
  std::span<const ProfileCurve> curves;
  static constexpr double kVoltageRatioLo = 0.3, kVoltageRatioHi = 1.0;
  static constexpr double kIdleRatioLo = 0.0, kIdleRatioHi = 2.0;

  // x = (knee, V_min / V_max, C_idle / C_compute) scaled to [0, 1]. C_compute then sets the level:
  // the stage model's power at the curves' highest clocks equals the measured mean there. The
  // silicon is fitted, not the board: no power limit applies while fitting (the result keeps the
  // base's).
  GpuSpec apply(const GpuSpec& base, const std::array<double, 3>& x, bool round) const {
    auto r = [&](double v) { return round ? round6(v) : v; };
    GpuSpec gpu = base;
    gpu.power_limit_w = 0;
    hardware::PowerModel& p = gpu.power;
    const double copy_ratio = base.power.copy_capacitance_nf / base.power.compute_capacitance_nf;
    const double idle_ratio = kIdleRatioLo + x[2] * (kIdleRatioHi - kIdleRatioLo);
    p.knee_clock_mhz = r(knee_lo_mhz + x[0] * (knee_hi_mhz - knee_lo_mhz));
    p.v_min_v = r(p.v_max_v * (kVoltageRatioLo + x[1] * (kVoltageRatioHi - kVoltageRatioLo)));
    // Stage power is affine in the capacitances (ratios fixed): P(C) = P(0) + C · (P(1) − P(0)).
    auto top_power_at = [&](double c_nf) {
      p.compute_capacitance_nf = c_nf;
      p.idle_sm_capacitance_nf = idle_ratio * c_nf;
      p.copy_capacitance_nf = copy_ratio * c_nf;
      double sum = 0;
      for (const ProfileCurve& c : curves) sum += model_transformer_stage(gpu, c.freq_mhz.back()).power_w;
      return sum / static_cast<double>(curves.size());
    };
    const double p0 = top_power_at(0), p1 = top_power_at(1);
    const double c_nf = std::max(1e-3, (measured_top_power_w(curves) - p0) / (p1 - p0));
    p.compute_capacitance_nf = r(c_nf);
    p.idle_sm_capacitance_nf = r(idle_ratio * p.compute_capacitance_nf);
    p.copy_capacitance_nf = r(copy_ratio * p.compute_capacitance_nf);
    if (round) gpu.power_limit_w = base.power_limit_w;
    return gpu;
  }
};

struct Objective {
  const GpuSpec* base;
  const FitSpace* space;
  std::span<const ProfileCurve> curves;
  int evaluations = 0;

  // Sum of squared relative errors of the power shape.
  double operator()(const std::array<double, 3>& x) {
    ++evaluations;
    GpuSpec gpu = space->apply(*base, x, false);
    auto samples = model_samples(gpu, curves);
    double sum = 0;
    for (const ProfileCurve& c : curves) {
      const double top_measured = c.power_w.back(),
                   top_model = samples.at(c.freq_mhz.back()).power_w;
      for (std::size_t i = 0; i < c.freq_mhz.size(); ++i) {
        double err =
            (samples.at(c.freq_mhz[i]).power_w / top_model) / (c.power_w[i] / top_measured) - 1;
        sum += err * err;
      }
    }
    return sum;
  }
};

double nlopt_objective(unsigned n, const double* x, double* grad, void* data) {
  (void)n;
  (void)grad;  // derivative-free
  return (*static_cast<Objective*>(data))({x[0], x[1], x[2]});
}

}  // namespace

double ShapeRow::time_err() const {
  return std::abs(model_time_ratio / measured_time_ratio - 1);
}
double ShapeRow::power_err() const {
  return std::abs(model_power_ratio / measured_power_ratio - 1);
}

std::vector<ProfileCurve> read_stage_profile(const std::filesystem::path& path) {
  using Column = interop::PerseusProfile::Column;
  const interop::PerseusProfile table = interop::read_perseus_profile(path);

  struct Point {
    double freq_mhz, time_s, power_w;
    std::size_t row;
  };
  // Curves keyed by (stage, order of the instruction's first appearance) so output is stable.
  std::vector<std::string> instructions;
  std::map<std::pair<long, std::size_t>, std::vector<Point>> points;
  for (std::size_t row = 0; row < table.rows(); ++row) {
    long stage = table.stage(row);
    if (stage < 0) table.fail(row, Column::kStage, "stage must be >= 0");
    const std::string& instruction = table.instruction(row);
    if (instruction.empty()) table.fail(row, Column::kInstruction, "instruction must not be empty");
    auto it = std::find(instructions.begin(), instructions.end(), instruction);
    std::size_t order = static_cast<std::size_t>(it - instructions.begin());
    if (it == instructions.end()) instructions.push_back(instruction);
    double freq = table.frequency_mhz(row), time = table.time_s(row);
    double energy = table.energy_j(row);
    points[{stage, order}].push_back({freq, time, energy / time, row});
  }
  if (points.empty()) throw InputError({path.string(), 0, 0, ""}, "no measurements");

  std::vector<ProfileCurve> curves;
  for (auto& [key, pts] : points) {
    std::stable_sort(pts.begin(), pts.end(),
                     [](const Point& a, const Point& b) { return a.freq_mhz < b.freq_mhz; });
    ProfileCurve curve{path.string(), key.first, instructions[key.second], {}, {}, {}};
    for (std::size_t i = 0; i < pts.size(); ++i) {
      if (i > 0 && pts[i].freq_mhz == pts[i - 1].freq_mhz) {
        table.fail(pts[i].row, Column::kFrequency,
                   fmt::format("stage {} {} at {} MHz is given twice (also line {})", curve.stage,
                               curve.instruction, pts[i].freq_mhz, table.line_of(pts[i - 1].row)));
      }
      curve.freq_mhz.push_back(pts[i].freq_mhz);
      curve.time_s.push_back(pts[i].time_s);
      curve.power_w.push_back(pts[i].power_w);
    }
    if (curve.freq_mhz.size() < 2) {
      table.fail(pts.front().row, Column::kFrequency,
                 fmt::format("stage {} {} has one clock; a shape needs at least two", curve.stage,
                             curve.instruction));
    }
    curves.push_back(std::move(curve));
  }
  return curves;
}

ShapeCheck check_shape(const GpuSpec& gpu, std::span<const ProfileCurve> curves) {
  check_curves(gpu, curves);
  const auto samples = model_samples(gpu, curves);
  ShapeCheck check;
  for (const ProfileCurve& c : curves) {
    const hardware::StageSample& top = samples.at(c.freq_mhz.back());
    for (std::size_t i = 0; i < c.freq_mhz.size(); ++i) {
      const hardware::StageSample& s = samples.at(c.freq_mhz[i]);
      check.rows.push_back({c.source, c.stage, c.instruction, c.freq_mhz[i],
                            c.time_s[i] / c.time_s.back(), s.time_rel / top.time_rel,
                            c.power_w[i] / c.power_w.back(), s.power_w / top.power_w});
    }
  }
  check.summary = summarize(check.rows);
  return check;
}

std::string summary_line(const ShapeSummary& s) {
  return fmt::format(
      "time_err_median={:.2f} time_err_max={:.2f} power_err_median={:.2f} power_err_max={:.2f}",
      100 * s.time_err_median, 100 * s.time_err_max, 100 * s.power_err_median,
      100 * s.power_err_max);
}

FitResult fit_power_model(const GpuSpec& base, std::span<const ProfileCurve> curves) {
  validate(base, base.name);
  check_curves(base, curves);
  if (!(measured_top_power_w(curves) > base.static_power_w)) {
    throw InputError({curves.front().source, 0, 0, "energy"},
                     fmt::format("the measured power at the top clocks, {:.1f} W, leaves no dynamic power above "
                                 "{}'s static {} W",
                                 measured_top_power_w(curves), base.name, base.static_power_w));
  }
  // The knee may sit anywhere in the GPU's clock range, but below the lowest measured clock the
  // data cannot place it.
  double lowest_measured = base.max_clock_mhz;
  for (const ProfileCurve& c : curves)
    lowest_measured = std::min(lowest_measured, c.freq_mhz.front());
  const FitSpace space{std::max(base.min_clock_mhz(), lowest_measured), base.max_clock_mhz, curves};

  Objective objective{&base, &space, curves};
  std::array<double, 3> best{};
  double best_value = std::numeric_limits<double>::infinity();
  // A fixed grid of starts: the knee makes the objective kinked, so one local search can stall.
  for (double knee : {0.25, 0.5, 0.75}) {
    for (double voltage : {0.4, 0.7}) {
      for (double idle : {0.05, 0.25}) {
        nlopt::opt opt(nlopt::LN_SBPLX, 3);
        opt.set_lower_bounds(std::vector<double>(3, 0.0));
        opt.set_upper_bounds(std::vector<double>(3, 1.0));
        opt.set_min_objective(nlopt_objective, &objective);
        opt.set_xtol_rel(1e-9);
        opt.set_ftol_abs(1e-14);
        opt.set_maxeval(4000);
        std::vector<double> x = {knee, voltage, idle};
        double value = std::numeric_limits<double>::infinity();
        try {
          opt.optimize(x, value);
        } catch (const nlopt::roundoff_limited&) {
          value = objective({x[0], x[1], x[2]});  // x holds the best point found
        }
        if (value < best_value) {
          best_value = value;
          best = {x[0], x[1], x[2]};
        }
      }
    }
  }

  FitResult result;
  result.gpu = space.apply(base, best, true);
  result.evaluations = objective.evaluations;
  result.check = check_shape(result.gpu, curves);  // on this board, as `kareus hw check` holds it
  validate(result.gpu, "fitted " + base.name);
  const ShapeSummary& s = result.check.summary;
  std::vector<std::string> sources;
  for (const ProfileCurve& c : curves) {
    if (std::find(sources.begin(), sources.end(), c.source) == sources.end())
      sources.push_back(c.source);
  }
  result.gpu.calibration = {};
  result.gpu.calibration.power = hardware::PowerFitRecord{
      .method = "least squares on power(f)/power(f_top) of the transformer stage model, NLopt LN_SBPLX from 12 "
                "fixed starts; fitted knee_clock_mhz, v_min_v, idle_sm_capacitance_nf; compute_capacitance_nf sets "
                "the model's power at the profiles' top clocks to their measured mean (no power limit while "
                "fitting); copy_capacitance_nf keeps the base ratio",
      .top_clock_power_w = round6(measured_top_power_w(curves)),
      .profiles = sources,
      .points = static_cast<int>(s.points),
      .time_err_median_pct = round6(100 * s.time_err_median),
      .time_err_max_pct = round6(100 * s.time_err_max),
      .power_err_median_pct = round6(100 * s.power_err_median),
      .power_err_max_pct = round6(100 * s.power_err_max),
      .command = "",  // fit_gpu records the command
  };
  return result;
}

}  // namespace kareus::calibrate
