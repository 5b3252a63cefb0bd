#include "kareus/evaluate/table.hpp"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "kareus/core/csv.hpp"
#include "kareus/core/error.hpp"
#include "kareus/core/io.hpp"
#include "kareus/evaluate/artifact_tree.hpp"

namespace kareus::evaluate {

TableEvaluator::TableEvaluator(hardware::GpuSpec gpu) : gpu_(std::move(gpu)) {}

std::string TableEvaluator::name() const {
  if (!name_.empty()) return name_;
  return files_.empty() ? "table" : fmt::format("table:{}", fmt::join(files_, ","));
}

std::vector<std::string> TableEvaluator::partition_keys() const {
  std::set<std::string> keys;
  for (const auto& [key, sum] : table_) keys.insert(std::get<0>(key));
  return {keys.begin(), keys.end()};
}

std::map<std::string, std::vector<workload::Knob>> TableEvaluator::knobs_by_partition() const {
  std::map<std::string, std::vector<workload::Knob>> out;
  for (const auto& [key, sum] : table_) {
    out[std::get<0>(key)].push_back({std::get<1>(key), std::get<2>(key), std::get<3>(key)});
  }
  return out;
}

std::optional<std::vector<workload::Knob>> TableEvaluator::known_knobs(const workload::Partition& partition) const {
  std::vector<workload::Knob> out;
  for (auto it = table_.lower_bound({partition.key, std::numeric_limits<double>::lowest(), std::numeric_limits<int>::min(), ""});
       it != table_.end() && std::get<0>(it->first) == partition.key; ++it) {
    out.push_back({std::get<1>(it->first), std::get<2>(it->first), std::get<3>(it->first)});
  }
  return out;
}

void TableEvaluator::add_sample(const std::string& partition_key, const workload::Knob& knob,
                                double time_s, double energy_j) {
  if (!(std::isfinite(time_s) && time_s >= 0 && std::isfinite(energy_j) && energy_j >= 0)) {
    throw InputError(
        fmt::format("sample of {} at {} MHz: time {} s and energy {} J must be finite and >= 0",
                    partition_key, knob.freq_mhz, time_s, energy_j));
  }
  Sum& sum = table_[{partition_key, knob.freq_mhz, knob.sms, knob.slot}];
  sum.time_s += time_s;
  sum.energy_j += energy_j;
  ++sum.count;
  ++samples_;
}

void TableEvaluator::add_file(const std::filesystem::path& path,
                              const std::optional<std::string>& partition_key) {
  if (path.extension() == ".jsonl") {
    add_jsonl(path, partition_key);
  } else {
    add_csv(path, partition_key);
  }
  files_.push_back(path.string());
}

void TableEvaluator::add_csv(const std::filesystem::path& path,
                             const std::optional<std::string>& partition_key) {
  CsvTable csv = read_csv(path);
  const auto partition_col = csv.find_column("partition");
  if (!partition_col && !partition_key) {
    throw InputError({path.string(), 1, 0, "partition"},
                     "the file has no partition column; name the partition it measures");
  }
  const std::size_t freq = csv.require_column("freq_mhz"), sms = csv.require_column("sms"),
                    slot = csv.require_column("slot"), time = csv.require_column("time_s"),
                    energy = csv.require_column("energy_j");
  for (std::size_t row = 0; row < csv.rows(); ++row) {
    const double t = csv.number(row, time), e = csv.number(row, energy);
    if (t < 0) csv.fail(row, time, "must be >= 0");
    if (e < 0) csv.fail(row, energy, "must be >= 0");
    const long s = csv.integer(row, sms);
    if (s < 0) csv.fail(row, sms, "must be >= 0");
    add_sample(partition_col ? csv.text(row, *partition_col) : *partition_key,
               {csv.positive(row, freq), static_cast<int>(s), csv.text(row, slot)}, t, e);
  }
}

void TableEvaluator::add_jsonl(const std::filesystem::path& path,
                               const std::optional<std::string>& partition_key) {
  std::istringstream lines(read_text_file(path));
  std::string line;
  long number = 0;
  const std::string source = path.string();
  while (std::getline(lines, line)) {
    ++number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json doc;
    try {
      doc = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {  // parse_error, or out_of_range for a number overflow
      throw InputError({source, number, 0, ""}, fmt::format("not a JSON object: {}", e.what()));
    }
    if (!doc.is_object()) throw InputError({source, number, 0, ""}, "not a JSON object");
    std::string key;
    if (auto it = doc.find("partition"); it != doc.end() && it->is_string()) {
      key = it->get<std::string>();
    } else if (partition_key) {
      key = *partition_key;
    } else {
      throw InputError({source, number, 0, "partition"},
                       "the line names no partition; name the partition it measures");
    }
    auto parsed = parse_artifact_record(line, source, number, key);
    if (auto* record = std::get_if<ArtifactRecord>(&parsed)) {
      add_sample(key, record->knob, record->time_s, record->energy_j);
    } else {
      ++skipped_;
    }
  }
}

EvalResult TableEvaluator::evaluate(const workload::Partition& partition,
                                    const workload::Knob& knob) const {
  auto it = table_.find({partition.key, knob.freq_mhz, knob.sms, knob.slot});
  if (it == table_.end() && partition.slots.empty()) {
    // Never overlapped: one knob per clock, whatever SM count its collective was measured with
    // (the Kareus artifact's non-partition profiles say none).
    for (auto c = table_.lower_bound({partition.key, knob.freq_mhz, std::numeric_limits<int>::min(), ""});
         c != table_.end() && std::get<0>(c->first) == partition.key && std::get<1>(c->first) == knob.freq_mhz; ++c) {
      if (std::get<3>(c->first) == workload::kSequentialSlot) {
        it = c;
        break;
      }
    }
  }
  if (it == table_.end()) {
    std::size_t of_partition = 0;
    for (const auto& [key, sum] : table_) of_partition += std::get<0>(key) == partition.key ? 1 : 0;
    return EvalResult::failure(
        EvalStatus::kNotMeasured,
        fmt::format("{}: knob ({} MHz, {} SMs, slot {}) was not measured in {} ({} knobs of this "
                    "partition are)",
                    partition.key, knob.freq_mhz, knob.sms, knob.slot, name(), of_partition));
  }
  const Sum& s = it->second;
  return EvalResult::success(s.time_s / s.count, s.energy_j / s.count);
}

}  // namespace kareus::evaluate
