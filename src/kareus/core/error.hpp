// Error types of Kareus: one per domain, each carrying the place at fault.
//
// InputError: the user's input is wrong (a file, a line, a field, a flag). The CLI prints it as one
// line on stderr and exits with code 2.
// DeviceError: a GPU or its driver refused or failed (EnvironmentError: the machine, e.g. a full
// disk).
// InternalError: a broken invariant inside Kareus; a bug, never the user's fault.
#pragma once

#include <stdexcept>
#include <string>

namespace kareus {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Where bad input was found. Empty parts are left out of the message.
struct InputLocation {
  std::string file;
  long line = 0;    // 1-based; 0 = unknown
  long column = 0;  // 1-based; 0 = unknown
  std::string field;
};

class InputError : public Error {
 public:
  explicit InputError(const std::string& message) : Error(message) {}
  InputError(const InputLocation& where, const std::string& message);

  const InputLocation& location() const { return location_; }

 private:
  InputLocation location_;
};

class DeviceError : public Error {
 public:
  using Error::Error;
};

// The machine failed under Kareus in a way that no other knob or retry of the work fixes: a full
// disk, a write or fsync refused, a GPU that is lost. A DeviceError, so that the CLI exits with
// code 3 (device or environment), not as for a bug; evaluators and searches let it through, so
// that it ends the run instead of failing one knob after another.
class EnvironmentError : public DeviceError {
 public:
  using DeviceError::DeviceError;
};

class InternalError : public Error {
 public:
  explicit InternalError(const std::string& message) : Error("internal error: " + message) {}
};

// Throws InternalError naming the failed condition; for invariants that must hold in release too.
#define KAREUS_CHECK(cond, message)                                                            \
  do {                                                                                         \
    if (!(cond)) ::kareus::detail::fail_check(#cond, __FILE__, __LINE__, (message));           \
  } while (false)

namespace detail {
[[noreturn]] void fail_check(const char* condition, const char* file, int line,
                             const std::string& message);
}  // namespace detail

}  // namespace kareus
