// Assertion helpers shared by the tests of every module.
#pragma once

#include <gtest/gtest.h>
#include <tbb/global_control.h>
#include <tbb/task_arena.h>

#include <string>
#include <utility>

#include "kareus/core/error.hpp"

namespace kareus::testing {

// True when `text` contains `part`; names both otherwise.
inline ::testing::AssertionResult Contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "\"" << text << "\" does not contain \"" << part << "\"";
}

// Runs `action`, expects an InputError and returns its message (empty when none was thrown).
template <typename F>
std::string input_error_of(F&& action) {
  try {
    action();
  } catch (const InputError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an InputError";
  return {};
}

// Runs `action` with oneTBB limited to `threads` threads (more than the cores is allowed) and
// returns its result.
template <typename F>
auto on_threads(int threads, F&& action) {
  tbb::global_control limit(tbb::global_control::max_allowed_parallelism, static_cast<std::size_t>(threads));
  tbb::task_arena arena(threads);
  return arena.execute(std::forward<F>(action));
}

}  // namespace kareus::testing
