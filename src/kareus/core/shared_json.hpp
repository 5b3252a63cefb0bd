// An immutable JSON value whose copies share one tree. A plan copies each option's knob into every
// instruction that takes the option, and a frontier's plans take the same few hundred options
// tens of thousands of times: shared, a copy is a reference count, not a tree of a few kilobytes.
//
// Thread-safety: a SharedJson is immutable; copies may be made and read from any thread.
// Example:
//   SharedJson knob(nlohmann::json{{"partitions", nlohmann::json::array()}});
//   SharedJson same = knob;                    // no copy of the tree
//   if (!knob.is_null()) use((*knob)["partitions"]);
//   nlohmann::json changed = *knob;            // to change it, copy it out and give it back:
//   knob = SharedJson(std::move(changed));
#pragma once

#include <cstddef>
#include <memory>
#include <nlohmann/json.hpp>
#include <unordered_map>

namespace kareus {

class SharedJson {
 public:
  SharedJson() = default;  // null
  SharedJson(std::nullptr_t) {}  // NOLINT(google-explicit-constructor): null, as JSON writes it
  // Explicit: `knob = {{"a", 1}}` would otherwise make the array ["a", 1], not the object.
  explicit SharedJson(nlohmann::json value);

  const nlohmann::json& operator*() const { return value_ ? *value_ : null(); }
  const nlohmann::json* operator->() const { return &**this; }
  bool is_null() const { return !value_; }

  // By value, as the plans that hold them compare.
  friend bool operator==(const SharedJson& a, const SharedJson& b) { return a.value_ == b.value_ || *a == *b; }

 private:
  static const nlohmann::json& null();
  std::shared_ptr<const nlohmann::json> value_;  // empty for null
};

// Gives equal values one tree: a reader that meets the same knob on every plan of a set keeps it
// once. Thread-safety: one thread.
class SharedJsonPool {
 public:
  SharedJson intern(nlohmann::json value);

 private:
  std::unordered_multimap<std::size_t, SharedJson> seen_;  // by the value's hash
};

}  // namespace kareus
