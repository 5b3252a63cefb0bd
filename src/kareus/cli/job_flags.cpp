#include "kareus/cli/job_flags.hpp"

namespace kareus::cli {

ResolvedJobs resolve_jobs(const WorkloadFlags& flags, const std::vector<std::string>& presets,
                          std::string_view fixing_flag) {
  ResolvedJobs out;
  if (!presets.empty()) {
    reject_workload_flags(flags, fixing_flag);
    out.gpu = hardware::load_gpu_preset(flags.gpu);
    if (flags.power_limit_w) out.gpu = hardware::with_power_limit(std::move(out.gpu), *flags.power_limit_w, "--power-limit");
    out.engine = load_engine_flag(flags.engine);
    for (const std::string& name : presets) out.jobs.push_back(planner::evaluation_config(name));
    return out;
  }
  ResolvedWorkload w = resolve_workload(flags);
  out.jobs.push_back({w.model, w.parallel, describe(w)});
  out.gpu = std::move(w.gpu);
  out.engine = std::move(w.engine);
  return out;
}

}  // namespace kareus::cli
