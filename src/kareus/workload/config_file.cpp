#include "kareus/workload/config_file.hpp"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <charconv>
#include <string>
#include <string_view>

#include "kareus/core/error.hpp"
#include "kareus/core/io.hpp"

namespace kareus::workload {
namespace {

nlohmann::json scalar(const std::string& text, bool quoted) {
  if (quoted) return text;
  if (text == "true" || text == "True") return true;
  if (text == "false" || text == "False") return false;
  if (text == "~" || text == "null") return nullptr;
  long integer = 0;
  auto [iend, iec] = std::from_chars(text.data(), text.data() + text.size(), integer);
  if (!text.empty() && iec == std::errc() && iend == text.data() + text.size()) return integer;
  double number = 0;
  auto [dend, dec] = std::from_chars(text.data(), text.data() + text.size(), number);
  if (!text.empty() && dec == std::errc() && dend == text.data() + text.size()) return number;
  return text;
}

nlohmann::json to_json(const YAML::Node& node, const std::string& source) {
  switch (node.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return nullptr;
    case YAML::NodeType::Scalar:
      return scalar(node.Scalar(), node.Tag() == "!");
    case YAML::NodeType::Sequence: {
      nlohmann::json out = nlohmann::json::array();
      for (const auto& item : node) out.push_back(to_json(item, source));
      return out;
    }
    case YAML::NodeType::Map: {
      nlohmann::json out = nlohmann::json::object();
      for (const auto& item : node) {
        const std::string key = item.first.as<std::string>();
        if (out.contains(key)) {
          throw InputError({source, item.first.Mark().line + 1L, 0, key}, "appears twice");
        }
        out[key] = to_json(item.second, source);
      }
      return out;
    }
  }
  return nullptr;
}

// A YAML file is UTF-8 text of printable characters (YAML 1.2's c-printable: no C0 control but tab,
// line feed and carriage return, no DEL), which yaml-cpp does not check, and what it holds must stay
// writable as JSON (journals, summaries, errors that quote it). yaml-cpp reads a NUL byte followed by
// "N" as the lone byte 0x85, which is not UTF-8: refused, at its line and column, before it parses.
void refuse_unprintable(const std::string& text, const std::string& source) {
  std::size_t line_start = 0;
  long line = 1;
  for (std::size_t end = 0; end <= text.size(); ++end) {
    if (end < text.size() && text[end] != '\n') continue;
    const std::string_view content(text.data() + line_start, end - line_start);
    for (std::size_t k = 0; k < content.size(); ++k) {
      const auto c = static_cast<unsigned char>(content[k]);
      if ((c < 0x20 && c != '\t' && c != '\r') || c == 0x7f) {
        throw InputError({source, line, static_cast<long>(k) + 1, ""},
                         fmt::format("not valid YAML: a control character (0x{:02x})", c));
      }
    }
    try {
      (void)nlohmann::json(std::string(content)).dump();
    } catch (const nlohmann::json::type_error&) {
      throw InputError({source, line, 0, ""}, "not valid YAML: a byte that is not UTF-8");
    }
    line_start = end + 1;
    ++line;
  }
}

}  // namespace

nlohmann::json read_config_document(const std::filesystem::path& path) {
  const std::string text = read_text_file(path);
  const std::string source = path.string();
  nlohmann::json doc;
  if (path.extension() == ".json") {
    try {
      doc = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {  // parse_error, or out_of_range for a number overflow
      throw InputError({source, 0, 0, ""}, fmt::format("not valid JSON: {}", e.what()));
    }
  } else {
    refuse_unprintable(text, source);
    try {
      doc = to_json(YAML::Load(text), source);
    } catch (const YAML::Exception& e) {
      throw InputError({source, e.mark.line >= 0 ? e.mark.line + 1L : 0L,
                        e.mark.column >= 0 ? e.mark.column + 1L : 0L, ""},
                       fmt::format("not valid YAML: {}", e.msg));
    }
  }
  if (!doc.is_object())
    throw InputError({source, 0, 0, ""}, "expected a mapping of keys to values");
  return doc;
}

}  // namespace kareus::workload
