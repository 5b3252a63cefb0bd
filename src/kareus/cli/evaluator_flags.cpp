#include "kareus/cli/evaluator_flags.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>

#include "kareus/core/error.hpp"
#include "kareus/evaluate/artifact_tree.hpp"
#include "kareus/evaluate/simulated.hpp"
#include "kareus/evaluate/table.hpp"
#include "kareus/planner/planner.hpp"
#include "kareus/profile/profiler.hpp"

namespace kareus::cli {

evaluate::Evaluator make_evaluator(const std::string& spec, const hardware::GpuSpec& gpu,
                                   const evaluate::NoiseOptions& noise, const std::optional<std::string>& partition_key) {
  if (spec == "sim") return evaluate::make_noisy_evaluator(evaluate::make_simulated_evaluator(gpu), noise);
  if (noise.sigma != 0) throw InputError({"", 0, 0, "--noise"}, "applies to the simulated GPU (--evaluator sim) only");
  if (spec.starts_with("table:") && spec.size() > 6) {
    auto table = std::make_unique<evaluate::TableEvaluator>(gpu);
    table->add_file(spec.substr(6), partition_key);
    return evaluate::Evaluator(std::move(table));
  }
  if (spec.starts_with("artifact:") && spec.size() > 9) {
    const evaluate::ArtifactTree tree = evaluate::read_artifact_tree(spec.substr(9));
    auto table = std::make_unique<evaluate::TableEvaluator>(gpu);
    tree.fill(*table);
    table->set_name(spec);
    for (const std::string& line : tree.account()) std::fprintf(stderr, "kareus: %s\n", line.c_str());
    return evaluate::Evaluator(std::move(table));
  }
  throw InputError({"", 0, 0, "--evaluator"},
                   fmt::format("expected sim, table:FILE or artifact:DIR, got '{}'", spec));
}

void report_sample_use(const evaluate::Evaluator& evaluator, const std::vector<workload::Partition>& partitions) {
  const auto* table = dynamic_cast<const evaluate::TableEvaluator*>(&evaluator.impl());
  if (!table) return;
  auto say = [](const std::string& line) { std::fprintf(stderr, "kareus: %s\n", line.c_str()); };
  const auto knobs = table->knobs_by_partition();
  for (const auto& [key, list] : knobs) {
    // An init-capture: clang before 16 cannot capture a structured binding.
    auto p = std::find_if(partitions.begin(), partitions.end(), [&key = key](const auto& q) { return q.key == key; });
    if (p == partitions.end()) {
      say(fmt::format("{}: {} knobs measured of {}, which this job does not run", evaluator.name(), list.size(), key));
      continue;
    }
    // Knobs outside the partition's space on this GPU, grouped by why (first example each).
    std::map<std::string, std::pair<std::size_t, std::string>> outside;
    for (workload::Knob k : list) {
      // A never-overlapped partition's sample serves its knob at that clock, whatever its SMs.
      if (p->slots.empty()) k.sms = p->collective ? 1 : 0;
      try {
        evaluate::check_knob(evaluator.gpu(), *p, k);
      } catch (const InputError& e) {
        auto& entry = outside[e.location().field];
        if (entry.first++ == 0) entry.second = e.what();
      }
    }
    for (const auto& [field, entry] : outside) {
      say(fmt::format("{}: {} knobs of {} are outside its knob space and unused, e.g. {}", evaluator.name(),
                      entry.first, key, entry.second));
    }
  }
  for (const workload::Partition& p : partitions) {
    if (!knobs.contains(p.key)) say(fmt::format("{}: no sample of {}, which this job runs", evaluator.name(), p.key));
  }
}

std::optional<evaluate::Evaluator> make_evaluator(const std::string& spec, const hardware::GpuSpec& gpu,
                                                  const workload::ModelSpec& model,
                                                  const workload::ParallelConfig& parallel,
                                                  schedule::ScheduleKind schedule, const evaluate::NoiseOptions& noise) {
  if (spec != "gpu") return make_evaluator(spec, gpu, noise);
  if (noise.sigma != 0) throw InputError({"", 0, 0, "--noise"}, "applies to the simulated GPU (--evaluator sim) only");
  return profile::open_gpu_evaluator(model, parallel, gpu, planner::job_partitions({model, parallel, ""}, schedule),
                                     workload::cost_identity(model, parallel, gpu.name), {});
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
