// Reading one JSON object of a data file field by field, so every error names the file and the
// field at fault ("power_model.v_min_v: must be positive, got 0") and a misspelt key is an error,
// not a silently ignored default. Used by every bundled-data reader (GPU files, engine files).
//
// Thread-safety: a JsonFields is used by one thread; the functions are pure.
// Example:
//   const nlohmann::ordered_json doc = parse_json_file(path);
//   JsonFields f(doc, path.string(), "");
//   double w = f.positive("tdp_w");
//   f.reject_unknown();
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace kareus {

class JsonFields {
 public:
  using json = nlohmann::ordered_json;
  // `prefix` names the object inside its file ("" for the top level, "host" for a nested one).
  JsonFields(const json& object, std::string source, std::string prefix);

  [[noreturn]] void fail(const std::string& key, const std::string& message) const;

  const json* find(const std::string& key);  // nullptr when absent; marks the key used
  const json& require(const std::string& key);
  std::string text(const std::string& key);
  double number(const std::string& key);
  double positive(const std::string& key);
  double non_negative(const std::string& key);
  int count(const std::string& key);
  // A list of non-empty strings (it may be empty).
  std::vector<std::string> texts(const std::string& key);
  // Every key of the object must have been asked for.
  void reject_unknown() const;

  const std::string& source() const { return source_; }
  // The dotted name of `key` inside the file, for errors raised elsewhere.
  std::string field(const std::string& key) const;

 private:
  const json& object_;
  std::string source_;
  std::string prefix_;
  std::set<std::string> used_;
};

// Reads and parses a JSON file keeping its key order; InputError at the line and column of a
// syntax error.
nlohmann::ordered_json parse_json_file(const std::filesystem::path& path);

// The stems of `dir`/*.json, sorted: the names of a kind of bundled preset.
std::vector<std::string> preset_names(const std::filesystem::path& dir);

// `dir`/`name`.json, or InputError "unknown <what> 'name'; known <what>s: a, b".
std::filesystem::path preset_path(const std::filesystem::path& dir, std::string_view name, std::string_view what);

// A preset name or a path to a JSON file (anything ending in .json or containing a '/').
bool names_a_file(std::string_view name_or_path);

}  // namespace kareus
