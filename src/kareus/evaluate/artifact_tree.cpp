#include "kareus/evaluate/artifact_tree.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "kareus/core/csv.hpp"
#include "kareus/core/error.hpp"
#include "kareus/core/io.hpp"
#include "kareus/interop/artifact_format.hpp"
#include "kareus/interop/artifact_log.hpp"

namespace kareus::evaluate {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kRecordsFile = "eval_results.jsonl";
constexpr std::string_view kNonPartitionDir = "nonpartition";

// The artifact's non-partition profiles and the Kareus key each adds to (head_fwd takes two).
struct NonPartitionFile {
  std::string_view name;  // <name>_energy.csv
  std::string_view key;
};
constexpr NonPartitionFile kNonPartitionFiles[] = {
    {"preprocess", "embedding_fwd"},
    {"preprocess_backward", "embedding_bwd"},
    {"postprocess", "head_fwd"},
    {"loss", "head_fwd"},
    {"postprocess_backward", "head_bwd"},
};

std::vector<fs::path> sorted_entries(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) out.push_back(e.path());
  if (ec) throw InputError({dir.string(), 0, 0, ""}, fmt::format("cannot be listed: {}", ec.message()));
  std::sort(out.begin(), out.end());
  return out;
}

std::optional<double> clock_of_dir(const std::string& name) {
  if (name.empty() || !std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;
  }
  double mhz = std::stod(name);
  return mhz > 0 ? std::optional(mhz) : std::nullopt;
}

// (time_s, energy per GPU) rows of one non-partition CSV.
std::vector<std::pair<double, double>> non_partition_rows(const fs::path& path) {
  CsvTable csv = read_csv(path);
  const std::size_t time = csv.require_column("time (s)");
  const std::size_t energy = csv.require_column("per_rank_energy (J)");
  std::vector<std::pair<double, double>> rows;
  for (std::size_t r = 0; r < csv.rows(); ++r) {
    const double t = csv.positive(r, time), e = csv.number(r, energy);
    if (e < 0) csv.fail(r, energy, "must be >= 0");
    rows.emplace_back(t, e);
  }
  return rows;
}

void read_non_partition(const fs::path& dir, ArtifactTree& tree) {
  for (const fs::path& freq_dir : sorted_entries(dir)) {
    const std::string name = freq_dir.filename().string();
    const auto mhz = clock_of_dir(name);
    if (!fs::is_directory(freq_dir) || !mhz) {
      tree.other_entries.push_back(fs::relative(freq_dir, tree.root).string() + " (not a <MHz> directory)");
      continue;
    }
    // head_fwd at this clock is postprocess + loss: both halves, or neither.
    std::map<std::string, std::pair<double, double>> sums;   // key -> (time, energy)
    std::map<std::string, std::vector<std::string>> parts;   // key -> files that fed it
    std::set<std::string> known;
    for (const NonPartitionFile& f : kNonPartitionFiles) {
      const fs::path path = freq_dir / fmt::format("{}_energy.csv", f.name);
      known.insert(path.filename().string());
      if (!fs::exists(path)) continue;
      const auto rows = non_partition_rows(path);
      // The artifact rewrites the file at each run (one row); several rows are averaged.
      double t = 0, e = 0;
      for (const auto& [rt, re] : rows) t += rt, e += re;
      auto& sum = sums[std::string(f.key)];
      sum.first += t / static_cast<double>(rows.size());
      sum.second += e / static_cast<double>(rows.size());
      parts[std::string(f.key)].push_back(path.string());
    }
    for (const fs::path& file : sorted_entries(freq_dir)) {
      if (!known.contains(file.filename().string())) {
        tree.other_entries.push_back(fs::relative(file, tree.root).string() + " (no Kareus key takes it)");
      }
    }
    for (const auto& [key, sum] : sums) {
      const auto& files = parts[key];
      if (key == "head_fwd" && files.size() != 2) {
        tree.unusable.push_back({key, files.front(),
                                 fmt::format("head_fwd at {} MHz is postprocess + loss; the other one is missing", name)});
        continue;
      }
      ArtifactRecord& record = tree.records.emplace_back();
      record.partition = key;
      record.knob = {*mhz, 0, std::string(workload::kSequentialSlot)};
      record.time_s = sum.first;
      record.energy_j = sum.second;
      record.where = fmt::format("{}", fmt::join(files, " + "));
    }
  }
}

void read_partition(const fs::path& dir, ArtifactTree& tree) {
  const std::string key = dir.filename().string();
  const fs::path path = dir / kRecordsFile;
  if (!fs::exists(path)) {
    tree.other_entries.push_back(fmt::format("{} (no {})", fs::relative(dir, tree.root).string(), kRecordsFile));
    return;
  }
  std::istringstream lines(read_text_file(path));
  std::string line;
  long number = 0;
  std::map<workload::Knob, std::string> first_seen;
  while (std::getline(lines, line)) {
    ++number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    auto parsed = parse_artifact_record(line, path.string(), number, key);
    if (auto* bad = std::get_if<UnusableRecord>(&parsed)) {
      tree.unusable.push_back(std::move(*bad));
      continue;
    }
    ArtifactRecord& record = std::get<ArtifactRecord>(parsed);
    auto [it, fresh] = first_seen.emplace(record.knob, record.where);
    if (!fresh) {
      tree.unusable.push_back({key, record.where, fmt::format("repeats the knob of {} (the artifact keeps the first)", it->second)});
      continue;
    }
    tree.records.push_back(std::move(record));
  }
}

}  // namespace

std::variant<ArtifactRecord, UnusableRecord> parse_artifact_record(const std::string& line, const std::string& file,
                                                                   long number, const std::string& partition) {
  static_assert(interop::kNotOverlapped == workload::kSequentialSlot);
  auto parsed = interop::parse_artifact_log_line(line, file, number);
  const std::string where = fmt::format("{}:{}", file, number);
  if (auto* bad = std::get_if<interop::UnusableLogRecord>(&parsed)) return UnusableRecord{partition, where, bad->reason};
  const auto& r = std::get<interop::ArtifactLogRecord>(parsed);
  return ArtifactRecord{partition, {r.freq_mhz, r.sms, r.slot}, r.time_s, r.energy_j, where};
}

std::map<std::string, std::size_t> ArtifactTree::records_by_partition() const {
  std::map<std::string, std::size_t> out;
  for (const auto& r : records) ++out[r.partition];
  return out;
}

bool ArtifactTree::has_sequential_knob(const std::string& partition) const {
  return std::any_of(records.begin(), records.end(),
                     [&](const ArtifactRecord& r) { return r.partition == partition && r.knob.sequential(); });
}

void ArtifactTree::fill(TableEvaluator& table) const {
  for (const ArtifactRecord& r : records) table.add_sample(r.partition, r.knob, r.time_s, r.energy_j);
}

std::vector<std::string> ArtifactTree::account() const {
  std::vector<std::string> out;
  const auto by_partition = records_by_partition();
  std::vector<std::string> used;
  for (const auto& [key, n] : by_partition) used.push_back(fmt::format("{} {}", key, n));
  out.push_back(fmt::format("artifact tree {}: {} records used ({}), {} unusable", root.string(), records.size(),
                            fmt::join(used, ", "), unusable.size()));
  // Unusable records by (partition, reason), with the first place and how many more.
  std::map<std::pair<std::string, std::string>, std::pair<std::string, std::size_t>> reasons;
  for (const auto& u : unusable) {
    // Group repeated knobs and index records by their kind of reason, not their exact text.
    std::string kind = u.reason.substr(0, u.reason.find(" of "));
    auto [it, fresh] = reasons.try_emplace({u.partition, kind}, u.where + ": " + u.reason, 0);
    ++it->second.second;
  }
  for (const auto& [key, first] : reasons) {
    out.push_back(fmt::format("  unusable: {} record{} of {}, e.g. {}", first.second, first.second == 1 ? "" : "s",
                              key.first, first.first));
  }
  std::vector<std::string> without;
  for (const auto& [key, n] : by_partition) {
    if (!key.starts_with("embedding_") && !key.starts_with("head_") && !has_sequential_knob(key)) without.push_back(key);
  }
  if (!without.empty()) {
    out.push_back(fmt::format(
        "  no sequential knob (overlap_start none) for {}: the artifact does not measure it, so Kareus plans from "
        "the overlapped knobs measured here, without the sequential baseline's options; kareus compare leaves "
        "out Megatron-LM and Perseus (and Nanobatching+Perseus where the tree lacks its knob) and says so",
        fmt::join(without, ", ")));
  }
  for (const auto& e : other_entries) out.push_back(fmt::format("  not read: {}", e));
  return out;
}

ArtifactTree read_artifact_tree(const fs::path& root) {
  if (!fs::is_directory(root)) {
    throw InputError({root.string(), 0, 0, ""},
                     "is not a directory; expected an artifact profiling tree (<partition>/eval_results.jsonl, "
                     "nonpartition/<MHz>/*_energy.csv)");
  }
  ArtifactTree tree;
  tree.root = root;
  for (const fs::path& entry : sorted_entries(root)) {
    if (!fs::is_directory(entry)) {
      tree.other_entries.push_back(entry.filename().string() + " (not a directory)");
    } else if (entry.filename() == kNonPartitionDir) {
      read_non_partition(entry, tree);
    } else {
      read_partition(entry, tree);
    }
  }
  if (tree.records.empty()) {
    throw InputError({root.string(), 0, 0, ""},
                     fmt::format("holds no usable record ({} unusable); expected <partition>/{} and {}/<MHz>/*_energy.csv",
                                 tree.unusable.size(), kRecordsFile, kNonPartitionDir));
  }
  return tree;
}

}  // namespace kareus::evaluate
