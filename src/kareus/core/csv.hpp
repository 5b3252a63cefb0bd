// A small CSV reader that knows where every cell came from, so that every error it or its caller
// raises names file:line:column.
//
// Thread-safety: a CsvTable is an immutable value once read.
// Example:
//   auto table = kareus::read_csv("profile.csv");
//   int time_col = table.require_column("time");
//   double t = table.positive(row, time_col);
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kareus {

struct CsvCell {
  std::string text;
  long line = 0;
  long column = 0;
};

class CsvTable {
 public:
  // Parses `content` (RFC 4180: quoted fields, "" escapes; blank lines skipped). `source` names the
  // input in error messages. Throws InputError on an empty input, ragged rows or bad quoting.
  static CsvTable parse(std::string_view content, std::string source);

  const std::string& source() const { return source_; }
  const std::vector<std::string>& header() const { return header_; }
  std::size_t rows() const { return rows_.size(); }
  const CsvCell& cell(std::size_t row, std::size_t column) const { return rows_[row][column]; }
  long line_of(std::size_t row) const { return rows_[row].front().line; }

  std::optional<std::size_t> find_column(std::string_view name) const;
  // Throws InputError naming the missing column and the columns present.
  std::size_t require_column(std::string_view name) const;

  // Typed accessors; each throws InputError at the cell's file:line:column naming the column.
  const std::string& text(std::size_t row, std::size_t column) const;
  double number(std::size_t row, std::size_t column) const;    // finite
  double positive(std::size_t row, std::size_t column) const;  // finite and > 0
  long integer(std::size_t row, std::size_t column) const;

  [[noreturn]] void fail(std::size_t row, std::size_t column, const std::string& message) const;

 private:
  std::string source_;
  std::vector<std::string> header_;
  long header_line_ = 1;
  std::vector<std::vector<CsvCell>> rows_;
};

// One field as RFC 4180 writes it, for every CSV we write: quoted, with quotes doubled, when it
// holds a comma, a quote or a line break (a job name like "llama tp8 (layers 15,13)"); as it is
// otherwise.
std::string csv_field(std::string_view text);

// Reads and parses a CSV file; a missing or unreadable file is an InputError naming the path.
CsvTable read_csv(const std::filesystem::path& path);

}  // namespace kareus
