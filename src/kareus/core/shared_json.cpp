#include "kareus/core/shared_json.hpp"

#include <utility>

namespace kareus {

SharedJson::SharedJson(nlohmann::json value)
    : value_(value.is_null() ? nullptr : std::make_shared<const nlohmann::json>(std::move(value))) {}

const nlohmann::json& SharedJson::null() {
  static const nlohmann::json kNull;
  return kNull;
}

SharedJson SharedJsonPool::intern(nlohmann::json value) {
  if (value.is_null()) return {};
  const std::size_t hash = std::hash<nlohmann::json>{}(value);
  const auto [first, last] = seen_.equal_range(hash);
  for (auto it = first; it != last; ++it) {
    if (*it->second == value) return it->second;
  }
  return seen_.emplace(hash, SharedJson(std::move(value)))->second;
}

}  // namespace kareus
