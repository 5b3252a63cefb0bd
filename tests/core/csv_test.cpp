// Tests of CsvTable::parse and read_csv: RFC 4180 parsing, cell positions, and error messages that
// name file:line:column and the field at fault.
#include "kareus/core/csv.hpp"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

#include "kareus/core/error.hpp"
#include "test_util.hpp"

namespace kareus {
namespace {

using testing::Contains;
using testing::input_error_of;

// ---------------------------------------------------------------------------------------------
// Parsing

TEST(CsvParse, ReadsHeaderAndRows) {
  auto table = CsvTable::parse("stage,time,energy\n0,1.5,20\n1,2.5,30\n", "t.csv");
  EXPECT_EQ(table.source(), "t.csv");
  EXPECT_EQ(table.header(), (std::vector<std::string>{"stage", "time", "energy"}));
  ASSERT_EQ(table.rows(), 2u);
  EXPECT_EQ(table.text(0, 0), "0");
  EXPECT_EQ(table.text(1, 2), "30");
  EXPECT_DOUBLE_EQ(table.number(0, 1), 1.5);
  EXPECT_DOUBLE_EQ(table.positive(1, 1), 2.5);
  EXPECT_EQ(table.integer(1, 0), 1);
  EXPECT_EQ(table.line_of(0), 2);
  EXPECT_EQ(table.line_of(1), 3);
}

TEST(CsvParse, HeaderNamesAreTrimmed) {
  auto table = CsvTable::parse(" a , b\t\n1,2\n", "t.csv");
  EXPECT_EQ(table.header(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(table.require_column("b"), 1u);
}

TEST(CsvParse, NumbersToleratesSurroundingSpaces) {
  auto table = CsvTable::parse("a,b\n  3.25 , 7 \n", "t.csv");
  EXPECT_DOUBLE_EQ(table.number(0, 0), 3.25);
  EXPECT_EQ(table.integer(0, 1), 7);
  EXPECT_EQ(table.text(0, 0), "  3.25 ");  // text is left as written
}

TEST(CsvParse, NoTrailingNewline) {
  auto table = CsvTable::parse("a,b\n1,2", "t.csv");
  ASSERT_EQ(table.rows(), 1u);
  EXPECT_EQ(table.text(0, 1), "2");
}

TEST(CsvParse, QuotedFieldsWithCommasAndEscapedQuotes) {
  auto table = CsvTable::parse(
      "name,knob,value\n"
      "\"a,b\",\"say \"\"hi\"\"\",3\n"
      "\"\",\"\"\"\",4\n",
      "q.csv");
  ASSERT_EQ(table.rows(), 2u);
  EXPECT_EQ(table.text(0, 0), "a,b");
  EXPECT_EQ(table.text(0, 1), "say \"hi\"");
  EXPECT_DOUBLE_EQ(table.number(0, 2), 3);
  EXPECT_EQ(table.text(1, 0), "");
  EXPECT_EQ(table.text(1, 1), "\"");
  EXPECT_DOUBLE_EQ(table.number(1, 2), 4);
  // Cells after quoted fields are located by their position in the source text.
  EXPECT_EQ(table.cell(0, 1).column, 7);   // "a,b", starts at 1 and takes 5 characters
  EXPECT_EQ(table.cell(0, 2).column, 20);  // after "say ""hi""", (12 characters) and a comma
}

TEST(CsvParse, QuotedFieldSpanningLines) {
  auto table = CsvTable::parse("a,b\n\"line1\nline2\",x\n5,6\n", "m.csv");
  ASSERT_EQ(table.rows(), 2u);
  EXPECT_EQ(table.text(0, 0), "line1\nline2");
  EXPECT_EQ(table.line_of(0), 2);
  EXPECT_EQ(table.cell(0, 1).line, 3);
  EXPECT_EQ(table.cell(0, 1).column, 8);
  EXPECT_EQ(table.line_of(1), 4);
}

TEST(CsvParse, CrlfLineEnds) {
  auto table = CsvTable::parse("a,b\r\n1,2\r\n\r\n3,4\r\n", "crlf.csv");
  EXPECT_EQ(table.header(), (std::vector<std::string>{"a", "b"}));
  ASSERT_EQ(table.rows(), 2u);
  EXPECT_EQ(table.text(0, 1), "2");  // no stray '\r'
  EXPECT_EQ(table.text(1, 1), "4");
  EXPECT_EQ(table.line_of(1), 4);
  EXPECT_EQ(table.cell(1, 1).column, 3);
}

TEST(CsvParse, BlankLinesAreSkippedButCounted) {
  auto table = CsvTable::parse("\n\na,b\n\n1,2\n\n\n3,4\n\n", "blank.csv");
  ASSERT_EQ(table.rows(), 2u);
  EXPECT_EQ(table.line_of(0), 5);
  EXPECT_EQ(table.line_of(1), 8);
  // An error on the first row after the header names the header's real line.
  std::string message = input_error_of([&] { (void)table.require_column("zzz"); });
  EXPECT_TRUE(Contains(message, "blank.csv:3"));
}

TEST(CsvParse, EmptyFieldsKeepTheirPositions) {
  auto table = CsvTable::parse("a,b,c\n,,\n1,,3\nx,y,\n", "e.csv");
  ASSERT_EQ(table.rows(), 3u);
  for (std::size_t c = 0; c < 3; ++c) {
    EXPECT_EQ(table.text(0, c), "");
    EXPECT_EQ(table.cell(0, c).line, 2);
    EXPECT_EQ(table.cell(0, c).column, static_cast<long>(c + 1));
  }
  EXPECT_EQ(table.text(1, 1), "");
  EXPECT_EQ(table.cell(1, 1).column, 3);
  EXPECT_EQ(table.cell(1, 2).column, 4);
  EXPECT_EQ(table.text(2, 2), "");
  EXPECT_EQ(table.cell(2, 2).line, 4);
  EXPECT_EQ(table.cell(2, 2).column, 5);
}

TEST(CsvParse, CellLinesAndColumns) {
  auto table = CsvTable::parse(
      "stage,instruction,frequency,time\n"  // line 1
      "0,forward,1410,0.5\n"                // line 2
      "0,backward,1200,1.0\n"               // line 3
      "1,forward,990,0.25\n",               // line 4
      "pos.csv");
  ASSERT_EQ(table.rows(), 3u);
  // The 3rd column of line 4: "990" starts after "1,forward," (10 characters).
  const CsvCell& c = table.cell(2, 2);
  EXPECT_EQ(c.text, "990");
  EXPECT_EQ(c.line, 4);
  EXPECT_EQ(c.column, 11);
  EXPECT_EQ(table.cell(2, 3).column, 15);
  EXPECT_EQ(table.cell(1, 1).column, 3);
  EXPECT_EQ(table.cell(1, 1).line, 3);
  EXPECT_EQ(table.cell(0, 0).column, 1);
}

TEST(CsvParse, FindColumn) {
  auto table = CsvTable::parse("a,b\n1,2\n", "t.csv");
  EXPECT_EQ(table.find_column("a"), 0u);
  EXPECT_EQ(table.find_column("b"), 1u);
  EXPECT_FALSE(table.find_column("c").has_value());
}

// ---------------------------------------------------------------------------------------------
// Errors

TEST(CsvErrors, NonNumericCell) {
  auto table = CsvTable::parse("stage,time,energy\n0,1,2\n1,fast,3\n", "prof.csv");
  std::string message = input_error_of([&] { (void)table.number(1, 1); });
  EXPECT_TRUE(Contains(message, "prof.csv:3:3"));
  EXPECT_TRUE(Contains(message, "field 'time'"));
  EXPECT_TRUE(Contains(message, "'fast' is not a number"));
  // Trailing garbage after a number is not a number either.
  auto partial = CsvTable::parse("time\n1.5s\n", "p.csv");
  EXPECT_TRUE(Contains(input_error_of([&] { (void)partial.number(0, 0); }), "p.csv:2:1"));
  // Nor is an empty cell.
  auto empty = CsvTable::parse("a,time\n1,\n", "e.csv");
  EXPECT_TRUE(Contains(input_error_of([&] { (void)empty.number(0, 1); }), "e.csv:2:3: field 'time'"));
}

TEST(CsvErrors, NonIntegerCell) {
  auto table = CsvTable::parse("stage\n1.5\n", "i.csv");
  std::string message = input_error_of([&] { (void)table.integer(0, 0); });
  EXPECT_TRUE(Contains(message, "i.csv:2:1"));
  EXPECT_TRUE(Contains(message, "field 'stage'"));
  EXPECT_TRUE(Contains(message, "not an integer"));
}

TEST(CsvErrors, NanAndInfinityAreNotFinite) {
  auto table = CsvTable::parse("a,energy\n1,nan\n2,inf\n3,-inf\n4,NaN\n5,1e999\n", "nan.csv");
  for (std::size_t row = 0; row < 4; ++row) {
    std::string message = input_error_of([&] { (void)table.number(row, 1); });
    EXPECT_TRUE(Contains(message, "nan.csv:" + std::to_string(row + 2) + ":3"));
    EXPECT_TRUE(Contains(message, "field 'energy'"));
    EXPECT_TRUE(Contains(message, "not finite"));
    EXPECT_THROW((void)table.positive(row, 1), InputError);
  }
  // Out of range for a double: rejected too.
  std::string message = input_error_of([&] { (void)table.number(4, 1); });
  EXPECT_TRUE(Contains(message, "nan.csv:6:3: field 'energy'"));
}

TEST(CsvErrors, NonPositive) {
  auto table = CsvTable::parse("stage,time\n0,0\n1,-2.5\n2,1e-300\n", "pos.csv");
  std::string zero = input_error_of([&] { (void)table.positive(0, 1); });
  EXPECT_TRUE(Contains(zero, "pos.csv:2:3"));
  EXPECT_TRUE(Contains(zero, "field 'time'"));
  EXPECT_TRUE(Contains(zero, "must be positive"));
  std::string negative = input_error_of([&] { (void)table.positive(1, 1); });
  EXPECT_TRUE(Contains(negative, "pos.csv:3:3"));
  EXPECT_TRUE(Contains(negative, "-2.5"));
  EXPECT_DOUBLE_EQ(table.number(1, 1), -2.5);  // number() itself accepts negatives
  EXPECT_GT(table.positive(2, 1), 0.0);
}

TEST(CsvErrors, ErrorCarriesStructuredLocation) {
  auto table = CsvTable::parse("x,y,z\n1,2,3\n4,5,oops\n", "loc.csv");
  try {
    (void)table.number(1, 2);
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(e.location().file, "loc.csv");
    EXPECT_EQ(e.location().line, 3);
    EXPECT_EQ(e.location().column, 5);
    EXPECT_EQ(e.location().field, "z");
  }
}

TEST(CsvErrors, FailNamesCell) {
  auto table = CsvTable::parse("a,b\n1,2\n", "f.csv");
  std::string message = input_error_of([&] { table.fail(0, 1, "custom problem"); });
  EXPECT_EQ(message, "f.csv:2:3: field 'b': custom problem");
}

TEST(CsvErrors, RaggedRow) {
  std::string longer = input_error_of([] { (void)CsvTable::parse("a,b\n1,2\n1,2,3\n", "r.csv"); });
  EXPECT_TRUE(Contains(longer, "r.csv:3"));
  EXPECT_TRUE(Contains(longer, "expected 2 fields"));
  EXPECT_TRUE(Contains(longer, "found 3"));
  std::string shorter =
      input_error_of([] { (void)CsvTable::parse("a,b,c\n1,2,3\n\n\n4,5\n", "r.csv"); });
  EXPECT_TRUE(Contains(shorter, "r.csv:5"));
  EXPECT_TRUE(Contains(shorter, "found 2"));
}

TEST(CsvErrors, EmptyContent) {
  for (const char* content : {"", "\n", "\n\r\n\n"}) {
    std::string message = input_error_of([&] { (void)CsvTable::parse(content, "empty.csv"); });
    EXPECT_TRUE(Contains(message, "empty.csv"));
    EXPECT_TRUE(Contains(message, "empty"));
  }
}

TEST(CsvErrors, HeaderOnly) {
  std::string message = input_error_of([] { (void)CsvTable::parse("a,b,c\n", "h.csv"); });
  EXPECT_TRUE(Contains(message, "h.csv:1"));
  EXPECT_TRUE(Contains(message, "no data rows"));
  std::string later = input_error_of([] { (void)CsvTable::parse("\n\na,b,c\n\n", "h.csv"); });
  EXPECT_TRUE(Contains(later, "h.csv:3"));
}

TEST(CsvErrors, UnterminatedQuote) {
  std::string message =
      input_error_of([] { (void)CsvTable::parse("a,b\n1,\"never closed\n", "u.csv"); });
  // file:line:column, then the problem. (The position is where the input ended, not where the
  // quote opened, so only its shape is pinned here.)
  EXPECT_TRUE(std::regex_search(message, std::regex("^u\\.csv:[0-9]+:[0-9]+: unterminated")))
      << message;
  // An escaped quote at the end does not close the field.
  EXPECT_THROW((void)CsvTable::parse("a\n\"x\"\"", "u.csv"), InputError);
}

TEST(CsvErrors, QuoteInsideUnquotedField) {
  std::string message = input_error_of([] { (void)CsvTable::parse("a,b\n1,ab\"c\n", "q.csv"); });
  EXPECT_TRUE(Contains(message, "q.csv:2:5"));
}

TEST(CsvErrors, MissingColumnListsPresentColumns) {
  auto table = CsvTable::parse("stage,instruction,time\n0,forward,1\n", "cols.csv");
  std::string message = input_error_of([&] { (void)table.require_column("energy"); });
  EXPECT_TRUE(Contains(message, "cols.csv:1"));
  EXPECT_TRUE(Contains(message, "'energy'"));
  EXPECT_TRUE(Contains(message, "stage,instruction,time"));
}

// ---------------------------------------------------------------------------------------------
// read_csv

class ReadCsv : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("kareus_csv_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(ReadCsv, ReadsFileAndNamesItInErrors) {
  auto path = dir_ / "profile.csv";
  {
    std::ofstream out(path, std::ios::binary);
    out << "stage,time\n0,1\n1,abc\n";
  }
  auto table = read_csv(path);
  EXPECT_EQ(table.source(), path.string());
  ASSERT_EQ(table.rows(), 2u);
  std::string message = input_error_of([&] { (void)table.number(1, 1); });
  EXPECT_TRUE(Contains(message, path.string() + ":3:3"));
  EXPECT_TRUE(Contains(message, "field 'time'"));
}

TEST_F(ReadCsv, NonexistentPath) {
  auto path = dir_ / "does_not_exist.csv";
  std::string message = input_error_of([&] { (void)read_csv(path); });
  EXPECT_TRUE(Contains(message, path.string()));
}

TEST_F(ReadCsv, EmptyFile) {
  auto path = dir_ / "empty.csv";
  { std::ofstream out(path); }
  std::string message = input_error_of([&] { (void)read_csv(path); });
  EXPECT_TRUE(Contains(message, path.string()));
  EXPECT_TRUE(Contains(message, "empty"));
}

// ---------------------------------------------------------------------------------------------
// Writing

TEST(CsvField, QuotesOnlyWhatNeedsIt) {
  EXPECT_EQ(csv_field("Kareus"), "Kareus");
  EXPECT_EQ(csv_field("llama tp8 (layers 15,13)"), "\"llama tp8 (layers 15,13)\"");
  EXPECT_EQ(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
}

// Whatever the fields hold, a row written with csv_field parses back to the same fields.
RC_GTEST_PROP(CsvField, RowsRoundTripThroughTheReader, ()) {
  const auto fields = *rc::gen::nonEmpty(rc::gen::container<std::vector<std::string>>(
      rc::gen::container<std::string>(rc::gen::element('a', 'b', ',', '"', ' ', '\n', '1'))));
  // A row whose only field is empty is a blank line, which the reader skips; pad with a column.
  std::string header, row;
  for (std::size_t i = 0; i < fields.size(); ++i) {
    header += (i ? "," : "") + std::string("c") + std::to_string(i);
    row += (i ? "," : "") + csv_field(fields[i]);
  }
  CsvTable table = CsvTable::parse(header + ",pad\n" + row + ",x\n", "w.csv");
  RC_ASSERT(table.rows() == 1u);
  for (std::size_t i = 0; i < fields.size(); ++i) RC_ASSERT(table.text(0, i) == fields[i]);
}

}  // namespace
}  // namespace kareus
