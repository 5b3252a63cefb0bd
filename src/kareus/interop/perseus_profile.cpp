#include "kareus/interop/perseus_profile.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace kareus::interop {
namespace {

constexpr const char* kColumns[] = {"stage", "instruction", "frequency", "time", "energy"};

}  // namespace

PerseusProfile::PerseusProfile(CsvTable csv) : csv_(std::move(csv)) {
  for (const char* name : kColumns) columns_.push_back(csv_.require_column(name));
  for (std::size_t c = 0; c < csv_.header().size(); ++c) {
    if (std::find(columns_.begin(), columns_.end(), c) == columns_.end()) extra_.push_back(c);
  }
}

long PerseusProfile::stage(std::size_t row) const { return csv_.integer(row, index(Column::kStage)); }
const std::string& PerseusProfile::instruction(std::size_t row) const {
  return csv_.text(row, index(Column::kInstruction));
}
double PerseusProfile::frequency_mhz(std::size_t row) const { return csv_.positive(row, index(Column::kFrequency)); }
double PerseusProfile::time_s(std::size_t row) const { return csv_.positive(row, index(Column::kTime)); }
double PerseusProfile::energy_j(std::size_t row) const { return csv_.positive(row, index(Column::kEnergy)); }

std::vector<std::string> PerseusProfile::extra_columns() const {
  std::vector<std::string> names;
  for (std::size_t c : extra_) names.push_back(csv_.header()[c]);
  return names;
}

std::vector<std::string> PerseusProfile::extra(std::size_t row) const {
  std::vector<std::string> cells;
  for (std::size_t c : extra_) cells.push_back(csv_.text(row, c));
  return cells;
}

void PerseusProfile::fail(std::size_t row, Column column, const std::string& message) const {
  csv_.fail(row, index(column), message);
}

PerseusProfile read_perseus_profile(const std::filesystem::path& path) { return PerseusProfile(read_csv(path)); }

std::string format_perseus_profile(std::span<const PerseusProfileRow> rows) {
  std::string csv = "stage,instruction,frequency,time,energy\n";
  for (const PerseusProfileRow& r : rows) {
    csv += fmt::format("{},{},{},{},{}\n", r.stage, csv_field(r.instruction), r.freq_mhz, r.time_s, r.energy_j);
  }
  return csv;
}

}  // namespace kareus::interop
