// The Kareus artifact's profiling tree, read for planning: what its Bayesian profiling leaves in
// `<config>/` (tests/bayesian/logs/<model>/cp<CP>-tp<TP>-bs<MBS>-seq<SEQ>/ in ml-energy/kareus):
// - `<partition>/eval_results.jsonl`: one JSON object per measured knob, with freq (MHz),
//   overlap_start and overlap_end (a slot name in the artifact's names, "none", or a legacy op
//   index, -1 = none), sm (SMs of the collective), block (its threads per block), time_s and
//   energy_j (per GPU). The directory names the partition (fwd_attn, bwd_mlp, ...).
// - `nonpartition/<freq>/<name>_energy.csv`, columns `time (s),total_energy (J),per_rank_energy
//   (J)`: preprocess (embedding forward), preprocess_backward, postprocess (final norm and output
//   layer forward), postprocess_backward and loss (cross-entropy forward), per microbatch.
//
// Every record is used or reported unusable with its reason:
// - a record whose overlap_end is not none (the collective synced at a given op, which no Kareus
//   knob does), or a legacy window of op indices other than (-1, -1) (no slot name to match ours);
// - a repeated knob (the artifact itself keeps the first);
// - a non-partition CSV that no Kareus key takes, or half of head_fwd (postprocess + loss) without
//   the other half at that clock.
// Slots are renamed to ours through interop/artifact_format.hpp (activation_0 → act_0). Energy is
// the per-rank column (per GPU); head_fwd = postprocess + loss, head_bwd = postprocess_backward
// (the artifact does not profile the loss's backward). A malformed record, or a file that cannot
// be read, is an InputError naming file, line and field.
//
// Thread-safety: plain values.
// Example:
//   ArtifactTree tree = read_artifact_tree("logs/llama3.2_3b/cp1-tp8-bs8-seq4096");
//   auto table = std::make_unique<TableEvaluator>(gpu);
//   tree.fill(*table);
//   for (const std::string& line : tree.account()) fmt::print(stderr, "{}\n", line);
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "kareus/evaluate/table.hpp"

namespace kareus::evaluate {

struct ArtifactRecord {
  std::string partition;  // our key
  workload::Knob knob;    // slot in our names
  double time_s = 0, energy_j = 0;
  std::string where;      // file:line
};

struct UnusableRecord {
  std::string partition;
  std::string where;   // file:line, or the file
  std::string reason;
};

struct ArtifactTree {
  std::filesystem::path root;
  std::vector<ArtifactRecord> records;    // usable, in file order
  std::vector<UnusableRecord> unusable;   // with the reason each
  std::vector<std::string> other_entries;  // directories and files that hold no records we read

  // Partition keys with usable records, and whether any of them is a sequential knob.
  std::map<std::string, std::size_t> records_by_partition() const;
  bool has_sequential_knob(const std::string& partition) const;

  void fill(TableEvaluator& table) const;
  // The account for people, one line each: records used per partition, unusable ones by reason
  // (with the first place), and what Kareus does without the sequential knob where it is missing.
  std::vector<std::string> account() const;
};

// Reads the tree at `root`; InputError when it is not a directory, holds no records at all, or has
// a malformed record (file:line and field).
ArtifactTree read_artifact_tree(const std::filesystem::path& root);

// One line of an eval_results.jsonl (`number` its 1-based line) of `partition`: a usable record,
// or why it is not. Throws InputError naming file:line and field when the line is malformed.
std::variant<ArtifactRecord, UnusableRecord> parse_artifact_record(const std::string& line, const std::string& file,
                                                                   long number, const std::string& partition);

}  // namespace kareus::evaluate
