// A profiling run on rank 0: each requested partition's knobs searched (exhaustively or by MOBO)
// with the session's measurements, every measurement journalled as it completes in
// <out>/<key>.journal.jsonl (a killed run is rerun with the same flags and resumes: no knob is
// measured twice), each rank's own figures appended to <out>/ranks.csv, and at the end every
// partition's successful measurements in <out>/measurements.csv, the table evaluator's format
// (`kareus plan --evaluator table:<out>/measurements.csv`).
//
// Thread-safety: one thread, on rank 0, while the other ranks serve().
// Example:
//   ProfileRequest request{.partitions = {&fwd_mlp}, .out_dir = "prof", .identity = identity};
//   ProfileOutcome outcome = run_profile(profiler.session(), request);
#pragma once

#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kareus/profile/session.hpp"
#include "kareus/search/partition_search.hpp"

namespace kareus::profile {

struct ProfileRequest {
  std::vector<const workload::Partition*> partitions;
  search::PartitionSearchOptions search;
  std::filesystem::path out_dir;
  nlohmann::json identity;  // the journals' workload identity
};

struct ProfileOutcome {
  std::vector<search::PartitionSearchResult> results;  // in request order
  std::size_t measured_now = 0;                        // knobs this run measured
};

// Checks every request (grids, budgets, existing journals) before measuring anything: an
// InputError leaves every file as it was.
ProfileOutcome run_profile(ProfileSession& session, const ProfileRequest& request,
                           const std::function<void(const std::string& key, const search::SearchProgress&)>& progress = {});

// The measurements CSV of `results`: partition,freq_mhz,sms,slot,time_s,energy_j,effective_energy_j.
std::string measurements_csv(const std::vector<search::PartitionSearchResult>& results);

}  // namespace kareus::profile
