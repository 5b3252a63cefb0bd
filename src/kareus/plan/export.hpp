// Plans in the formats other tools run:
// - kareus-artifact: the Kareus artifact's (ml-energy/kareus) freqs_pipeline_00000.py (per stage,
//   a Python list of ('forward'|'backward', MHz)) and scheds_pipeline_00000.py, in the grammar its
//   scheduler parses (kareus/scheduler/parser.py), so a Megatron/NeMo job patched with the
//   artifact's runtime runs our plan. Per stage, a list of:
//   - with full checkpointing, one tuple per instruction in run order, the instruction's name
//     first: ('forward', attn, mlp) and ('backward', rec_attn, rec_mlp, attn, mlp) with TP only;
//     with CP ('forward', qkv_ar, qkv_ag, ao_ag, ao_ar, mlp) and a 13-field backward: the five
//     recomputed forward fields, then qkv_ar, qkv_rs, a_rs, a_ag, o_ag, o_ar, mlp;
//   - without checkpointing, one ((forward...), (backward...)) pair per microbatch, in microbatch
//     order, the backward without recomputed fields.
//   Each field is a collective's config string `<slot>-none-<SMs>-1024` (interop/artifact_format.hpp:
//   slots in the artifact's names, e.g. activation_0 for our act_0), placed by partition key, not
//   by the order of the knob's list.
//   Its scheduler runs 1F1B only: a plan of another schedule (interleaved, zb-h1, gpipe) is refused
//   in one line.
// - zeus-pfo: the frequency schedule Zeus's PointSolution scheduler serves (a Python literal: per
//   stage, a list of (instruction, MHz)). Zeus's client (PipelineFrequencyOptimizer) takes the next
//   pair at each on_instruction_begin(name) and checks the name, nothing else; so every schedule
//   exports: interleaved as its run order (a chunk is only the position), zb-h1 with B and W named
//   'backward_input' and 'backward_weight', the names its training loop must pass.
//
// A plan's instruction knob, when it has per-partition settings, is either ours:
//   {"partitions": [{"key": "fwd_attn", "sms": 12, "slot": "linear_1"}, ...],
//    "recompute": [...]}   // recompute only for checkpointed backwards, under forward keys
// or one carried from the artifact's instruction profile, whose columns already hold its config
// strings: {"attention_configs": "linear_0-none-12-1024", "mlp_configs": "...",
// "recompute_attention_configs": ..., "recompute_mlp_configs": ...} (TP) or the partition keys
// themselves (CP; interop/artifact_format.hpp's artifact_profile_field); those strings are written
// as they are.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "kareus/plan/plan.hpp"

namespace kareus::plan {

// How a plan maps onto the artifact's schedule: CP fields or TP-only, and whether backwards
// recompute the forward. InputError naming the instruction when the knobs say neither or both.
struct ArtifactLayout {
  bool context_parallel = false;
  bool checkpointing = false;
};
ArtifactLayout artifact_layout(const Plan& plan);

// Both: InputError on a plan whose schedule is not 1F1B.
std::string kareus_artifact_freqs(const Plan& plan);
// InputError naming stages[s].instructions[k] when an instruction lacks partition knobs or a
// field the artifact's tuple needs.
std::string kareus_artifact_scheds(const Plan& plan);
std::string zeus_pfo_schedule(const Plan& plan);

// Writes the files of `format` ("kareus-artifact" or "zeus-pfo") into `dir`; returns their names.
// Nothing is written when the plan cannot be exported or is not valid (validate.hpp; `source`
// names it in errors).
std::vector<std::string> export_plan(const Plan& plan, std::string_view format, const std::filesystem::path& dir,
                                     const std::string& source = "plan");

}  // namespace kareus::plan
