// The Kareus artifact's (ml-energy/kareus) names and config strings, in one place, so that what we
// write for it (plan exports) and what we read from it (its profiling logs) agree:
// - launch slots: the artifact groups the SwiGLU op as "activation", we as "act"; every other
//   family (norm, rope, linear, attn) is named alike. to_artifact_slot / from_artifact_slot map a
//   slot name both ways through one alias table; "none" (not overlapped) is "none" in both. Both
//   merge only consecutive ops of one memory-bound group into a slot (workload::launch_slots;
//   pinned for the TP and CP jobs in tests/evaluate/artifact_slots_test.cpp).
// - a collective's config string, as its scheduler parses it: `<overlap_start>-<overlap_end>-<SMs>-
//   <threads per block>`, e.g. `linear_0-none-12-1024`; slot names never contain '-'. A legacy
//   form has op indices instead of names (`-1--1-16-1024`, -1 = none).
// - the schedule fields of an instruction, in the order the artifact's schedule tuples carry them
//   (its ScheduleItem / ScheduleItemCP), by partition key.
//
// Thread-safety: pure functions over constant tables.
// Example:
//   to_artifact_slot("act_0") == "activation_0";
//   parse_artifact_config("linear_0-none-12-1024")->sms == 12;
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace kareus::interop {

// Threads per block the artifact gives every collective it schedules (its fixed block size).
inline constexpr int kArtifactBlockSize = 1024;

std::string to_artifact_slot(std::string_view ours);
std::string from_artifact_slot(std::string_view theirs);

struct ArtifactCommConfig {
  std::string overlap_start;  // as written: a slot name, "none", or a legacy op index
  std::string overlap_end;
  int sms = 0;
  int block = kArtifactBlockSize;
  bool legacy_indices = false;  // the all-integer form

  bool operator==(const ArtifactCommConfig&) const = default;
};

std::string format_artifact_config(const ArtifactCommConfig& config);
// nullopt when `text` is not a config string of either form.
std::optional<ArtifactCommConfig> parse_artifact_config(std::string_view text);

// Partition keys of the fields of a forward tuple and of a backward tuple (after the recomputed
// forward fields, when checkpointing), in the artifact's order. TP only (cp = false):
// fwd_attn, fwd_mlp | bwd_attn, bwd_mlp. With CP: fwd_qkv_ar, fwd_qkv_ag, fwd_ao_ag, fwd_ao_ar,
// fwd_mlp | bwd_qkv_ar, bwd_qkv_rs, bwd_a_rs, bwd_a_ag, bwd_o_ag, bwd_o_ar, bwd_mlp.
std::span<const std::string_view> artifact_forward_fields(bool cp);
std::span<const std::string_view> artifact_backward_fields(bool cp);

// The partition key a column of the artifact's instruction profile CSV holds configs of: its
// TP-only profiles name them attention_configs, mlp_configs (the instruction's own: fwd_ or
// bwd_ by `backward`), recompute_attention_configs and recompute_mlp_configs (a checkpointed
// backward's recomputed forward); its CP profiles use the partition keys themselves. nullopt for
// any other column.
std::optional<std::string> artifact_profile_field(std::string_view column, bool backward);

}  // namespace kareus::interop
