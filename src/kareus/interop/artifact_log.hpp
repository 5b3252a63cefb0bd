// One record of the Kareus artifact's Bayesian-profiling log, `<partition>/eval_results.jsonl`
// (tests/bayesian/logs/... in ml-energy/kareus): a JSON object per measured knob with freq (MHz),
// overlap_start and overlap_end (a slot name in the artifact's names, "none", or a legacy op
// index, -1 = none), sm (SMs of the collective), block (its threads per block), time_s and
// energy_j (per GPU). Read here and written here, so what the search appends to such a log and
// what the planner reads from one are the same grammar.
//
// A record has a Kareus knob only when its collective is not synced at a given op (overlap_end
// none) and its window is named, not a legacy op-index window other than (-1, -1); any other
// well-formed record is unusable, with the reason. A malformed line is an InputError naming file,
// line and field.
//
// Thread-safety: pure functions.
// Example:
//   auto parsed = parse_artifact_log_line(R"({"freq": 1410, "overlap_start": "activation_0", ...})", "f", 1);
//   std::get<ArtifactLogRecord>(parsed).slot == "act_0";
#pragma once

#include <string>
#include <string_view>
#include <variant>

namespace kareus::interop {

// The artifact's and our name for "not overlapped": the collective runs after the compute.
inline constexpr std::string_view kNotOverlapped = "none";

struct ArtifactLogRecord {
  double freq_mhz = 0;
  int sms = 0;       // of the collective
  std::string slot;  // its launch slot in our names; kNotOverlapped when sequential
  double time_s = 0, energy_j = 0;
};

// Why a well-formed record has no Kareus knob.
struct UnusableLogRecord {
  std::string reason;
};

// Line `number` (1-based) of `file`.
std::variant<ArtifactLogRecord, UnusableLogRecord> parse_artifact_log_line(const std::string& line,
                                                                           const std::string& file, long number);

// A measured knob as the artifact logs one (overlap_end none, its fixed block size); no newline.
std::string format_artifact_log_line(const ArtifactLogRecord& record);

// Whether `line` reads as such a record (and not as a Kareus journal's header or measurement).
bool is_artifact_log_line(const std::string& line);

}  // namespace kareus::interop
