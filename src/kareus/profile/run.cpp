#include "kareus/profile/run.hpp"

#include <fmt/format.h>

#include <fstream>

#include "kareus/core/error.hpp"
#include "kareus/core/io.hpp"
#include "kareus/search/journal.hpp"

namespace kareus::profile {

std::string measurements_csv(const std::vector<search::PartitionSearchResult>& results) {
  std::string csv = "partition,freq_mhz,sms,slot,time_s,energy_j,effective_energy_j\n";
  for (const auto& r : results) {
    for (const auto& m : r.successful) {
      csv += fmt::format("{},{:g},{},{},{:.9g},{:.9g},{:.9g}\n", r.key, m.knob.freq_mhz, m.knob.sms, m.knob.slot,
                         m.time_s, m.energy_j, m.effective_energy_j);
    }
  }
  return csv;
}

ProfileOutcome run_profile(ProfileSession& session, const ProfileRequest& request,
                           const std::function<void(const std::string&, const search::SearchProgress&)>& progress) {
  KAREUS_CHECK(session.leader(), "rank 0 runs the profile");
  if (request.partitions.empty()) throw InputError({"", 0, 0, "--partition"}, "no partition to profile");
  const std::string evaluator_name = "gpu:" + session.device_name();
  std::vector<search::PreparedSearch> prepared;
  for (const workload::Partition* p : request.partitions) {
    prepared.push_back(search::prepare_search(*p, session.gpu(), request.search));
    search::Journal::check(search::journal_path(request.out_dir, p->key), {request.identity, p->key, evaluator_name});
  }

  std::filesystem::create_directories(request.out_dir);
  const std::filesystem::path ranks_path = request.out_dir / "ranks.csv";
  const bool fresh = !std::filesystem::exists(ranks_path) || std::filesystem::file_size(ranks_path) == 0;
  std::ofstream ranks(ranks_path, std::ios::app);
  if (!ranks) throw InputError({ranks_path.string(), 0, 0, ""}, "cannot be written");
  if (fresh) ranks << "partition,freq_mhz,sms,slot,rank,time_s,energy_j,repetitions\n";
  auto previous = session.on_measured;
  session.on_measured = [&ranks, &ranks_path](const workload::Partition& p, const workload::Knob& k,
                                              const KnobMeasurement& m) {
    for (std::size_t r = 0; r < m.rank_time_s.size(); ++r) {
      ranks << fmt::format("{},{:g},{},{},{},{:.9g},{:.9g},{}\n", p.key, k.freq_mhz, k.sms, k.slot, r, m.rank_time_s[r],
                           m.rank_energy_j[r], m.repetitions);
    }
    ranks.flush();
    // Before the knob is journalled: a per-rank log that cannot be written (a full disk) stops
    // the run with the knob unjournalled, measured again on resume, rather than losing its rows.
    if (!ranks) {
      throw EnvironmentError(fmt::format("{}: writing failed (disk full?); the journals keep every knob before "
                                         "this one: free space and rerun to resume",
                                         ranks_path.string()));
    }
  };

  ProfileOutcome outcome;
  const evaluate::Evaluator evaluator = session.evaluator();
  for (const auto& p : prepared) {
    const std::string key = p.partition->key;
    outcome.results.push_back(search::run_prepared_search(
        p, evaluator, request.identity, search::journal_path(request.out_dir, key),
        [&](const search::SearchProgress& s) {
          if (progress) progress(key, s);
        }));
    outcome.measured_now += outcome.results.back().outcome.measured_now;
  }
  session.on_measured = previous;
  write_file_atomic(request.out_dir / "measurements.csv", measurements_csv(outcome.results));
  return outcome;
}

}  // namespace kareus::profile
