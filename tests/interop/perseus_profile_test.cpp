// Perseus's profile CSV: what we write reads back bit for bit (the stage sweep's and the composed
// table's rows alike), Perseus's own files read with every row, and a bad cell is named by file,
// line and column.
#include "kareus/interop/perseus_profile.hpp"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "kareus/core/error.hpp"

namespace kareus::interop {
namespace {

RC_GTEST_PROP(PerseusProfile, WhatWeWriteReadsBackBitForBit, ()) {
  const auto n = *rc::gen::inRange<std::size_t>(1, 20);
  std::vector<PerseusProfileRow> rows;
  for (std::size_t k = 0; k < n; ++k) {
    PerseusProfileRow r;
    r.stage = *rc::gen::inRange(0L, 64L);
    r.instruction = *rc::gen::element<std::string>("forward", "backward", "backward_input", "backward_weight");
    // Any positive double, not only short decimals: a composed table's times are sums.
    r.freq_mhz = *rc::gen::inRange(210, 2000) + *rc::gen::element(0.0, 0.5);
    r.time_s = std::ldexp(1.0 + *rc::gen::inRange(0, 1 << 30) / double(1 << 30), *rc::gen::inRange(-20, 3));
    r.energy_j = std::ldexp(1.0 + *rc::gen::inRange(0, 1 << 30) / double(1 << 30), *rc::gen::inRange(-10, 10));
    rows.push_back(r);
  }
  const PerseusProfile back(CsvTable::parse(format_perseus_profile(rows), "written"));
  RC_ASSERT(back.rows() == rows.size());
  RC_ASSERT(back.extra_columns().empty());
  for (std::size_t k = 0; k < rows.size(); ++k) {
    RC_ASSERT(back.stage(k) == rows[k].stage);
    RC_ASSERT(back.instruction(k) == rows[k].instruction);
    RC_ASSERT(back.frequency_mhz(k) == rows[k].freq_mhz);
    RC_ASSERT(back.time_s(k) == rows[k].time_s);
    RC_ASSERT(back.energy_j(k) == rows[k].energy_j);
  }
}

TEST(PerseusProfile, FurtherColumnsAreCarriedPerRow) {
  const PerseusProfile p(CsvTable::parse(
      "stage,instruction,frequency,time,energy,fwd_mlp\n0,forward,1410,0.5,100,act_0-none-8-1024\n", "t.csv"));
  ASSERT_EQ(p.extra_columns(), std::vector<std::string>{"fwd_mlp"});
  EXPECT_EQ(p.extra(0), std::vector<std::string>{"act_0-none-8-1024"});
}

TEST(PerseusProfile, ABadCellIsNamedByLineAndColumn) {
  const PerseusProfile p(CsvTable::parse("stage,instruction,frequency,time,energy\n0,forward,1410,0.5,100\n1,forward,1410,-2,100\n", "t.csv"));
  try {
    p.time_s(1);
    FAIL() << "a negative time was read";
  } catch (const InputError& e) {
    EXPECT_EQ(e.location().line, 3);
    EXPECT_EQ(e.location().field, "time");
  }
  EXPECT_THROW(PerseusProfile(CsvTable::parse("stage,instruction,frequency,time\n0,forward,1410,0.5\n", "t.csv")),
               InputError);
}

}  // namespace
}  // namespace kareus::interop
