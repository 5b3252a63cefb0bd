// The fixed workload the fuzz targets consume what they read with: the default job (Llama 3.2 3B,
// TP 8, PP 2 on the A100 SXM4 40GB, data/), and the plan checked in as the plan target's first
// seed. Loaded once per process.
#pragma once

#include <vector>

#include "kareus/hardware/gpu.hpp"
#include "kareus/plan/plan.hpp"
#include "kareus/workload/model.hpp"
#include "kareus/workload/parallel.hpp"
#include "kareus/workload/partition.hpp"

namespace kareus::fuzz {

struct DefaultJob {
  workload::ModelSpec model;
  workload::ParallelConfig parallel;
  hardware::GpuSpec gpu;
  std::vector<workload::Partition> partitions;  // build_partitions, then stage 0's other work
};

inline const DefaultJob& default_job() {
  static const DefaultJob job = [] {
    DefaultJob j;
    j.model = workload::load_model("llama-3.2-3b");
    j.parallel = workload::validated(j.model, workload::ParallelConfig{});
    j.gpu = hardware::load_gpu_preset("a100-sxm4-40gb");
    j.partitions = workload::build_partitions(j.model, j.parallel);
    for (auto& p : workload::non_partition_work(j.model, j.parallel, 0)) j.partitions.push_back(std::move(p));
    return j;
  }();
  return job;
}

// The default job's plan (fuzz/corpus/plan/plan.json, what `kareus plan` writes).
inline const plan::Plan& default_plan() {
  static const plan::Plan p = plan::read_plan(KAREUS_FUZZ_DIR "/corpus/plan/plan.json");
  return p;
}

}  // namespace kareus::fuzz
