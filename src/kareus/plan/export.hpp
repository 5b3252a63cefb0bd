// Plans in the formats other tools run:
// - kareus-artifact: the Kareus artifact's freqs_pipeline_00000.py (per stage, a Python list of
//   ('forward'|'backward', MHz)) and scheds_pipeline_00000.py (per stage, a list with one tuple per
//   instruction of config strings `<slot>-none-<SMs>-1024`, one per partition in the knob's order,
//   recompute configs first for a checkpointed backward), so a Megatron/NeMo job patched with the
//   Kareus runtime can run our plan;
// - zeus-pfo: the frequency schedule Zeus's PointSolution scheduler serves (a Python literal: per
//   stage, a list of (instruction, MHz)).
//
// A plan's instruction knob, when it has per-partition settings, is
//   {"partitions": [{"key": "fwd_attn", "sms": 12, "slot": "linear_1"}, ...],
//    "recompute": [...]}   // recompute only for checkpointed backwards
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "kareus/plan/plan.hpp"

namespace kareus::plan {

std::string kareus_artifact_freqs(const Plan& plan);
std::string kareus_artifact_scheds(const Plan& plan);  // InputError if instructions lack partition knobs
std::string zeus_pfo_schedule(const Plan& plan);

// Writes the files of `format` ("kareus-artifact" or "zeus-pfo") into `dir`; returns their names.
std::vector<std::string> export_plan(const Plan& plan, std::string_view format,
                                     const std::filesystem::path& dir);

}  // namespace kareus::plan
