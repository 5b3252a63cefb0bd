// The range flags of `kareus search` and `kareus profile` (--clocks, --sms): LO:HI:STEP, and for
// profile also a list A,B,C; parsed and expanded in one place, bounded, so that a step too small
// to get from LO to HI in kMaxRangeValues values (1:2:1e-300, where LO + STEP == LO) is bad input
// instead of a loop that never ends.
//
// Example:
//   for (double s : range_values(parse_range(flags.sms, "--sms"))) levels.push_back(std::lround(s));
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <vector>

namespace kareus::cli {

inline constexpr std::size_t kMaxRangeValues = 100000;

// "LO:HI:STEP" → {LO, HI, STEP}. InputError naming `flag` unless three finite numbers with
// LO <= HI and STEP > 0 that give at most kMaxRangeValues values.
std::array<double, 3> parse_range(const std::string& text, const std::string& flag);
// LO, LO + STEP, ... up to HI (and HI itself when within 1e-9 of a step) of a range parse_range
// accepted.
std::vector<double> range_values(const std::array<double, 3>& range);
// A range's values, or those of a comma-separated list of finite numbers A,B,C.
std::vector<double> parse_numbers(const std::string& text, const std::string& flag);

}  // namespace kareus::cli
