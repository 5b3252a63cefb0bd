#include "kareus/interop/artifact_format.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <utility>

namespace kareus::interop {
namespace {

// Slot families named differently: (ours, the artifact's).
constexpr std::array<std::pair<std::string_view, std::string_view>, 1> kSlotFamilyAliases{{
    {"act", "activation"},
}};

constexpr std::array<std::string_view, 2> kTpForward{"fwd_attn", "fwd_mlp"};
constexpr std::array<std::string_view, 2> kTpBackward{"bwd_attn", "bwd_mlp"};
constexpr std::array<std::string_view, 5> kCpForward{"fwd_qkv_ar", "fwd_qkv_ag", "fwd_ao_ag", "fwd_ao_ar",
                                                     "fwd_mlp"};
constexpr std::array<std::string_view, 7> kCpBackward{"bwd_qkv_ar", "bwd_qkv_rs", "bwd_a_rs", "bwd_a_ag",
                                                      "bwd_o_ag",   "bwd_o_ar",   "bwd_mlp"};

// `name` with its family (the part before the last '_') replaced per the alias table, one way.
std::string rename_family(std::string_view name, bool to_artifact) {
  const std::size_t cut = name.rfind('_');
  if (cut == std::string_view::npos) return std::string(name);
  const std::string_view family = name.substr(0, cut);
  for (const auto& [ours, theirs] : kSlotFamilyAliases) {
    if (family == (to_artifact ? ours : theirs)) {
      return fmt::format("{}{}", to_artifact ? theirs : ours, name.substr(cut));
    }
  }
  return std::string(name);
}

std::optional<int> parse_int(std::string_view text) {
  int value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size()) return std::nullopt;
  return value;
}

}  // namespace

std::string to_artifact_slot(std::string_view ours) { return rename_family(ours, true); }
std::string from_artifact_slot(std::string_view theirs) { return rename_family(theirs, false); }

std::string format_artifact_config(const ArtifactCommConfig& config) {
  return fmt::format("{}-{}-{}-{}", config.overlap_start, config.overlap_end, config.sms, config.block);
}

std::optional<ArtifactCommConfig> parse_artifact_config(std::string_view text) {
  // The two trailing fields are integers (SMs, block); what precedes them is `start-end`.
  const std::size_t block_cut = text.rfind('-');
  if (block_cut == std::string_view::npos || block_cut == 0) return std::nullopt;
  std::size_t sms_cut = text.rfind('-', block_cut - 1);
  if (sms_cut == std::string_view::npos) return std::nullopt;
  // A negative SM count ("...--1-1024") moves the cut one dash left.
  if (sms_cut > 0 && text[sms_cut - 1] == '-') --sms_cut;
  const auto sms = parse_int(text.substr(sms_cut + 1, block_cut - sms_cut - 1));
  const auto block = parse_int(text.substr(block_cut + 1));
  if (!sms || !block || sms_cut == 0) return std::nullopt;
  const std::string_view window = text.substr(0, sms_cut);
  // Legacy: two integers, either possibly negative ("-1--1").
  const std::size_t legacy_cut = window.find('-', window.starts_with('-') ? 1 : 0);
  if (legacy_cut != std::string_view::npos) {
    const auto start = parse_int(window.substr(0, legacy_cut));
    const auto end = parse_int(window.substr(legacy_cut + 1));
    if (start && end) {
      return ArtifactCommConfig{std::string(window.substr(0, legacy_cut)), std::string(window.substr(legacy_cut + 1)),
                                *sms, *block, true};
    }
  }
  // Names: slot names never contain '-', so the first one separates start from end.
  const std::size_t cut = window.find('-');
  if (cut == std::string_view::npos || cut == 0 || cut + 1 == window.size()) return std::nullopt;
  return ArtifactCommConfig{std::string(window.substr(0, cut)), std::string(window.substr(cut + 1)), *sms, *block,
                            false};
}

std::span<const std::string_view> artifact_forward_fields(bool cp) {
  if (cp) return kCpForward;
  return kTpForward;
}

std::span<const std::string_view> artifact_backward_fields(bool cp) {
  if (cp) return kCpBackward;
  return kTpBackward;
}

std::optional<std::string> artifact_profile_field(std::string_view column, bool backward) {
  const std::string_view own = backward ? "bwd_" : "fwd_";
  if (column == "attention_configs") return fmt::format("{}attn", own);
  if (column == "mlp_configs") return fmt::format("{}mlp", own);
  if (column == "recompute_attention_configs") return std::string("fwd_attn");
  if (column == "recompute_mlp_configs") return std::string("fwd_mlp");
  for (bool cp : {false, true}) {
    for (auto fields : {artifact_forward_fields(cp), artifact_backward_fields(cp)}) {
      if (std::find(fields.begin(), fields.end(), column) != fields.end()) return std::string(column);
    }
  }
  return std::nullopt;
}

}  // namespace kareus::interop
