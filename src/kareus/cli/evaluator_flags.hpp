// The --evaluator flag shared by commands that cost knobs: "sim" (the simulated GPU model) or
// "table:FILE" (measured samples: our CSV or the Kareus artifact's eval_results.jsonl).
#pragma once

#include <string>

#include "kareus/evaluate/evaluator.hpp"

namespace kareus::cli {

// Throws InputError naming --evaluator for anything else.
evaluate::Evaluator make_evaluator(const std::string& spec, const hardware::GpuSpec& gpu);

// "simulated GPU model, not a measurement" or "measured samples from FILE", for every output.
std::string provenance_note(const evaluate::Evaluator& evaluator);

}  // namespace kareus::cli
