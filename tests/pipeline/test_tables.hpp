// Option tables for pipeline tests: DVFS-shaped options (time ∝ 1/f toward a memory floor, power
// rising steeply with f), so random instances look like measured profiles.
#pragma once

#include <rapidcheck.h>

#include <cmath>
#include <random>

#include "kareus/pipeline/option_table.hpp"

namespace kareus::pipeline::testing {

inline std::vector<StageOption> dvfs_options(double base_time_s, int count, double jitter) {
  std::vector<StageOption> options;
  for (int k = 0; k < count; ++k) {
    double f = 1410.0 - 90.0 * k;  // MHz
    double time = base_time_s * (0.3 + 0.7 * 1410.0 / f) * (1 + jitter * ((k * 7) % 5 - 2) / 100.0);
    double power = 90 + 380 * std::pow(f / 1410.0, 2.4);
    options.push_back({f, time, power * time, nullptr});
  }
  return options;
}

inline rc::Gen<OptionTable> random_table(int stages, int min_options, int max_options) {
  return rc::gen::exec([=] {
    OptionTable table;
    table.options.resize(static_cast<std::size_t>(stages));
    for (int s = 0; s < stages; ++s) {
      for (schedule::InstructionType t : {schedule::InstructionType::kForward, schedule::InstructionType::kBackward}) {
        double base = (t == schedule::InstructionType::kForward ? 0.02 : 0.04) * *rc::gen::inRange(80, 121) / 100.0;
        int count = *rc::gen::inRange(min_options, max_options + 1);
        double jitter = *rc::gen::inRange(0, 3);
        table.at(s, t) = dvfs_options(base, count, jitter);
      }
    }
    return table;
  });
}

// Deterministic variant for example-based tests.
inline OptionTable seeded_table(unsigned seed, int stages, int options) {
  std::mt19937 rng(seed);
  OptionTable table;
  table.options.resize(static_cast<std::size_t>(stages));
  for (int s = 0; s < stages; ++s) {
    for (schedule::InstructionType t : {schedule::InstructionType::kForward, schedule::InstructionType::kBackward}) {
      double base = (t == schedule::InstructionType::kForward ? 0.02 : 0.04) *
                    std::uniform_real_distribution<double>(0.8, 1.2)(rng);
      table.at(s, t) = dvfs_options(base, options, std::uniform_int_distribution<int>(0, 2)(rng));
    }
  }
  return table;
}

}  // namespace kareus::pipeline::testing
