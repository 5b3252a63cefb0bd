#include "kareus/interop/artifact_log.hpp"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "kareus/core/error.hpp"
#include "kareus/interop/artifact_format.hpp"

namespace kareus::interop {
namespace {

// A slot field as the artifact writes it: a name, or a legacy op index (-1 = none).
struct SlotField {
  std::string name;  // ours; empty when it is an op index other than -1
  std::string written;
  bool index = false;  // the legacy form
};

SlotField slot_field(const nlohmann::json& value, const InputLocation& where) {
  if (value.is_string()) {
    const std::string text = value.get<std::string>();
    if (text.empty()) throw InputError(where, "is empty; expected a slot name or \"none\"");
    return {from_artifact_slot(text), text, false};
  }
  if (value.is_number_integer()) {
    const long index = value.get<long>();
    return {index == -1 ? std::string(kNotOverlapped) : std::string(), std::to_string(index), true};
  }
  throw InputError(where, fmt::format("expected a slot name or an op index, got {}", value.dump()));
}

}  // namespace

std::variant<ArtifactLogRecord, UnusableLogRecord> parse_artifact_log_line(const std::string& line,
                                                                           const std::string& file, long number) {
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(line);
  } catch (const nlohmann::json::exception& e) {  // parse_error, or out_of_range for a number overflow
    throw InputError({file, number, 0, ""}, fmt::format("not a JSON object: {}", e.what()));
  }
  if (!doc.is_object()) throw InputError({file, number, 0, ""}, "not a JSON object");
  auto field = [&](const char* name) -> const nlohmann::json& {
    auto it = doc.find(name);
    if (it == doc.end()) throw InputError({file, number, 0, name}, "is missing");
    return *it;
  };
  auto number_of = [&](const char* name) {
    const auto& v = field(name);
    if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0) {
      throw InputError({file, number, 0, name}, fmt::format("must be a number >= 0, got {}", v.dump()));
    }
    return v.get<double>();
  };
  auto integer_of = [&](const char* name) {
    const double v = number_of(name);
    if (v != std::floor(v) || v > std::numeric_limits<int>::max()) {
      throw InputError({file, number, 0, name}, fmt::format("must be an integer an int holds, got {}", v));
    }
    return static_cast<int>(v);
  };
  const double freq = number_of("freq");
  if (freq <= 0) throw InputError({file, number, 0, "freq"}, "must be a positive clock in MHz");
  const SlotField start = slot_field(field("overlap_start"), {file, number, 0, "overlap_start"});
  const SlotField end = slot_field(field("overlap_end"), {file, number, 0, "overlap_end"});
  const int sm = integer_of("sm");
  integer_of("block");  // the collective's threads per block: the artifact's, not a Kareus knob
  const double t = number_of("time_s"), e = number_of("energy_j");
  // A legacy window of op indices of the artifact's op list (e.g. (0, 6): launch before op 0, sync
  // before op 6); only (-1, -1), not overlapped, has a Kareus knob.
  if ((start.index || end.index) && (start.name.empty() || end.name != kNotOverlapped)) {
    return UnusableLogRecord{fmt::format("the legacy op-index window ({}, {}) names no launch slot Kareus can match",
                                         start.written, end.written)};
  }
  if (end.name != kNotOverlapped) {
    return UnusableLogRecord{
        fmt::format("overlap_end {} syncs the collective at a given op, which no Kareus knob does", end.written)};
  }
  return ArtifactLogRecord{freq, sm, start.name, t, e};
}

std::string format_artifact_log_line(const ArtifactLogRecord& r) {
  nlohmann::ordered_json doc;
  if (r.freq_mhz == std::floor(r.freq_mhz)) {
    doc["freq"] = static_cast<long>(r.freq_mhz);
  } else {
    doc["freq"] = r.freq_mhz;
  }
  doc["overlap_start"] = to_artifact_slot(r.slot);
  doc["overlap_end"] = kNotOverlapped;
  doc["sm"] = r.sms;
  doc["block"] = kArtifactBlockSize;
  doc["time_s"] = r.time_s;
  doc["energy_j"] = r.energy_j;
  return doc.dump();
}

bool is_artifact_log_line(const std::string& line) {
  try {
    const nlohmann::json doc = nlohmann::json::parse(line);
    return doc.is_object() && !doc.contains("format") && doc.contains("freq") && doc.contains("overlap_start");
  } catch (const nlohmann::json::exception&) {
    return false;
  }
}

}  // namespace kareus::interop
