#include "kareus/core/json_fields.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "kareus/core/error.hpp"
#include "kareus/core/io.hpp"

namespace kareus {
namespace {

// 1-based line and column of a byte offset, for JSON syntax errors.
std::pair<long, long> line_column(const std::string& text, std::size_t byte) {
  long line = 1, column = 1;
  for (std::size_t i = 0; i + 1 < byte && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return {line, column};
}

}  // namespace

JsonFields::JsonFields(const json& object, std::string source, std::string prefix)
    : object_(object), source_(std::move(source)), prefix_(std::move(prefix)) {
  if (!object_.is_object()) fail("", "expected a JSON object");
}

std::string JsonFields::field(const std::string& key) const {
  return prefix_.empty() ? key : (key.empty() ? prefix_ : prefix_ + "." + key);
}

void JsonFields::fail(const std::string& key, const std::string& message) const {
  throw InputError({source_, 0, 0, field(key)}, message);
}

const JsonFields::json* JsonFields::find(const std::string& key) {
  used_.insert(key);
  auto it = object_.find(key);
  return it == object_.end() ? nullptr : &*it;
}

const JsonFields::json& JsonFields::require(const std::string& key) {
  const json* value = find(key);
  if (!value) fail(key, "missing");
  return *value;
}

std::string JsonFields::text(const std::string& key) {
  const json& v = require(key);
  if (!v.is_string() || v.get<std::string>().empty()) fail(key, "expected a non-empty string");
  return v.get<std::string>();
}

double JsonFields::number(const std::string& key) {
  const json& v = require(key);
  if (!v.is_number() || !std::isfinite(v.get<double>())) fail(key, "expected a finite number");
  return v.get<double>();
}

double JsonFields::positive(const std::string& key) {
  double x = number(key);
  if (!(x > 0)) fail(key, fmt::format("must be positive, got {}", x));
  return x;
}

double JsonFields::non_negative(const std::string& key) {
  double x = number(key);
  if (!(x >= 0)) fail(key, fmt::format("must be >= 0, got {}", x));
  return x;
}

int JsonFields::count(const std::string& key) {
  const json& v = require(key);
  if (!v.is_number_integer() || v.get<long long>() < 1 || v.get<long long>() > 1'000'000) {
    fail(key, "expected a positive integer");
  }
  return static_cast<int>(v.get<long long>());
}

std::vector<std::string> JsonFields::texts(const std::string& key) {
  const json& v = require(key);
  if (!v.is_array()) fail(key, "expected a list of strings");
  std::vector<std::string> out;
  for (const json& item : v) {
    if (!item.is_string() || item.get<std::string>().empty()) fail(key, "expected a list of non-empty strings");
    out.push_back(item.get<std::string>());
  }
  return out;
}

void JsonFields::reject_unknown() const {
  for (const auto& [key, value] : object_.items()) {
    if (!used_.contains(key)) fail(key, "unknown field");
  }
}

nlohmann::ordered_json parse_json_file(const std::filesystem::path& path) {
  const std::string text = read_text_file(path);
  try {
    return nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::ordered_json::parse_error& e) {
    auto [line, column] = line_column(text, e.byte);
    std::string what = e.what();
    // nlohmann prefixes "[json.exception.parse_error.101] parse error at line 3, column 5: "
    auto colon = what.find(": ");
    throw InputError({path.string(), line, column, ""},
                     "invalid JSON: " + (colon == std::string::npos ? what : what.substr(colon + 2)));
  } catch (const nlohmann::ordered_json::exception& e) {  // out_of_range: a number overflows a double
    throw InputError({path.string(), 0, 0, ""}, fmt::format("invalid JSON: {}", e.what()));
  }
}

std::vector<std::string> preset_names(const std::filesystem::path& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (entry.is_regular_file() && entry.path().extension() == ".json") names.push_back(entry.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::filesystem::path preset_path(const std::filesystem::path& dir, std::string_view name, std::string_view what) {
  const auto names = preset_names(dir);
  if (std::find(names.begin(), names.end(), name) == names.end()) {
    throw InputError(fmt::format("unknown {} '{}'; known {}s: {}", what, name, what,
                                 names.empty() ? fmt::format("none (no presets in {})", dir.string())
                                               : fmt::format("{}", fmt::join(names, ", "))));
  }
  return dir / (std::string(name) + ".json");
}

bool names_a_file(std::string_view name_or_path) {
  return name_or_path.find('/') != std::string_view::npos ||
         (name_or_path.size() > 5 && name_or_path.ends_with(".json"));
}

}  // namespace kareus
