// The jobs `kareus plan` and `kareus compare` run: Kareus evaluation configurations named by
// --preset (or all of them), or the one job the workload flags describe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "kareus/cli/workload_flags.hpp"
#include "kareus/planner/planner.hpp"

namespace kareus::cli {

struct ResolvedJobs {
  std::vector<planner::Job> jobs;
  hardware::GpuSpec gpu;
  engine::EngineSpec engine{};
};

// With `presets` non-empty, the named evaluation configurations: `fixing_flag` (e.g. "--preset")
// then fixes the workload, so any workload flag but --gpu is an InputError. Without, the workload
// flags' job.
ResolvedJobs resolve_jobs(const WorkloadFlags& flags, const std::vector<std::string>& presets,
                          std::string_view fixing_flag);

}  // namespace kareus::cli
