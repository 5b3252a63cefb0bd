// Job files (`--config FILE`, JSON or YAML by the file's suffix): each input is read both as
// job.json and as job.yaml, as every command that takes a workload reads them
// (cli::resolve_workload: the file, then the model and GPU it names, validated); an accepted job's
// partitions are then built.
#include <cstddef>
#include <cstdint>

#include "fuzz_support.hpp"
#include "kareus/cli/workload_flags.hpp"
#include "kareus/workload/partition.hpp"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  kareus::fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace kareus;
  for (const char* name : {"job.json", "job.yaml"}) {
    cli::WorkloadFlags flags;
    flags.config = fuzz::write_input(data, size, name).string();
    cli::ResolvedWorkload w;
    // A setting the file gives that the model, GPU or parallel checks refuse is named by its flag.
    if (!fuzz::holds_contract(std::string(name) + "|field '--", [&] { w = cli::resolve_workload(flags); })) continue;
    fuzz::holds_contract("", [&] {
      workload::build_partitions(w.model, w.parallel);
      for (int s = 0; s < w.parallel.pp; ++s) workload::non_partition_work(w.model, w.parallel, s);
    });
  }
  return 0;
}
