// Perseus's stage-profile CSV (SymbioticLab/Perseus; data/perseus-sosp24/stage_profile/ holds its
// A100 profiles): one row per measured stage, instruction and SM clock, with the columns
// `stage,instruction,frequency,time,energy` (frequency in MHz; time in seconds and energy in joules
// of one GPU). Kareus reads it as the solver's option table and as the power fit's curves, and
// writes it from a stage sweep and from a composed table; any further column is carried per row
// (a composed table's knob fields).
//
// Thread-safety: plain values.
// Example:
//   const PerseusProfile p = read_perseus_profile("gpt3.csv");
//   for (std::size_t r = 0; r < p.rows(); ++r) use(p.stage(r), p.instruction(r), p.frequency_mhz(r));
//   write_file_atomic("out.csv", format_perseus_profile(rows));
#pragma once

#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "kareus/core/csv.hpp"

namespace kareus::interop {

class PerseusProfile {
 public:
  enum class Column { kStage, kInstruction, kFrequency, kTime, kEnergy };

  // InputError naming the file for a missing path or an empty file, and the column when one of the
  // five is missing.
  explicit PerseusProfile(CsvTable csv);

  std::size_t rows() const { return csv_.rows(); }
  // Each InputError names the file, line and column of the cell.
  long stage(std::size_t row) const;  // an integer; its range is the reader's to check
  const std::string& instruction(std::size_t row) const;
  double frequency_mhz(std::size_t row) const;  // finite and > 0, as are time and energy
  double time_s(std::size_t row) const;
  double energy_j(std::size_t row) const;
  // The further columns' names, and their text in `row`.
  std::vector<std::string> extra_columns() const;
  std::vector<std::string> extra(std::size_t row) const;

  long line_of(std::size_t row) const { return csv_.line_of(row); }
  const std::string& source() const { return csv_.source(); }
  [[noreturn]] void fail(std::size_t row, Column column, const std::string& message) const;

 private:
  std::size_t index(Column column) const { return columns_[static_cast<std::size_t>(column)]; }

  CsvTable csv_;
  std::vector<std::size_t> columns_;  // by Column
  std::vector<std::size_t> extra_;
};

PerseusProfile read_perseus_profile(const std::filesystem::path& path);

struct PerseusProfileRow {
  long stage = 0;
  std::string instruction;
  double freq_mhz = 0, time_s = 0, energy_j = 0;
};

// The header and one line per row, each number in the fewest digits that read back to it.
std::string format_perseus_profile(std::span<const PerseusProfileRow> rows);

}  // namespace kareus::interop
