#include "kareus/cli/range_flags.hpp"

#include <fmt/format.h>

#include <cmath>
#include <stdexcept>

#include "kareus/core/error.hpp"

namespace kareus::cli {
namespace {

// How many steps past LO the range goes (its values are one more); huge when STEP is tiny.
double range_steps(const std::array<double, 3>& r) { return std::floor((r[1] - r[0] + 1e-9) / r[2]); }

double number(const std::string& part, const std::string& flag, const std::string& text, const char* form) {
  try {
    std::size_t used = 0;
    const double v = std::stod(part, &used);
    if (used == part.size() && std::isfinite(v)) return v;
  } catch (const std::logic_error&) {
  }
  throw InputError({"", 0, 0, flag}, fmt::format("expected {}, got '{}'", form, text));
}

}  // namespace

std::array<double, 3> parse_range(const std::string& text, const std::string& flag) {
  std::array<double, 3> v{};
  std::size_t start = 0;
  for (std::size_t i = 0; i < 3; ++i) {
    const std::size_t end = text.find(':', start);
    if ((i < 2) == (end == std::string::npos)) {
      throw InputError({"", 0, 0, flag}, fmt::format("expected LO:HI:STEP, got '{}'", text));
    }
    v[i] = number(text.substr(start, end == std::string::npos ? std::string::npos : end - start), flag, text,
                  "LO:HI:STEP");
    start = end + 1;
  }
  if (!(v[2] > 0) || v[0] > v[1]) {
    throw InputError({"", 0, 0, flag}, fmt::format("expected LO <= HI and STEP > 0, got '{}'", text));
  }
  if (!(range_steps(v) < static_cast<double>(kMaxRangeValues))) {
    throw InputError({"", 0, 0, flag}, fmt::format("'{}' gives more than {} values; take a larger step", text,
                                                   kMaxRangeValues));
  }
  return v;
}

std::vector<double> range_values(const std::array<double, 3>& range) {
  // By index, not by adding STEP up: no drift, and an end even where LO + STEP rounds to LO.
  const auto steps = static_cast<std::size_t>(range_steps(range));
  std::vector<double> values;
  values.reserve(steps + 1);
  for (std::size_t i = 0; i <= steps; ++i) values.push_back(range[0] + static_cast<double>(i) * range[2]);
  return values;
}

std::vector<double> parse_numbers(const std::string& text, const std::string& flag) {
  if (text.find(':') != std::string::npos) return range_values(parse_range(text, flag));
  std::vector<double> values;
  std::size_t start = 0;
  for (;;) {
    const std::size_t end = text.find(',', start);
    values.push_back(number(text.substr(start, end == std::string::npos ? std::string::npos : end - start), flag,
                            text, "LO:HI:STEP or A,B,C"));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return values;
}

}  // namespace kareus::cli
