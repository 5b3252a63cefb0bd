// A profiling run across ranks: rank 0 runs the search and, for each knob it wants, tells every
// rank which partition and knob to measure; all measure together (Measurer) and rank 0 gets the
// result. The other ranks serve() until rank 0 finish()es. evaluator() wraps rank 0's side as an
// Evaluator ("gpu:<device>"), so the search, its journal and the planner use real measurements
// exactly as they use the model.
//
// A failure on one rank while the others wait in a collective call cannot be reported to them, so
// with several ranks it ends the run (Group::abort, after resetting this rank's clocks); the journal
// keeps every knob measured before, and a rerun resumes from it. With one rank a failure is a
// failed measurement, as for any evaluator, except an EnvironmentError (a lost GPU, a full disk),
// which ends the run there too.
//
// Thread-safety: one thread per rank.
// Example:
//   ProfileSession session(*world, partitions, measurer, gpu_spec, "NVIDIA H200");
//   if (session.leader()) { Evaluator e = session.evaluator(); ...search...; session.finish(); }
//   else session.serve();
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kareus/evaluate/evaluator.hpp"
#include "kareus/profile/group.hpp"
#include "kareus/profile/measurer.hpp"

namespace kareus::profile {

class ProfileSession {
 public:
  // Collective call: checks that every rank was started for the same `identity` (InputError on
  // every rank otherwise). `partitions` are every partition a command may name.
  ProfileSession(Group& world, std::vector<workload::Partition> partitions, Measurer& measurer,
                 hardware::GpuSpec gpu, std::string device_name, const nlohmann::json& identity);
  ~ProfileSession();
  ProfileSession(const ProfileSession&) = delete;
  ProfileSession& operator=(const ProfileSession&) = delete;

  bool leader() const { return world_.rank() == 0; }
  // Rank 0: measures `knob` of `partition` on every rank.
  KnobMeasurement measure(const workload::Partition& partition, const workload::Knob& knob);
  // Rank 0: measures a whole sequence of steps (Measurer::measure_sequence) on every rank; the
  // steps' partitions must be among the session's.
  KnobMeasurement measure_sequence(const std::string& name, const std::vector<Measurer::Step>& steps,
                                   double freq_mhz);

  // The other ranks: measure what rank 0 asks until it finishes; returns the knobs measured.
  long serve();
  // Rank 0: lets the other ranks' serve() return. Idempotent; the destructor calls it.
  void finish();

  // Rank 0: an Evaluator measuring through this session, which must outlive it. Not thread-safe,
  // so a search measures one knob at a time.
  evaluate::Evaluator evaluator();
  // Called on rank 0 after each measurement (the per-rank log).
  std::function<void(const workload::Partition&, const workload::Knob&, const KnobMeasurement&)> on_measured;

  const std::string& device_name() const { return device_name_; }
  const hardware::GpuSpec& gpu() const { return gpu_; }

 private:
  // Runs `work` here; with several ranks a failure ends the run (see above).
  KnobMeasurement measure_here(const std::string& what, const std::function<KnobMeasurement()>& work);

  Group& world_;
  std::vector<workload::Partition> partitions_;
  Measurer& measurer_;
  hardware::GpuSpec gpu_;
  std::string device_name_;
  bool finished_ = false;
};

}  // namespace kareus::profile
