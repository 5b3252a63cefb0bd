// The median of a sample, as every check and fit reports its errors.
#pragma once

#include <algorithm>
#include <vector>

namespace kareus {

// The middle value, or the mean of the two middle ones; 0 for no values.
inline double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

}  // namespace kareus
