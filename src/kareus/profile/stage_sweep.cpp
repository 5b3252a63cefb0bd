#include "kareus/profile/stage_sweep.hpp"

#include <fmt/format.h>

#include <fstream>
#include <map>
#include <tuple>

#include "kareus/compose/compose.hpp"
#include "kareus/core/error.hpp"
#include "kareus/core/io.hpp"
#include "kareus/interop/perseus_profile.hpp"

namespace kareus::profile {
namespace {

using schedule::InstructionType;

// A whole stage's cost depends on the pipeline too: its layers, and the recompute a checkpointed
// backward runs.
nlohmann::json journal_header(const StageSweepRequest& request, const workload::ParallelConfig& parallel,
                              const std::string& evaluator) {
  nlohmann::json workload = request.identity;
  workload["layers_per_stage"] = parallel.layers_per_stage;
  workload["checkpointing"] = workload::to_string(parallel.checkpointing);
  return {{"kind", "stage_sweep"},
          {"workload", std::move(workload)},
          {"evaluator", evaluator},
          {"sequential_sms", request.sequential_sms}};
}

using Key = std::tuple<int, int, double>;  // stage, instruction, clock

// The journal's measurements, checked against `header`; a torn last line (a kill mid-write) is
// dropped. Empty when there is no journal yet.
std::map<Key, StageMeasurement> read_journal(const std::filesystem::path& path, const nlohmann::json& header) {
  std::map<Key, StageMeasurement> done;
  std::ifstream in(path);
  if (!in) return done;
  std::string line;
  long number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.empty()) continue;
    nlohmann::json doc = nlohmann::json::parse(line, nullptr, false);
    if (doc.is_discarded()) {
      if (in.peek() == EOF) break;  // torn by a kill: measured again
      throw InputError({path.string(), number, 0, ""}, "not JSON");
    }
    if (number == 1) {
      if (doc != header) {
        throw InputError({path.string(), 1, 0, "header"},
                         "the journal is of another workload, evaluator or flags; use another --out or remove it");
      }
      continue;
    }
    StageMeasurement m;
    m.stage = doc.at("stage").get<int>();
    m.type = *schedule::parse_instruction_type(doc.at("instruction").get<std::string>());
    m.freq_mhz = doc.at("freq_mhz").get<double>();
    m.time_s = doc.at("time_s").get<double>();
    m.energy_j = doc.at("energy_j").get<double>();
    done[{m.stage, static_cast<int>(m.type), m.freq_mhz}] = m;
  }
  return done;
}

}  // namespace

std::filesystem::path stage_journal_path(const std::filesystem::path& out_dir) {
  return out_dir / "stages.journal.jsonl";
}
std::filesystem::path stage_profile_path(const std::filesystem::path& out_dir) {
  return out_dir / "stage_profile.csv";
}

std::vector<Measurer::Step> stage_steps(const workload::ModelSpec& model, const workload::ParallelConfig& parallel,
                                        const std::vector<workload::Partition>& partitions, int stage,
                                        InstructionType type, int sequential_sms) {
  const std::vector<int> layers = parallel.layers_per_stage.empty()
                                      ? workload::default_layers_per_stage(model.num_layers, parallel.pp)
                                      : parallel.layers_per_stage;
  const long stage_layers = layers.at(static_cast<std::size_t>(stage));
  const compose::InstructionKeys keys = compose::instruction_keys(model, parallel, stage, type);
  const workload::Knob sequential{0, sequential_sms, std::string(workload::kSequentialSlot)};
  std::vector<Measurer::Step> steps;
  for (const auto* list : {&keys.recompute, &keys.keys}) {
    for (const std::string& key : *list) {
      const workload::Partition& p = workload::find_partition(partitions, key);
      steps.push_back({&p, sequential, p.count * stage_layers});
    }
  }
  // The non-partition work of this stage: its keys name the stage's own entries.
  for (const std::string& key : keys.fixed) {
    const workload::Partition& p = workload::find_partition(partitions, key);
    steps.push_back({&p, sequential, p.count});
  }
  return steps;
}

std::string stage_profile_csv(const std::vector<StageMeasurement>& measurements) {
  std::vector<interop::PerseusProfileRow> rows;
  for (const auto& m : measurements) {
    rows.push_back({m.stage, std::string(schedule::to_string(m.type)), m.freq_mhz, m.time_s, m.energy_j});
  }
  return interop::format_perseus_profile(rows);
}

StageSweepOutcome run_stage_sweep(ProfileSession& session, const workload::ModelSpec& model,
                                  const workload::ParallelConfig& parallel,
                                  const std::vector<workload::Partition>& partitions,
                                  const StageSweepRequest& request) {
  KAREUS_CHECK(session.leader(), "rank 0 runs the sweep");
  if (request.clocks_mhz.empty()) throw InputError({"", 0, 0, "--clocks"}, "no clock to sweep");
  const nlohmann::json header = journal_header(request, parallel, "gpu:" + session.device_name());
  const std::filesystem::path journal_path = stage_journal_path(request.out_dir);
  std::map<Key, StageMeasurement> done = read_journal(journal_path, header);
  // Every stage's steps before any measurement: a partition missing is an error up front.
  std::vector<std::array<std::vector<Measurer::Step>, 2>> steps(static_cast<std::size_t>(parallel.pp));
  for (int stage = 0; stage < parallel.pp; ++stage) {
    for (InstructionType type : {InstructionType::kForward, InstructionType::kBackward}) {
      steps[static_cast<std::size_t>(stage)][static_cast<std::size_t>(type)] =
          stage_steps(model, parallel, partitions, stage, type, request.sequential_sms);
    }
  }

  std::filesystem::create_directories(request.out_dir);
  // Rewritten whole (header and the lines read back), so that a torn line is gone before appending.
  std::string kept = header.dump() + "\n";
  for (const auto& [key, m] : done) {
    kept += nlohmann::json{{"stage", m.stage}, {"instruction", schedule::to_string(m.type)}, {"freq_mhz", m.freq_mhz},
                           {"time_s", m.time_s}, {"energy_j", m.energy_j}}
                .dump() +
            "\n";
  }
  write_file_atomic(journal_path, kept);
  std::ofstream journal(journal_path, std::ios::app);
  if (!journal) throw InputError({journal_path.string(), 0, 0, ""}, "cannot be written");

  StageSweepOutcome outcome;
  for (int stage = 0; stage < parallel.pp; ++stage) {
    for (InstructionType type : {InstructionType::kForward, InstructionType::kBackward}) {
      for (double clock : request.clocks_mhz) {
        const Key key{stage, static_cast<int>(type), clock};
        if (auto it = done.find(key); it != done.end()) {
          outcome.measurements.push_back(it->second);
          continue;
        }
        const std::string name = fmt::format("stage{}_{}", stage, schedule::to_string(type));
        const KnobMeasurement k = session.measure_sequence(
            name, steps[static_cast<std::size_t>(stage)][static_cast<std::size_t>(type)], clock);
        const StageMeasurement m{stage, type, clock, k.time_s, k.energy_j};
        journal << nlohmann::json{{"stage", stage}, {"instruction", schedule::to_string(type)}, {"freq_mhz", clock},
                                  {"time_s", m.time_s}, {"energy_j", m.energy_j}}
                       .dump()
                << "\n";
        journal.flush();
        outcome.measurements.push_back(m);
        ++outcome.measured_now;
      }
    }
  }
  write_file_atomic(stage_profile_path(request.out_dir), stage_profile_csv(outcome.measurements));
  return outcome;
}

}  // namespace kareus::profile
