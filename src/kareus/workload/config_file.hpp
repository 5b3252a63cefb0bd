// Reads a job description file, JSON or YAML, into one JSON document so that both formats share a
// single set of keys and checks.
//
// Thread-safety: pure function.
// Example:
//   nlohmann::json doc = read_config_document("job.yaml");   // {"model": "qwen3-1.7b", "tp": 4,
//   ...}
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>

namespace kareus::workload {

// A `.json` file is parsed as JSON, anything else as YAML. YAML scalars become integers, floats or
// booleans (true/false) when they read as one, strings otherwise; sequences become arrays, maps
// objects. The document must be a mapping. Throws InputError naming the file (and line, where the
// parser knows it) on a missing file or a syntax error.
nlohmann::json read_config_document(const std::filesystem::path& path);

}  // namespace kareus::workload
