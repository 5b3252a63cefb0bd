// The artifact's eval_results.jsonl records: what we write reads back as the same knob and
// figures, records as the artifact writes them (its slot names, legacy op indices) read as it
// means them, and a record with no Kareus knob is unusable with its reason, not an error.
#include "kareus/interop/artifact_log.hpp"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "kareus/core/error.hpp"

namespace kareus::interop {
namespace {

ArtifactLogRecord record_of(const std::string& line) {
  auto parsed = parse_artifact_log_line(line, "eval_results.jsonl", 1);
  if (auto* bad = std::get_if<UnusableLogRecord>(&parsed)) ADD_FAILURE() << bad->reason;
  return std::get<ArtifactLogRecord>(parsed);
}

std::string reason_of(const std::string& line) {
  auto parsed = parse_artifact_log_line(line, "eval_results.jsonl", 1);
  if (std::holds_alternative<ArtifactLogRecord>(parsed)) ADD_FAILURE() << "usable: " << line;
  return std::get<UnusableLogRecord>(parsed).reason;
}

RC_GTEST_PROP(ArtifactLog, WhatWeWriteReadsBackAsTheSameRecord, ()) {
  const char* slots[] = {"none", "act_0", "norm_0", "linear_1", "attn_0", "rope_0"};
  ArtifactLogRecord r;
  r.freq_mhz = *rc::gen::element(900.0, 1410.0, 1005.5);
  r.sms = *rc::gen::inRange(0, 133);
  r.slot = *rc::gen::elementOf(std::vector<std::string>(std::begin(slots), std::end(slots)));
  r.time_s = *rc::gen::inRange(1, 1'000'000) * 1e-6;
  r.energy_j = *rc::gen::inRange(0, 1'000'000) * 1e-3;
  const std::string line = format_artifact_log_line(r);
  RC_ASSERT(is_artifact_log_line(line));
  const ArtifactLogRecord back = record_of(line);
  RC_ASSERT(back.freq_mhz == r.freq_mhz);
  RC_ASSERT(back.sms == r.sms);
  RC_ASSERT(back.slot == r.slot);
  RC_ASSERT(back.time_s == r.time_s);
  RC_ASSERT(back.energy_j == r.energy_j);
}

TEST(ArtifactLog, ReadsTheArtifactsNamesAndLegacyIndices) {
  const ArtifactLogRecord named = record_of(
      R"({"freq": 1410, "overlap_start": "activation_0", "overlap_end": "none", "sm": 12, "block": 1024, "time_s": 0.002, "energy_j": 0.5})");
  EXPECT_EQ(named.slot, "act_0");
  EXPECT_EQ(named.sms, 12);
  EXPECT_EQ(format_artifact_log_line(named).find("\"overlap_start\":\"activation_0\"") != std::string::npos, true);
  const ArtifactLogRecord sequential = record_of(
      R"({"freq": 1200, "overlap_start": -1, "overlap_end": -1, "sm": 0, "block": 1024, "time_s": 0.003, "energy_j": 0.7})");
  EXPECT_EQ(sequential.slot, kNotOverlapped);
}

TEST(ArtifactLog, ARecordWithoutAKnobIsUnusableWithItsReason) {
  EXPECT_NE(reason_of(R"({"freq": 1410, "overlap_start": 0, "overlap_end": 6, "sm": 8, "block": 1024, "time_s": 1, "energy_j": 1})")
                .find("legacy op-index window (0, 6)"),
            std::string::npos);
  EXPECT_NE(reason_of(R"({"freq": 1410, "overlap_start": "norm_0", "overlap_end": "linear_1", "sm": 8, "block": 1024, "time_s": 1, "energy_j": 1})")
                .find("overlap_end linear_1"),
            std::string::npos);
}

TEST(ArtifactLog, AMalformedLineNamesItsField) {
  auto field_of = [](const std::string& line) {
    try {
      parse_artifact_log_line(line, "f", 3);
    } catch (const InputError& e) {
      EXPECT_EQ(e.location().line, 3);
      return e.location().field;
    }
    ADD_FAILURE() << "accepted " << line;
    return std::string();
  };
  EXPECT_EQ(field_of(R"({"freq": 0, "overlap_start": "none", "overlap_end": "none", "sm": 0, "block": 1024, "time_s": 1, "energy_j": 1})"), "freq");
  EXPECT_EQ(field_of(R"({"freq": 1410, "overlap_start": "", "overlap_end": "none", "sm": 0, "block": 1024, "time_s": 1, "energy_j": 1})"), "overlap_start");
  EXPECT_EQ(field_of(R"({"freq": 1410, "overlap_start": "none", "overlap_end": "none", "sm": 1.5, "block": 1024, "time_s": 1, "energy_j": 1})"), "sm");
  EXPECT_EQ(field_of(R"({"freq": 1410, "overlap_start": "none", "overlap_end": "none", "sm": 0, "block": 1024, "energy_j": 1})"), "time_s");
  EXPECT_EQ(field_of("[1, 2]"), "");
  EXPECT_FALSE(is_artifact_log_line(R"({"format": "kareus-journal", "freq": 1, "overlap_start": "none"})"));
}

}  // namespace
}  // namespace kareus::interop
