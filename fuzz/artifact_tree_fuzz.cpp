// The Kareus artifact's profiling trees (<config>/<partition>/eval_results.jsonl and
// nonpartition/<freq>/<name>_energy.csv; `--evaluator artifact:DIR`), given as files (files_input.hpp):
// read by read_artifact_tree; an accepted tree's account is written and its records fill a table
// that answers every knob it holds for the default job's partitions.
#include <cstddef>
#include <cstdint>
#include <memory>

#include "files_input.hpp"
#include "fixtures.hpp"
#include "fuzz_support.hpp"
#include "kareus/evaluate/artifact_tree.hpp"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  kareus::fuzz::quiet_logs();
  kareus::fuzz::default_job();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace kareus;
  const auto root = fuzz::scratch_dir() / "cp1-tp8-bs8-seq4096";
  fuzz::write_files(data, size, root);
  evaluate::ArtifactTree tree;
  if (!fuzz::holds_contract("cp1-tp8-bs8-seq4096", [&] { tree = evaluate::read_artifact_tree(root); })) return 0;
  tree.account();
  auto table = std::make_unique<evaluate::TableEvaluator>(fuzz::default_job().gpu);
  tree.fill(*table);
  const evaluate::Evaluator evaluator(std::move(table));
  for (const workload::Partition& p : fuzz::default_job().partitions) {
    for (const workload::Knob& knob : evaluator.known_knobs(p).value_or(std::vector<workload::Knob>{})) {
      fuzz::holds_contract("", [&] { evaluator.evaluate(p, knob); });
    }
  }
  return 0;
}
