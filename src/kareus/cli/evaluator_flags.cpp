#include "kareus/cli/evaluator_flags.hpp"

#include <fmt/format.h>

#include <cstdlib>

#include "kareus/core/error.hpp"
#include "kareus/evaluate/simulated.hpp"
#include "kareus/evaluate/table.hpp"
#include "kareus/planner/planner.hpp"
#include "kareus/profile/profiler.hpp"

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

evaluate::Evaluator make_evaluator(const std::string& spec, const hardware::GpuSpec& gpu,
                                   const workload::ModelSpec& model, const workload::ParallelConfig& parallel,
                                   const evaluate::NoiseOptions& noise) {
  if (spec != "gpu") return make_evaluator(spec, gpu, noise);
  if (noise.sigma != 0) throw InputError({"", 0, 0, "--noise"}, "applies to the simulated GPU (--evaluator sim) only");
  const nlohmann::json identity = {{"model", model.name}, {"gpu", gpu.name}, {"tp", parallel.tp}, {"cp", parallel.cp},
                                   {"mbs", parallel.microbatch_size}, {"seq_len", parallel.seq_len}};
  auto evaluator = profile::open_gpu_evaluator(model, parallel, gpu, planner::job_partitions({model, parallel, ""}),
                                               identity, {});
  if (!evaluator) std::exit(0);  // another rank served rank 0's measurements; rank 0 reports
  return std::move(*evaluator);
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
