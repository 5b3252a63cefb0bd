#include "kareus/cli/evaluator_flags.hpp"

#include <fmt/format.h>

#include "kareus/core/error.hpp"
#include "kareus/evaluate/simulated.hpp"
#include "kareus/evaluate/table.hpp"

namespace kareus::cli {

evaluate::Evaluator make_evaluator(const std::string& spec, const hardware::GpuSpec& gpu,
                                   const evaluate::NoiseOptions& noise) {
  if (spec == "sim") return evaluate::make_noisy_evaluator(evaluate::make_simulated_evaluator(gpu), noise);
  if (noise.sigma != 0) throw InputError({"", 0, 0, "--noise"}, "applies to the simulated GPU (--evaluator sim) only");
  if (spec.starts_with("table:") && spec.size() > 6) {
    auto table = std::make_unique<evaluate::TableEvaluator>(gpu);
    table->add_file(spec.substr(6));
    return evaluate::Evaluator(std::move(table));
  }
  throw InputError({"", 0, 0, "--evaluator"}, fmt::format("expected sim or table:FILE, got '{}'", spec));
}

void add_noise_flags(CLI::App& cmd, evaluate::NoiseOptions& noise) {
  cmd.add_option("--noise", noise.sigma,
                 "Relative measurement noise on the simulated GPU's time and energy, e.g. 0.01 (default: off)")
      ->capture_default_str();
  cmd.add_option("--noise-seed", noise.seed, "Seed of the noise")->capture_default_str();
}

std::string provenance_note(const evaluate::Evaluator& evaluator) {
  if (evaluator.provenance() == evaluate::Provenance::kModel) {
    return fmt::format("costs from the {} GPU model of {}: a model, not a measurement", evaluator.name(),
                       evaluator.gpu().display_name);
  }
  return fmt::format("costs measured on {} ({})", evaluator.gpu().display_name, evaluator.name());
}

}  // namespace kareus::cli
