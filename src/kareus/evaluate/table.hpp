// Measured costs: a TableEvaluator answers from samples measured elsewhere (on a GPU, by the
// Kareus artifact, or by an earlier run) and never invents a number: a knob without a sample is
// an EvalStatus::kNotMeasured result that names the knob.
//
// Files it reads:
// - our CSV: columns freq_mhz, sms, slot, time_s, energy_j and, unless the caller names the
//   partition, partition (the key); further columns are ignored. The search's frontier CSVs are
//   in this format.
// - the Kareus artifact's eval_results.jsonl: one JSON object per line with freq, overlap_start,
//   overlap_end, sm, block, time_s, energy_j (and optionally partition), read as
//   evaluate/artifact_tree.hpp reads them: overlap_start is the launch slot in the artifact's
//   names (activation_0 is our act_0; "none" or -1 = sequential); a sample whose overlap_end is
//   not "none"/-1 (it syncs the collective early, which our knobs never do) or whose
//   overlap_start is an op index is skipped and counted. block (the collective's threads per
//   block) is not a Kareus knob and is ignored. A whole artifact profiling tree is read by
//   read_artifact_tree.
// Times and energies are per GPU. Repeated samples of one knob are averaged. A partition that is
// never overlapped (no launch slots) has one knob per clock: its sample at that clock answers
// whatever SM count the knob names.
//
// Thread-safety: load everything first; after that evaluate() may run concurrently.
// Example:
//   auto table = std::make_unique<TableEvaluator>(hardware::load_gpu_preset("a100-sxm4-40gb"));
//   table->add_file("fwd_mlp/eval_results.jsonl", "fwd_mlp");
//   Evaluator eval(std::move(table));
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "kareus/evaluate/evaluator.hpp"

namespace kareus::evaluate {

class TableEvaluator final : public EvaluatorImpl {
 public:
  explicit TableEvaluator(hardware::GpuSpec gpu);

  // Reads a .jsonl (artifact) or any other file as CSV. `partition_key` is the partition every
  // sample belongs to when the file does not say; a file that says neither is an InputError, as
  // is a malformed line (named by file:line and field), a non-finite or negative time or energy.
  void add_file(const std::filesystem::path& path,
                const std::optional<std::string>& partition_key = {});
  void add_sample(const std::string& partition_key, const workload::Knob& knob, double time_s,
                  double energy_j);

  // Names the evaluator after where its samples came from (default: table:<files>).
  void set_name(std::string name) { name_ = std::move(name); }

  std::size_t samples() const { return samples_; }
  std::size_t skipped_samples() const { return skipped_; }
  std::vector<std::string> partition_keys() const;
  // The distinct knobs with samples, by partition key.
  std::map<std::string, std::vector<workload::Knob>> knobs_by_partition() const;

  std::string name() const override;
  Provenance provenance() const override { return Provenance::kMeasurement; }
  bool thread_safe() const override { return true; }
  const hardware::GpuSpec& gpu() const override { return gpu_; }
  EvalResult evaluate(const workload::Partition& partition,
                      const workload::Knob& knob) const override;
  // The distinct knobs sampled for the partition's key, as they were recorded (for a partition
  // without launch slots a sample at a clock answers that clock whatever its SMs, see above).
  std::optional<std::vector<workload::Knob>> known_knobs(const workload::Partition& partition) const override;

 private:
  void add_csv(const std::filesystem::path& path, const std::optional<std::string>& partition_key);
  void add_jsonl(const std::filesystem::path& path,
                 const std::optional<std::string>& partition_key);

  struct Sum {
    double time_s = 0, energy_j = 0;
    int count = 0;
  };
  using Key = std::tuple<std::string, double, int, std::string>;  // partition, freq, sms, slot
  hardware::GpuSpec gpu_;
  std::map<Key, Sum> table_;
  std::vector<std::string> files_;
  std::string name_;
  std::size_t samples_ = 0;
  std::size_t skipped_ = 0;
};

}  // namespace kareus::evaluate
