#include "kareus/core/csv.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cmath>

#include "kareus/core/error.hpp"
#include "kareus/core/io.hpp"

namespace kareus {
namespace {

std::string_view trim(std::string_view s) {
  auto first = s.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  auto last = s.find_last_not_of(" \t");
  return s.substr(first, last - first + 1);
}

// Splits content into records of cells with positions. Quoted fields may span lines.
std::vector<std::vector<CsvCell>> tokenize(std::string_view content, const std::string& source) {
  std::vector<std::vector<CsvCell>> records;
  std::vector<CsvCell> record;
  CsvCell cell;
  long line = 1, column = 1;
  bool in_quotes = false, cell_started = false, was_quoted = false;
  auto start_cell = [&] {
    cell = CsvCell{{}, line, column};
    cell_started = true;
    was_quoted = false;
  };
  auto end_record = [&] {
    bool blank = record.empty() && cell.text.empty() && !was_quoted;
    if (!blank) {
      record.push_back(std::move(cell));
      records.push_back(std::move(record));
    }
    record.clear();
    cell_started = false;
  };
  for (std::size_t i = 0; i < content.size(); ++i) {
    char c = content[i];
    if (!cell_started) start_cell();
    if (in_quotes) {
      if (c == '"') {
        if (i + 1 < content.size() && content[i + 1] == '"') {
          cell.text += '"';
          ++i;
          ++column;
        } else {
          in_quotes = false;
        }
      } else {
        cell.text += c;
        if (c == '\n') {
          ++line;
          column = 0;
        }
      }
    } else if (c == '"') {
      if (!cell.text.empty()) {
        throw InputError({source, line, column, ""}, "unexpected '\"' inside an unquoted field");
      }
      in_quotes = true;
      was_quoted = true;
    } else if (c == ',') {
      record.push_back(std::move(cell));
      cell_started = false;
      if (i + 1 == content.size() || content[i + 1] == '\n' || content[i + 1] == '\r') {
        start_cell();
        cell.column = column + 1;
      }
    } else if (c == '\r') {
      // Tolerate CRLF line ends.
    } else if (c == '\n') {
      if (cell_started) end_record();
      ++line;
      column = 0;
    } else {
      cell.text += c;
    }
    ++column;
  }
  if (in_quotes) throw InputError({source, line, column, ""}, "unterminated quoted field");
  if (cell_started) end_record();
  return records;
}

}  // namespace

CsvTable CsvTable::parse(std::string_view content, std::string source) {
  CsvTable table;
  table.source_ = std::move(source);
  auto records = tokenize(content, table.source_);
  if (records.empty()) throw InputError({table.source_, 0, 0, ""}, "the file is empty");
  table.header_line_ = records.front().front().line;
  for (auto& cell : records.front()) {
    table.header_.emplace_back(trim(cell.text));
  }
  for (std::size_t r = 1; r < records.size(); ++r) {
    auto& record = records[r];
    if (record.size() != table.header_.size()) {
      throw InputError({table.source_, record.front().line, 0, ""},
                       fmt::format("expected {} fields as in the header, found {}",
                                   table.header_.size(), record.size()));
    }
    table.rows_.push_back(std::move(record));
  }
  if (table.rows_.empty()) {
    throw InputError({table.source_, table.header_line_, 0, ""}, "no data rows after the header");
  }
  return table;
}

std::optional<std::size_t> CsvTable::find_column(std::string_view name) const {
  for (std::size_t i = 0; i < header_.size(); ++i) {
    if (header_[i] == name) return i;
  }
  return std::nullopt;
}

std::size_t CsvTable::require_column(std::string_view name) const {
  if (auto index = find_column(name)) return *index;
  throw InputError({source_, header_line_, 0, std::string(name)},
                   fmt::format("missing required column (columns present: {})",
                               fmt::join(header_, ",")));
}

void CsvTable::fail(std::size_t row, std::size_t column, const std::string& message) const {
  const CsvCell& c = rows_[row][column];
  throw InputError({source_, c.line, c.column, header_[column]}, message);
}

const std::string& CsvTable::text(std::size_t row, std::size_t column) const {
  return rows_[row][column].text;
}

double CsvTable::number(std::size_t row, std::size_t column) const {
  const std::string& s = rows_[row][column].text;
  std::string_view trimmed = trim(s);
  double value = 0;
  auto [ptr, ec] = std::from_chars(trimmed.data(), trimmed.data() + trimmed.size(), value);
  if (trimmed.empty() || ec != std::errc() || ptr != trimmed.data() + trimmed.size()) {
    fail(row, column, fmt::format("'{}' is not a number", s));
  }
  if (!std::isfinite(value)) fail(row, column, fmt::format("'{}' is not finite", s));
  return value;
}

double CsvTable::positive(std::size_t row, std::size_t column) const {
  double value = number(row, column);
  if (value <= 0) fail(row, column, fmt::format("must be positive, got {}", text(row, column)));
  return value;
}

long CsvTable::integer(std::size_t row, std::size_t column) const {
  const std::string& s = rows_[row][column].text;
  std::string_view trimmed = trim(s);
  long value = 0;
  auto [ptr, ec] = std::from_chars(trimmed.data(), trimmed.data() + trimmed.size(), value);
  if (trimmed.empty() || ec != std::errc() || ptr != trimmed.data() + trimmed.size()) {
    fail(row, column, fmt::format("'{}' is not an integer", s));
  }
  return value;
}

std::string csv_field(std::string_view text) {
  if (text.find_first_of(",\"\r\n") == std::string_view::npos) return std::string(text);
  std::string out = "\"";
  for (char c : text) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

CsvTable read_csv(const std::filesystem::path& path) {
  return CsvTable::parse(read_text_file(path), path.string());
}

}  // namespace kareus
