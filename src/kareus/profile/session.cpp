#include "kareus/profile/session.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>


#include "kareus/core/error.hpp"
#include "kareus/runtime/reset_guard.hpp"

namespace kareus::profile {
namespace {

class SessionEvaluator final : public evaluate::EvaluatorImpl {
 public:
  explicit SessionEvaluator(ProfileSession& session) : session_(session) {}
  std::string name() const override { return "gpu:" + session_.device_name(); }
  evaluate::Provenance provenance() const override { return evaluate::Provenance::kMeasurement; }
  bool thread_safe() const override { return false; }
  const hardware::GpuSpec& gpu() const override { return session_.gpu(); }
  evaluate::EvalResult evaluate(const workload::Partition& partition, const workload::Knob& knob) const override {
    KnobMeasurement m = session_.measure(partition, knob);
    return evaluate::EvalResult::success(m.time_s, m.energy_j);
  }

 private:
  ProfileSession& session_;
};

}  // namespace

ProfileSession::ProfileSession(Group& world, std::vector<workload::Partition> partitions, Measurer& measurer,
                               hardware::GpuSpec gpu, std::string device_name, const nlohmann::json& identity)
    : world_(world),
      partitions_(std::move(partitions)),
      measurer_(measurer),
      gpu_(std::move(gpu)),
      device_name_(std::move(device_name)) {
  std::string keys;
  for (const auto& p : partitions_) keys += p.key + ",";
  if (!every_member_agrees(world_, identity.dump() + "|" + keys)) {
    throw InputError({"", 0, 0, "ranks"}, "the ranks were started for different workloads; start every rank "
                                          "with the same flags");
  }
}

ProfileSession::~ProfileSession() {
  try {
    finish();
  } catch (const std::exception& e) {
    spdlog::error("profile: could not stop the other ranks: {}", e.what());
  }
}

KnobMeasurement ProfileSession::measure_here(const std::string& what, const std::function<KnobMeasurement()>& work) {
  if (world_.size() == 1) return work();
  try {
    return work();
  } catch (const std::exception& e) {
    // The other ranks wait in a collective call and cannot be told: end the run. MPI_Abort ends
    // this process without exit handlers, so its clocks are reset first (bounded, as for a signal:
    // a GPU whose call hangs is skipped); the other ranks reset theirs on the SIGTERM that mpirun
    // sends them.
    spdlog::error("profile: rank {} failed measuring {}: {}; ending the run (rerun to resume from the journal)",
                  world_.rank(), what, e.what());
    runtime::reset_all_registered();
    world_.abort(3);
  }
  throw InternalError("abort returned");
}

namespace {

std::string knob_text(const workload::Partition& partition, const workload::Knob& knob) {
  return fmt::format("{} at {:g} MHz, {} SMs, slot {}", partition.key, knob.freq_mhz, knob.sms, knob.slot);
}

}  // namespace

KnobMeasurement ProfileSession::measure(const workload::Partition& partition, const workload::Knob& knob) {
  KAREUS_CHECK(leader(), "only rank 0 asks for measurements");
  KAREUS_CHECK(!finished_, "measure() after finish()");
  std::string command = nlohmann::json{{"op", "measure"},
                                       {"partition", partition.key},
                                       {"freq_mhz", knob.freq_mhz},
                                       {"sms", knob.sms},
                                       {"slot", knob.slot}}
                            .dump();
  world_.broadcast(command);
  KnobMeasurement m = measure_here(knob_text(partition, knob), [&] { return measurer_.measure(partition, knob); });
  if (on_measured) on_measured(partition, knob, m);
  return m;
}

KnobMeasurement ProfileSession::measure_sequence(const std::string& name, const std::vector<Measurer::Step>& steps,
                                                 double freq_mhz) {
  KAREUS_CHECK(leader(), "only rank 0 asks for measurements");
  KAREUS_CHECK(!finished_, "measure_sequence() after finish()");
  nlohmann::json doc{{"op", "sequence"}, {"name", name}, {"freq_mhz", freq_mhz}, {"steps", nlohmann::json::array()}};
  for (const Measurer::Step& step : steps) {
    // A partition of the session's own, so that the other ranks find it by key.
    workload::find_partition(partitions_, step.partition->key);
    doc["steps"].push_back(
        {{"partition", step.partition->key}, {"sms", step.knob.sms}, {"slot", step.knob.slot}, {"count", step.count}});
  }
  std::string command = doc.dump();
  world_.broadcast(command);
  return measure_here(fmt::format("{} at {:g} MHz", name, freq_mhz),
                      [&] { return measurer_.measure_sequence(name, steps, freq_mhz); });
}

long ProfileSession::serve() {
  KAREUS_CHECK(!leader(), "rank 0 runs the search, it does not serve");
  long measured = 0;
  for (;;) {
    std::string command;
    world_.broadcast(command);
    const nlohmann::json doc = nlohmann::json::parse(command);
    if (doc.at("op") == "stop") return measured;
    const double freq_mhz = doc.at("freq_mhz").get<double>();
    if (doc.at("op") == "sequence") {
      std::vector<Measurer::Step> steps;
      for (const auto& s : doc.at("steps")) {
        steps.push_back({&workload::find_partition(partitions_, s.at("partition").get<std::string>()),
                         {freq_mhz, s.at("sms").get<int>(), s.at("slot").get<std::string>()},
                         s.at("count").get<long>()});
      }
      const std::string name = doc.at("name").get<std::string>();
      measure_here(fmt::format("{} at {:g} MHz", name, freq_mhz),
                   [&] { return measurer_.measure_sequence(name, steps, freq_mhz); });
    } else {
      const workload::Partition& partition =
          workload::find_partition(partitions_, doc.at("partition").get<std::string>());
      workload::Knob knob{freq_mhz, doc.at("sms").get<int>(), doc.at("slot").get<std::string>()};
      measure_here(knob_text(partition, knob), [&] { return measurer_.measure(partition, knob); });
    }
    ++measured;
  }
}

void ProfileSession::finish() {
  if (!leader() || finished_) return;
  finished_ = true;
  std::string command = nlohmann::json{{"op", "stop"}}.dump();
  world_.broadcast(command);
}

evaluate::Evaluator ProfileSession::evaluator() {
  KAREUS_CHECK(leader(), "only rank 0 runs the search");
  return evaluate::Evaluator(std::make_unique<SessionEvaluator>(*this));
}

}  // namespace kareus::profile
