// GPU descriptions as JSON files: reading with errors that name file and field, writing, presets.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "kareus/core/error.hpp"
#include "kareus/core/io.hpp"
#include "kareus/core/json_fields.hpp"
#include "kareus/core/paths.hpp"
#include "kareus/hardware/gpu.hpp"

namespace kareus::hardware {
namespace {

using json = nlohmann::ordered_json;

using Fields = JsonFields;

std::vector<double> read_clocks(Fields& fields, const std::string& source) {
  const json& v = fields.require("sm_clocks_mhz");
  std::vector<double> clocks;
  if (v.is_object()) {
    // {"min": 210, "max": 1410, "step": 15}: the usual evenly stepped table.
    Fields range(v, source, "sm_clocks_mhz");
    double lo = range.positive("min"), hi = range.positive("max"), step = range.positive("step");
    range.reject_unknown();
    if (hi < lo) range.fail("max", fmt::format("{} is below min {}", hi, lo));
    double steps = (hi - lo) / step;
    if (std::abs(steps - std::round(steps)) > 1e-6) {
      range.fail("step", fmt::format("{} does not divide max - min = {}", step, hi - lo));
    }
    if (steps > 100'000) range.fail("step", "too many clocks");
    for (long k = 0; k <= std::lround(steps); ++k)
      clocks.push_back(lo + static_cast<double>(k) * step);
    clocks.back() = hi;
  } else if (v.is_array()) {
    for (const json& c : v) {
      if (!c.is_number() || !std::isfinite(c.get<double>())) {
        fields.fail("sm_clocks_mhz", "expected numbers (MHz)");
      }
      clocks.push_back(c.get<double>());
    }
  } else {
    fields.fail("sm_clocks_mhz", "expected a list of clocks or {\"min\", \"max\", \"step\"}");
  }
  return clocks;
}

PowerModel read_power_model(const json& v, const std::string& source) {
  Fields f(v, source, "power_model");
  PowerModel p;
  p.knee_clock_mhz = f.positive("knee_clock_mhz");
  p.v_min_v = f.positive("v_min_v");
  p.v_max_v = f.positive("v_max_v");
  p.compute_capacitance_nf = f.positive("compute_capacitance_nf");
  p.copy_capacitance_nf = f.non_negative("copy_capacitance_nf");
  p.idle_sm_capacitance_nf = f.non_negative("idle_sm_capacitance_nf");
  p.hbm_pj_per_byte = f.non_negative("hbm_pj_per_byte");
  p.nvlink_pj_per_byte = f.non_negative("nvlink_pj_per_byte");
  f.reject_unknown();
  return p;
}

// Whole numbers are written as integers (1410, not 1410.0) so preset files stay readable.
json number_json(double x) {
  if (std::isfinite(x) && std::abs(x) < 1e15 && x == std::round(x))
    return static_cast<long long>(x);
  return x;
}

json clocks_json(const std::vector<double>& clocks) {
  if (clocks.size() >= 3) {
    double step = clocks[1] - clocks[0];
    bool even = step > 0;
    for (std::size_t i = 1; even && i < clocks.size(); ++i) {
      even = std::abs(clocks[i] - (clocks[0] + static_cast<double>(i) * step)) < 1e-9;
    }
    if (even) {
      return json{{"min", number_json(clocks.front())},
                  {"max", number_json(clocks.back())},
                  {"step", number_json(step)}};
    }
  }
  json list = json::array();
  for (double c : clocks) list.push_back(number_json(c));
  return list;
}

}  // namespace

void validate(const GpuSpec& gpu, const std::string& source) {
  auto fail = [&](const std::string& field, const std::string& message) {
    throw InputError({source, 0, 0, field}, message);
  };
  if (gpu.name.empty()) fail("name", "must not be empty");
  if (gpu.sms < 1) fail("sms", "must be at least 1");
  if (gpu.sm_clocks_mhz.empty()) fail("sm_clocks_mhz", "must list at least one clock");
  for (std::size_t i = 0; i < gpu.sm_clocks_mhz.size(); ++i) {
    double c = gpu.sm_clocks_mhz[i];
    if (!(std::isfinite(c) && c > 0))
      fail("sm_clocks_mhz", fmt::format("clock {} is not positive", c));
    if (i > 0 && !(c > gpu.sm_clocks_mhz[i - 1])) {
      fail("sm_clocks_mhz",
           fmt::format("must be strictly ascending ({} after {})", c, gpu.sm_clocks_mhz[i - 1]));
    }
  }
  if (gpu.max_clock_mhz != gpu.sm_clocks_mhz.back()) {
    fail("max_clock_mhz", fmt::format("{} differs from the highest listed clock {}",
                                      gpu.max_clock_mhz, gpu.sm_clocks_mhz.back()));
  }
  auto positive = [&](const std::string& field, double x) {
    if (!(std::isfinite(x) && x > 0)) fail(field, fmt::format("must be positive, got {}", x));
  };
  // Fields are named as in GPU JSON files.
  positive("peak_bf16_tflops", gpu.peak_bf16_flops);
  positive("hbm_bandwidth_gb_per_s", gpu.hbm_bandwidth_bps);
  positive("nvlink_bandwidth_gb_per_s_per_direction", gpu.nvlink_bandwidth_bps);
  positive("tdp_w", gpu.tdp_w);
  if (!(std::isfinite(gpu.static_power_w) && gpu.static_power_w >= 0 &&
        gpu.static_power_w < gpu.tdp_w)) {
    fail("static_power_w",
         fmt::format("must be in [0, tdp_w = {}), got {}", gpu.tdp_w, gpu.static_power_w));
  }
  if (!(std::isfinite(gpu.power_limit_w) && gpu.power_limit_w > gpu.static_power_w)) {
    fail("power_limit_w", fmt::format("must be above static_power_w = {} W, got {}", gpu.static_power_w,
                                      gpu.power_limit_w));
  }
  positive("time_scale", gpu.time_scale);
  for (auto [field, value] : {std::pair{"overlap_compute_slowdown", gpu.overlap_compute_slowdown},
                              std::pair{"overlap_collective_slowdown", gpu.overlap_collective_slowdown}}) {
    // Interference only slows: below 1 the overlap would beat the parts it is made of.
    if (!(std::isfinite(value) && value >= 1)) fail(field, fmt::format("must be at least 1, got {}", value));
  }
  const PowerModel& p = gpu.power;
  if (!(p.knee_clock_mhz >= gpu.min_clock_mhz() && p.knee_clock_mhz <= gpu.max_clock_mhz)) {
    fail("power_model.knee_clock_mhz",
         fmt::format("{} outside the clock range [{}, {}] MHz", p.knee_clock_mhz,
                     gpu.min_clock_mhz(), gpu.max_clock_mhz));
  }
  positive("power_model.v_min_v", p.v_min_v);
  if (!(std::isfinite(p.v_max_v) && p.v_max_v >= p.v_min_v)) {
    fail("power_model.v_max_v",
         fmt::format("must be at least v_min_v = {}, got {}", p.v_min_v, p.v_max_v));
  }
  positive("power_model.compute_capacitance_nf", p.compute_capacitance_nf);
  auto non_negative = [&](const std::string& field, double x) {
    if (!(std::isfinite(x) && x >= 0)) fail(field, fmt::format("must be >= 0, got {}", x));
  };
  non_negative("power_model.copy_capacitance_nf", p.copy_capacitance_nf);
  non_negative("power_model.idle_sm_capacitance_nf", p.idle_sm_capacitance_nf);
  non_negative("power_model.hbm_pj_per_byte", p.hbm_pj_per_byte);
  non_negative("power_model.nvlink_pj_per_byte", p.nvlink_pj_per_byte);
}

GpuSpec with_power_limit(GpuSpec gpu, double power_limit_w, const std::string& field) {
  if (!(std::isfinite(power_limit_w) && power_limit_w > gpu.static_power_w && power_limit_w <= gpu.tdp_w)) {
    throw InputError({"", 0, 0, field}, fmt::format("{} takes a power limit in ({:g}, {:g}] W, got {:g}", gpu.name,
                                                    gpu.static_power_w, gpu.tdp_w, power_limit_w));
  }
  gpu.power_limit_w = power_limit_w;
  return gpu;
}

GpuSpec gpu_spec_from_json(const json& doc, const std::string& source) {
  Fields f(doc, source, "");
  GpuSpec gpu;
  gpu.name = f.text("name");
  gpu.display_name = f.text("display_name");
  gpu.source = f.text("source");
  gpu.sms = f.count("sms");
  gpu.sm_clocks_mhz = read_clocks(f, source);
  gpu.max_clock_mhz = gpu.sm_clocks_mhz.empty() ? 0 : gpu.sm_clocks_mhz.back();
  // Files use the spec sheets' units; GpuSpec holds base units.
  gpu.peak_bf16_flops = f.positive("peak_bf16_tflops") * 1e12;
  gpu.hbm_bandwidth_bps = f.positive("hbm_bandwidth_gb_per_s") * 1e9;
  gpu.nvlink_bandwidth_bps = f.positive("nvlink_bandwidth_gb_per_s_per_direction") * 1e9;
  if (f.find("l2_bandwidth_bytes_per_clock"))
    gpu.l2_bytes_per_clock = f.non_negative("l2_bandwidth_bytes_per_clock");
  gpu.tdp_w = f.positive("tdp_w");
  gpu.power_limit_w = f.find("power_limit_w") ? f.positive("power_limit_w") : gpu.tdp_w;
  gpu.static_power_w = f.non_negative("static_power_w");
  if (f.find("time_scale")) gpu.time_scale = f.positive("time_scale");
  if (f.find("overlap_compute_slowdown")) gpu.overlap_compute_slowdown = f.positive("overlap_compute_slowdown");
  if (f.find("overlap_collective_slowdown"))
    gpu.overlap_collective_slowdown = f.positive("overlap_collective_slowdown");
  gpu.power = read_power_model(f.require("power_model"), source);
  if (const json* calibration = f.find("calibration")) {
    JsonFields fields(*calibration, source, "calibration");
    gpu.calibration = read_calibration(fields);
  }
  f.reject_unknown();
  validate(gpu, source);
  return gpu;
}

GpuSpec load_gpu_spec(const std::filesystem::path& path) {
  return gpu_spec_from_json(parse_json_file(path), path.string());
}

std::vector<std::string> gpu_preset_names() { return preset_names(data_dir() / "gpus"); }

GpuSpec load_gpu_preset(std::string_view name) {
  const auto path = preset_path(data_dir() / "gpus", name, "GPU");
  GpuSpec gpu = load_gpu_spec(path);
  if (gpu.name != name) {
    throw InputError({path.string(), 0, 0, "name"},
                     fmt::format("'{}' differs from the file name '{}'", gpu.name, name));
  }
  return gpu;
}

GpuSpec load_gpu(std::string_view name_or_path) {
  return names_a_file(name_or_path) ? load_gpu_spec(std::filesystem::path(name_or_path))
                                    : load_gpu_preset(name_or_path);
}

json to_json(const GpuSpec& gpu) {
  const PowerModel& p = gpu.power;
  json doc = {
      {"name", gpu.name},
      {"display_name", gpu.display_name},
      {"source", gpu.source},
      {"sms", gpu.sms},
      {"sm_clocks_mhz", clocks_json(gpu.sm_clocks_mhz)},
      {"peak_bf16_tflops", number_json(gpu.peak_bf16_flops / 1e12)},
      {"hbm_bandwidth_gb_per_s", number_json(gpu.hbm_bandwidth_bps / 1e9)},
      {"nvlink_bandwidth_gb_per_s_per_direction", number_json(gpu.nvlink_bandwidth_bps / 1e9)},
      {"tdp_w", number_json(gpu.tdp_w)},
      {"power_limit_w", number_json(gpu.power_limit_w)},
      {"static_power_w", number_json(gpu.static_power_w)},
      {"power_model",
       {{"knee_clock_mhz", number_json(p.knee_clock_mhz)},
        {"v_min_v", number_json(p.v_min_v)},
        {"v_max_v", number_json(p.v_max_v)},
        {"compute_capacitance_nf", number_json(p.compute_capacitance_nf)},
        {"copy_capacitance_nf", number_json(p.copy_capacitance_nf)},
        {"idle_sm_capacitance_nf", number_json(p.idle_sm_capacitance_nf)},
        {"hbm_pj_per_byte", number_json(p.hbm_pj_per_byte)},
        {"nvlink_pj_per_byte", number_json(p.nvlink_pj_per_byte)}}},
  };
  if (gpu.l2_bytes_per_clock > 0) doc["l2_bandwidth_bytes_per_clock"] = number_json(gpu.l2_bytes_per_clock);
  if (gpu.time_scale != 1) doc["time_scale"] = number_json(gpu.time_scale);
  if (gpu.overlap_compute_slowdown != 1) doc["overlap_compute_slowdown"] = number_json(gpu.overlap_compute_slowdown);
  if (gpu.overlap_collective_slowdown != 1)
    doc["overlap_collective_slowdown"] = number_json(gpu.overlap_collective_slowdown);
  if (!gpu.calibration.empty()) doc["calibration"] = to_json(gpu.calibration);
  return doc;
}

}  // namespace kareus::hardware
