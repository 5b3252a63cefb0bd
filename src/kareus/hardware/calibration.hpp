// How a GPU file's fitted numbers were fitted, as `kareus hw fit` records them in its
// "calibration": the power model's fit to stage profiles (its fields at the top level, as the
// bundled files carry them), the time scale's to measured plans ("time_scale") and overlap's
// interference factors to measured partitions ("overlap"). Each record names what it was fitted
// to, its errors and the command that made it, so a preset says where its numbers come from.
//
// Thread-safety: plain values.
// Example:
//   const Calibration& c = load_gpu("a100-sxm4-40gb").calibration;
//   if (c.time_scale) fmt::print("{} plans\n", c.time_scale->fitted_plans);
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace kareus {
class JsonFields;
}

namespace kareus::hardware {

struct PowerFitRecord {
  std::string method;
  double top_clock_power_w = 0;  // the profiles' measured mean at their top clocks
  std::vector<std::string> profiles;
  int points = 0;
  double time_err_median_pct = 0, time_err_max_pct = 0;
  double power_err_median_pct = 0, power_err_max_pct = 0;
  std::string command;  // empty when fitted by a library call, not a command

  bool operator==(const PowerFitRecord&) const = default;
};

struct TimeScaleRecord {
  std::string method;
  std::vector<std::string> plans;  // the measured plans' files
  std::string engine;              // the engine the plans were measured through
  int fitted_plans = 0, checked_plans = 0;
  double time_err_median_pct_at_scale_1 = 0, energy_err_median_pct_at_scale_1 = 0;
  double time_err_median_pct = 0, energy_err_median_pct = 0;
  std::string command;

  bool operator==(const TimeScaleRecord&) const = default;
};

struct OverlapRecord {
  std::string method;
  std::vector<std::string> partitions;   // the measured partitions' directories
  std::vector<std::string> measured_on;  // their GPUs and evaluators
  int pairs = 0;                         // overlapped and sequential knobs at one clock
  double ratio_err_median_pct_before = 0, ratio_err_median_pct = 0;
  std::string command;

  bool operator==(const OverlapRecord&) const = default;
};

struct Calibration {
  std::optional<PowerFitRecord> power;
  std::optional<TimeScaleRecord> time_scale;
  std::optional<OverlapRecord> overlap;

  bool empty() const { return !power && !time_scale && !overlap; }
  bool operator==(const Calibration&) const = default;
};

// Reads the "calibration" object `fields` holds; InputError naming the field at fault, unknown
// fields included.
Calibration read_calibration(JsonFields& fields);
// The object read_calibration reads, keys in the bundled files' order.
nlohmann::ordered_json to_json(const Calibration& calibration);

}  // namespace kareus::hardware
