#include "kareus/core/error.hpp"

#include <fmt/format.h>

namespace kareus {
namespace {

std::string format_location(const InputLocation& where) {
  std::string out = where.file;
  if (where.line > 0) out += fmt::format(":{}", where.line);
  if (where.line > 0 && where.column > 0) out += fmt::format(":{}", where.column);
  if (!where.field.empty()) out += (out.empty() ? "" : ": ") + fmt::format("field '{}'", where.field);
  return out;
}

}  // namespace

InputError::InputError(const InputLocation& where, const std::string& message)
    : Error(format_location(where).empty() ? message : format_location(where) + ": " + message),
      location_(where) {}

namespace detail {
void fail_check(const char* condition, const char* file, int line, const std::string& message) {
  throw InternalError(fmt::format("{} ({}:{}: check '{}' failed)", message, file, line, condition));
}
}  // namespace detail

}  // namespace kareus
