#include "kareus/hardware/calibration.hpp"

#include "kareus/core/json_fields.hpp"

namespace kareus::hardware {
namespace {

using json = nlohmann::ordered_json;

std::string optional_text(JsonFields& f, const std::string& key) { return f.find(key) ? f.text(key) : ""; }

PowerFitRecord read_power(JsonFields& f) {
  PowerFitRecord r;
  r.method = f.text("method");
  r.top_clock_power_w = f.positive("top_clock_power_w");
  r.profiles = f.texts("profiles");
  r.points = f.count("points");
  r.time_err_median_pct = f.non_negative("time_err_median_pct");
  r.time_err_max_pct = f.non_negative("time_err_max_pct");
  r.power_err_median_pct = f.non_negative("power_err_median_pct");
  r.power_err_max_pct = f.non_negative("power_err_max_pct");
  r.command = optional_text(f, "command");
  return r;
}

TimeScaleRecord read_time_scale(JsonFields& f) {
  TimeScaleRecord r;
  r.method = f.text("method");
  r.plans = f.texts("plans");
  r.engine = f.text("engine");
  r.fitted_plans = f.count("fitted_plans");
  r.checked_plans = f.count("checked_plans");
  r.time_err_median_pct_at_scale_1 = f.non_negative("time_err_median_pct_at_scale_1");
  r.energy_err_median_pct_at_scale_1 = f.non_negative("energy_err_median_pct_at_scale_1");
  r.time_err_median_pct = f.non_negative("time_err_median_pct");
  r.energy_err_median_pct = f.non_negative("energy_err_median_pct");
  r.command = optional_text(f, "command");
  f.reject_unknown();
  return r;
}

OverlapRecord read_overlap(JsonFields& f) {
  OverlapRecord r;
  r.method = f.text("method");
  r.partitions = f.texts("partitions");
  r.measured_on = f.texts("measured_on");
  r.pairs = f.count("pairs");
  r.ratio_err_median_pct_before = f.non_negative("ratio_err_median_pct_before");
  r.ratio_err_median_pct = f.non_negative("ratio_err_median_pct");
  r.command = optional_text(f, "command");
  f.reject_unknown();
  return r;
}

void put_command(json& doc, const std::string& command) {
  if (!command.empty()) doc["command"] = command;
}

}  // namespace

Calibration read_calibration(JsonFields& f) {
  Calibration c;
  // The power fit's fields sit at the top level; its method says it is there.
  if (f.find("method")) c.power = read_power(f);
  if (const json* t = f.find("time_scale")) {
    JsonFields fields(*t, f.source(), f.field("time_scale"));
    c.time_scale = read_time_scale(fields);
  }
  if (const json* o = f.find("overlap")) {
    JsonFields fields(*o, f.source(), f.field("overlap"));
    c.overlap = read_overlap(fields);
  }
  f.reject_unknown();
  return c;
}

json to_json(const Calibration& c) {
  json doc = json::object();
  if (const auto& p = c.power) {
    doc = {{"method", p->method},
           {"top_clock_power_w", p->top_clock_power_w},
           {"profiles", p->profiles},
           {"points", p->points},
           {"time_err_median_pct", p->time_err_median_pct},
           {"time_err_max_pct", p->time_err_max_pct},
           {"power_err_median_pct", p->power_err_median_pct},
           {"power_err_max_pct", p->power_err_max_pct}};
    put_command(doc, p->command);
  }
  if (const auto& t = c.time_scale) {
    json& r = doc["time_scale"] = {{"method", t->method},
                                   {"plans", t->plans},
                                   {"engine", t->engine},
                                   {"fitted_plans", t->fitted_plans},
                                   {"checked_plans", t->checked_plans},
                                   {"time_err_median_pct_at_scale_1", t->time_err_median_pct_at_scale_1},
                                   {"energy_err_median_pct_at_scale_1", t->energy_err_median_pct_at_scale_1},
                                   {"time_err_median_pct", t->time_err_median_pct},
                                   {"energy_err_median_pct", t->energy_err_median_pct}};
    put_command(r, t->command);
  }
  if (const auto& o = c.overlap) {
    json& r = doc["overlap"] = {{"method", o->method},
                                {"partitions", o->partitions},
                                {"measured_on", o->measured_on},
                                {"pairs", o->pairs},
                                {"ratio_err_median_pct_before", o->ratio_err_median_pct_before},
                                {"ratio_err_median_pct", o->ratio_err_median_pct}};
    put_command(r, o->command);
  }
  return doc;
}

}  // namespace kareus::hardware
