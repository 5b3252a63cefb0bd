// Assertion helpers shared by the tests of every module.
#pragma once

#include <gtest/gtest.h>

#include <string>

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

}  // namespace kareus::testing
