#include "kareus/calibrate/overlap_fit.hpp"

#include <fmt/format.h>
#include <nlopt.hpp>

#include <algorithm>
#include <cmath>
#include <map>

#include "kareus/core/error.hpp"
#include "kareus/core/median.hpp"
#include "kareus/evaluate/simulated.hpp"
#include "kareus/search/journal.hpp"
#include "kareus/workload/model.hpp"
#include "kareus/workload/parallel.hpp"

namespace kareus::calibrate {
namespace {

constexpr double kMaxSlowdown = 4;  // above any public measurement (about 2x): the box's top

// The layer partitions of the workload a journal header names (workload::cost_identity: the pipeline
// and checkpointing do not change them).
std::vector<workload::Partition> header_partitions(const nlohmann::json& id, const std::string& where) {
  auto field = [&](const char* key) -> const nlohmann::json& {
    if (!id.contains(key)) throw InputError({where, 1, 0, key}, "the journal's workload does not name it");
    return id.at(key);
  };
  try {
    const workload::ModelSpec model = workload::load_model(field("model").get<std::string>());
    workload::ParallelConfig p;
    p.tp = field("tp").get<int>();
    p.cp = field("cp").get<int>();
    p.pp = 1;  // the layer partitions do not depend on the pipeline
    p.microbatch_size = field("mbs").get<int>();
    p.seq_len = field("seq_len").get<int>();
    p.hidden_dropout = id.value("hidden_dropout", 0.0);
    return workload::build_partitions(model, workload::validated(model, p));
  } catch (const nlohmann::json::exception& e) {
    throw InputError({where, 1, 0, "workload"}, std::string("bad workload in the journal header: ") + e.what());
  }
}

double median_abs(std::vector<double> v) {
  for (double& x : v) x = std::abs(x);
  return median(std::move(v));
}

struct Pairing {
  const workload::Partition* partition = nullptr;
  workload::Knob knob;
  double measured_ratio = 0;
  double model_sequential_s = 0;  // no overlap, so the factors do not change it
};

struct Objective {
  const hardware::GpuSpec* base;
  const std::vector<Pairing>* pairs;
  int evaluations = 0;

  std::vector<double> model_ratios(double compute, double collective) const {
    hardware::GpuSpec gpu = *base;
    gpu.overlap_compute_slowdown = compute;
    gpu.overlap_collective_slowdown = collective;
    const evaluate::SimulatedEvaluator sim(gpu);
    std::vector<double> out;
    for (const Pairing& p : *pairs) out.push_back(sim.evaluate(*p.partition, p.knob).time_s / p.model_sequential_s);
    return out;
  }
  double operator()(double compute, double collective) {
    ++evaluations;
    const std::vector<double> ratios = model_ratios(compute, collective);
    double sum = 0;
    for (std::size_t i = 0; i < ratios.size(); ++i) {
      const double err = std::log(ratios[i] / (*pairs)[i].measured_ratio);
      sum += err * err;
    }
    return sum;
  }
};

double nlopt_objective(unsigned, const double* x, double*, void* data) {
  return (*static_cast<Objective*>(data))(x[0], x[1]);
}

std::vector<Pairing> pairings(const hardware::GpuSpec& gpu, std::span<const MeasuredPartition> measured) {
  const evaluate::SimulatedEvaluator sim(gpu);
  std::vector<Pairing> pairs;
  for (const MeasuredPartition& m : measured) {
    if (!m.partition.collective) continue;  // nothing to overlap
    std::map<double, std::vector<const search::Measurement*>> sequential;  // by clock
    for (const auto& s : m.measurements) {
      if (s.knob.sequential()) sequential[s.knob.freq_mhz].push_back(&s);
    }
    for (const auto& o : m.measurements) {
      if (o.knob.sequential()) continue;
      const auto seq = sequential.find(o.knob.freq_mhz);
      if (seq == sequential.end()) continue;
      double seq_time_s = 0;
      for (const search::Measurement* s : seq->second) seq_time_s += s->time_s;
      seq_time_s /= static_cast<double>(seq->second.size());
      const workload::Knob& seq_knob = seq->second.front()->knob;
      pairs.push_back({&m.partition, o.knob, o.time_s / seq_time_s, sim.evaluate(m.partition, seq_knob).time_s});
    }
  }
  if (pairs.empty()) {
    throw InputError({"", 0, 0, "--partitions"},
                     "no overlapped knob was measured together with its partition's sequential knob at the same "
                     "clock (kareus profile --mode exhaustive measures both)");
  }
  return pairs;
}

}  // namespace

std::vector<MeasuredPartition> read_measured_partitions(const std::filesystem::path& dir) {
  if (!std::filesystem::is_directory(dir))
    throw InputError({dir.string(), 0, 0, "--partitions"}, "is not a directory (give a kareus profile --out directory)");
  std::vector<std::filesystem::path> journals;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_regular_file() && name.ends_with(".journal.jsonl")) journals.push_back(entry.path());
  }
  std::sort(journals.begin(), journals.end());
  if (journals.empty())
    throw InputError({dir.string(), 0, 0, "--partitions"}, "holds no *.journal.jsonl (kareus profile writes them)");
  std::vector<MeasuredPartition> out;
  for (const auto& path : journals) {
    const search::JournalContents contents = search::Journal::read(path);
    if (contents.artifact_log || contents.header.partition.empty() || contents.header.workload.is_null())
      throw InputError({path.string(), 1, 0, ""}, "has no workload header: not a kareus profile journal");
    const std::vector<workload::Partition> partitions = header_partitions(contents.header.workload, path.string());
    const auto it = std::find_if(partitions.begin(), partitions.end(),
                                 [&](const workload::Partition& p) { return p.key == contents.header.partition; });
    if (it == partitions.end())
      throw InputError({path.string(), 1, 0, "partition"},
                       "names partition " + contents.header.partition + ", which its workload's layers do not have");
    MeasuredPartition m;
    m.source = path.string();
    m.measured_on = fmt::format("{}, {}", contents.header.workload.value("gpu", std::string("?")),
                                contents.header.evaluator);
    m.partition = *it;
    for (const auto& measurement : contents.measurements) {
      if (measurement.ok) m.measurements.push_back(measurement);
    }
    out.push_back(std::move(m));
  }
  return out;
}

OverlapCheck check_overlap(const hardware::GpuSpec& gpu, std::span<const MeasuredPartition> measured) {
  const std::vector<Pairing> pairs = pairings(gpu, measured);
  Objective objective{&gpu, &pairs};
  const std::vector<double> model = objective.model_ratios(gpu.overlap_compute_slowdown, gpu.overlap_collective_slowdown);
  OverlapCheck check;
  std::vector<double> errs;
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    check.pairs.push_back({pairs[i].partition->key, pairs[i].knob, pairs[i].measured_ratio, model[i], model[i]});
    errs.push_back(check.pairs.back().err_after());
  }
  check.err_median = median_abs(errs);
  return check;
}

OverlapFit fit_overlap(const hardware::GpuSpec& base, std::span<const MeasuredPartition> measured) {
  const std::vector<Pairing> pairs = pairings(base, measured);
  Objective objective{&base, &pairs};
  // A coarse grid first (the timeline's waves and phases make the objective kinked), then a
  // local search from its best point.
  double best_a = 1, best_b = 1, best_value = objective(1, 1);
  for (double a = 1; a <= kMaxSlowdown + 1e-9; a += 0.25) {
    for (double b = 1; b <= kMaxSlowdown + 1e-9; b += 0.25) {
      const double v = objective(a, b);
      if (v < best_value) best_value = v, best_a = a, best_b = b;
    }
  }
  nlopt::opt opt(nlopt::LN_SBPLX, 2);
  opt.set_lower_bounds({1.0, 1.0});
  opt.set_upper_bounds({kMaxSlowdown, kMaxSlowdown});
  opt.set_min_objective(nlopt_objective, &objective);
  opt.set_xtol_abs(1e-6);
  opt.set_maxeval(400);
  std::vector<double> x = {best_a, best_b};
  double value = best_value;
  try {
    opt.optimize(x, value);
  } catch (const nlopt::roundoff_limited&) {
    value = objective(x[0], x[1]);  // x holds the best point found
  }
  if (!(value <= best_value)) x = {best_a, best_b};

  OverlapFit fit;
  fit.compute_slowdown = x[0];
  fit.collective_slowdown = x[1];
  const std::vector<double> before = objective.model_ratios(base.overlap_compute_slowdown, base.overlap_collective_slowdown);
  const std::vector<double> after = objective.model_ratios(fit.compute_slowdown, fit.collective_slowdown);
  std::vector<double> err_before, err_after;
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    fit.pairs.push_back({pairs[i].partition->key, pairs[i].knob, pairs[i].measured_ratio, before[i], after[i]});
    err_before.push_back(fit.pairs.back().err_before());
    err_after.push_back(fit.pairs.back().err_after());
  }
  fit.err_median_before = median_abs(err_before);
  fit.err_median_after = median_abs(err_after);
  fit.evaluations = objective.evaluations;
  return fit;
}

}  // namespace kareus::calibrate
