// The search journal: a JSONL file, one header line naming the workload, the partition and the
// evaluator, then one line per measurement, appended, flushed and fsynced as each completes.
// Reopening it resumes a search; a run killed at any moment (SIGKILL included) loses at most the
// measurements in flight: a torn last line (no newline, or only the NUL bytes a machine crash
// leaves) is dropped with a warning. Any other line that is not a measurement was edited or
// damaged, and is refused naming its line, the file untouched. A write that fails (a full disk)
// throws EnvironmentError and leaves the file as it was before it, whole lines only.
//
// Measurement lines use the field names of the Kareus artifact's eval_results.jsonl for the knob:
//   freq           SM clock (MHz)                        = Knob::freq_mhz
//   overlap_start  launch slot of the collective          = Knob::slot ("none": sequential)
//   overlap_end    where the overlap window must end      = always "none" (no forced end; Kareus
//                                                           lets the collective run to completion)
//   sm             SMs given to the collective            = Knob::sms
//   block          threads per block of the collective    = 1024, the artifact's fixed value
// and add time_s, energy_j, effective_energy_j, status ("ok" | "failed"), error, pass, batch,
// repeat (only on a knob measured again: its n-th measurement after the first) and
// predicted {time_s, time_sd_s, energy_j, energy_sd_j, effective_energy_j, effective_energy_sd_j}.
//
// A journal may also be a Kareus artifact's eval_results.jsonl (its lines are artifact records,
// with no header): opening it resumes from its records (read as evaluate/artifact_tree.hpp reads
// them; unusable ones are left out and counted), and appends new successful measurements in the
// artifact's own record form (freq, overlap_start in its slot names, overlap_end, sm, block,
// time_s, energy_j), so that both tools can go on from the file. The artifact keeps a knob's first
// record only, so a repeated measurement is kept in memory there, not appended. Such a log names
// no workload or evaluator; a partition directory that names another partition is refused.
//
// Thread-safety: append() may be called from several threads; the rest is single-threaded.
// Example:
//   Journal journal = Journal::open("fwd_mlp.journal.jsonl", header);   // creates or resumes
//   for (const Measurement& m : journal.measurements()) ...;
//   journal.append(measurement);
#pragma once

#include <filesystem>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kareus/search/measurement.hpp"

namespace kareus::search {

// The journal's identity: a journal is only resumed by a search of the same partition and evaluator
// whose workload (any JSON describing what the partition's cost depends on; workload::cost_identity)
// it agrees with: every field of the wanted workload recorded, equal (fields only the journal
// records are ignored).
struct JournalHeader {
  nlohmann::json workload;
  std::string partition;
  std::string evaluator;
  bool operator==(const JournalHeader&) const = default;
};

struct JournalContents {
  JournalHeader header;
  std::vector<Measurement> measurements;
  bool torn_tail = false;  // the last line was incomplete (dropped)
  bool artifact_log = false;  // an artifact's eval_results.jsonl, not a Kareus journal
  std::vector<std::string> unusable;  // artifact records left out: "file:line: reason"
  std::uintmax_t valid_bytes = 0;  // length of the intact part
};

// Encodes / decodes one measurement line (without the newline). decode throws InputError.
std::string encode_measurement(const Measurement& m);
Measurement decode_measurement(const std::string& line, const std::string& where);

// Where every command keeps a partition's journal in a directory: DIR/<key>.journal.jsonl, so
// that `kareus search --out`, `kareus plan --journal-dir` and `kareus profile --out` share them.
std::filesystem::path journal_path(const std::filesystem::path& dir, const std::string& partition_key);

class Journal {
 public:
  // Reads a journal without changing it. Throws InputError (naming file and line) when it cannot
  // be read, is not a Kareus search journal, or has a bad line other than the last. An empty file,
  // or one holding only a torn header, reads as no header (`header.partition` empty).
  static JournalContents read(const std::filesystem::path& path);

  // Checks, without writing anything, that open(path, header) would accept the file: it is
  // missing, empty, or a readable journal with this header. Throws InputError otherwise.
  static void check(const std::filesystem::path& path, const JournalHeader& header);

  // Creates the journal with `header`, or resumes it: checks its header equals `header` (throws
  // InputError naming what differs, leaving the file untouched), drops a torn last line with a
  // warning (truncating it away so that appends start on a fresh line), and keeps its
  // measurements.
  static Journal open(const std::filesystem::path& path, const JournalHeader& header);

  Journal(Journal&&) noexcept;
  Journal& operator=(Journal&&) noexcept;
  ~Journal();

  const std::filesystem::path& path() const { return path_; }
  const JournalHeader& header() const { return header_; }
  bool artifact_log() const { return artifact_log_; }
  // Measurements read at open() plus those appended since, in journal order.
  std::vector<Measurement> measurements() const;

  // Appends one line with a single write, then fsyncs. Throws EnvironmentError when the write or
  // the fsync fails, the file cut back to its length before (the measurement is not kept).
  void append(const Measurement& m);

 private:
  Journal() = default;
  std::filesystem::path path_;
  JournalHeader header_;
  bool artifact_log_ = false;
  std::vector<Measurement> measurements_;
  int fd_ = -1;
  std::unique_ptr<std::mutex> mutex_ = std::make_unique<std::mutex>();
};

}  // namespace kareus::search
