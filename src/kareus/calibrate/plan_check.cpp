#include "kareus/calibrate/plan_check.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "kareus/core/csv.hpp"
#include "kareus/core/error.hpp"
#include "kareus/core/io.hpp"
#include "kareus/core/median.hpp"
#include "kareus/plan/validate.hpp"

namespace kareus::calibrate {
namespace {

using schedule::InstructionType;

Method parse_method(const CsvTable& t, std::size_t row, std::size_t col) {
  const std::string& text = t.text(row, col);
  for (Method m : planner::kAllMethods) {
    if (text == to_string(m) && m != Method::kKareus) return m;
  }
  t.fail(row, col, fmt::format("method '{}' is not Megatron-LM, Perseus or Nanobatching+Perseus", text));
}

// The key both files share: method, model, tp, cp, mbs, seq, plan.
struct Key {
  std::string method, model;
  long tp = 0, cp = 0, mbs = 0, seq = 0, plan = 0;
  auto operator<=>(const Key&) const = default;
};

Key read_key(const CsvTable& t, std::size_t row) {
  auto col = [&](const char* name) { return t.require_column(name); };
  auto positive = [&](const char* name) {
    long v = t.integer(row, col(name));
    if (v < 1) t.fail(row, col(name), fmt::format("{} must be at least 1", name));
    return v;
  };
  return {t.text(row, col("method")), t.text(row, col("model")), positive("tp"), positive("cp"),
          positive("mbs"), positive("seq"), t.integer(row, col("plan"))};
}

std::string job_label(const Key& k) {
  return fmt::format("{} tp{} cp{} mbs{} seq{}", k.model, k.tp, k.cp, k.mbs, k.seq);
}

// Checks that each stage runs one forward and one backward of every microbatch, in 1F1B order.
void check_order(const ReferencePlan& plan) {
  const int stages = static_cast<int>(plan.stages.size());
  const int microbatches = plan.job.parallel.microbatches;
  auto schedule = schedule::PipelineSchedule::make(schedule::ScheduleKind::k1F1B, stages, microbatches);
  for (int s = 0; s < stages; ++s) {
    const auto expected = schedule.stage_order(s);
    const auto& got = plan.stages[static_cast<std::size_t>(s)];
    bool same = expected.size() == got.size();
    for (std::size_t i = 0; same && i < got.size(); ++i) {
      same = expected[i].type == got[i].type && expected[i].microbatch == got[i].microbatch;
    }
    if (!same) {
      throw InputError({plan.source, 0, 0, "position"},
                       fmt::format("{}: stage {} does not run its {} microbatches in 1F1B order", plan.label, s,
                                   microbatches));
    }
  }
}

}  // namespace

std::vector<ReferencePlan> read_artifact_plans(const std::filesystem::path& plans_csv,
                                               const std::filesystem::path& clocks_csv) {
  const CsvTable plans = read_csv(plans_csv);
  const CsvTable clocks = read_csv(clocks_csv);
  std::map<Key, ReferencePlan> by_key;
  std::vector<Key> order;
  for (std::size_t r = 0; r < plans.rows(); ++r) {
    Key key = read_key(plans, r);
    ReferencePlan plan;
    plan.source = fmt::format("{}:{}", plans.source(), plans.line_of(r));
    plan.method = parse_method(plans, r, plans.require_column("method"));
    plan.label = fmt::format("{} plan {}", job_label(key), key.plan);
    plan.time_s = plans.positive(r, plans.require_column("time_s"));
    plan.energy_j = plans.positive(r, plans.require_column("energy_j"));
    try {
      plan.job.model = workload::load_model(key.model);
    } catch (const InputError& e) {
      plans.fail(r, plans.require_column("model"), e.what());
    }
    workload::ParallelConfig& p = plan.job.parallel;
    p.tp = static_cast<int>(key.tp);
    p.cp = static_cast<int>(key.cp);
    p.microbatch_size = static_cast<int>(key.mbs);
    p.seq_len = static_cast<int>(key.seq);
    plan.job.name = job_label(key);
    if (!by_key.emplace(key, std::move(plan)).second) plans.fail(r, plans.require_column("plan"), "plan given twice");
    order.push_back(key);
  }

  // Clocks, placed by (stage, position).
  std::map<Key, std::map<std::pair<long, long>, std::pair<PlannedClock, std::size_t>>> placed;
  const std::size_t stage_col = clocks.require_column("stage"), pos_col = clocks.require_column("position");
  const std::size_t ins_col = clocks.require_column("instruction"), mb_col = clocks.require_column("microbatch");
  const std::size_t freq_col = clocks.require_column("freq_mhz");
  for (std::size_t r = 0; r < clocks.rows(); ++r) {
    Key key = read_key(clocks, r);
    if (!by_key.contains(key)) clocks.fail(r, clocks.require_column("plan"), fmt::format("plan {} is not in {}", key.plan, plans.source()));
    PlannedClock c;
    auto type = schedule::parse_instruction_type(clocks.text(r, ins_col));
    if (!type) clocks.fail(r, ins_col, "expected forward or backward");
    c.type = *type;
    c.microbatch = static_cast<int>(clocks.integer(r, mb_col));
    if (c.microbatch < 0) clocks.fail(r, mb_col, "microbatch must be 0 or more");
    c.freq_mhz = clocks.positive(r, freq_col);
    long stage = clocks.integer(r, stage_col), position = clocks.integer(r, pos_col);
    if (stage < 0 || position < 0) clocks.fail(r, stage < 0 ? stage_col : pos_col, "must be 0 or more");
    if (!placed[key].emplace(std::pair{stage, position}, std::pair{c, r}).second) {
      clocks.fail(r, pos_col, "(stage, position) given twice");
    }
  }

  // The artifact's plans come from the Kareus evaluation: a plan of one of its configurations
  // runs with that configuration's training settings (its hidden dropout).
  const std::vector<Job> evaluation = planner::evaluation_configs();
  std::vector<ReferencePlan> out;
  for (const Key& key : order) {
    ReferencePlan plan = std::move(by_key.at(key));
    for (const Job& job : evaluation) {
      const workload::ParallelConfig& e = job.parallel;
      if (job.model.name == plan.job.model.name && e.tp == plan.job.parallel.tp && e.cp == plan.job.parallel.cp &&
          e.microbatch_size == plan.job.parallel.microbatch_size && e.seq_len == plan.job.parallel.seq_len) {
        plan.job.parallel.hidden_dropout = e.hidden_dropout;
      }
    }
    auto found = placed.find(key);
    if (found == placed.end()) {
      throw InputError({plan.source, 0, 0, "plan"}, fmt::format("{} has no clocks in {}", plan.label, clocks.source()));
    }
    int microbatches = 0;
    for (const auto& [where, entry] : found->second) {
      const auto [stage, position] = where;
      if (static_cast<std::size_t>(stage) >= plan.stages.size()) plan.stages.resize(static_cast<std::size_t>(stage) + 1);
      auto& list = plan.stages[static_cast<std::size_t>(stage)];
      if (static_cast<long>(list.size()) != position) clocks.fail(entry.second, pos_col, "positions of a stage must run 0, 1, 2, ...");
      list.push_back(entry.first);
      microbatches = std::max(microbatches, entry.first.microbatch + 1);
    }
    workload::ParallelConfig& p = plan.job.parallel;
    p.pp = static_cast<int>(plan.stages.size());
    p.microbatches = microbatches;
    try {
      p = workload::validated(plan.job.model, p);
    } catch (const InputError& e) {
      throw InputError({plan.source, 0, 0, "tp"}, fmt::format("{}: {}", plan.label, e.what()));
    }
    check_order(plan);
    out.push_back(std::move(plan));
  }
  return out;
}

std::vector<ReferencePlan> read_kareus_plans(const std::filesystem::path& path) {
  std::vector<ReferencePlan> out;
  // Each plan taken as it is read and then dropped: a long pipeline's set is gigabytes whole.
  plan::read_plan_set(path, [&](std::size_t i, const std::string& where, plan::Plan& p) {
    plan::validate(p, where);
    const std::string method_name = p.source.is_object() ? p.source.value("method", "") : "";
    const std::string job_name = p.source.is_object() ? p.source.value("job", "") : "";
    ReferencePlan plan;
    plan.source = where;
    auto m = std::find_if(std::begin(planner::kAllMethods), std::end(planner::kAllMethods),
                          [&](Method x) { return to_string(x) == method_name && x != Method::kKareus; });
    if (m == std::end(planner::kAllMethods)) {
      throw InputError({where, 0, 0, "source.method"},
                       fmt::format("method '{}': only Megatron-LM, Perseus and Nanobatching+Perseus plans are checked "
                                   "(a Kareus plan's knobs differ per partition)",
                                   method_name));
    }
    plan.method = *m;
    plan.job = planner::evaluation_config(job_name);
    plan.job.parallel.microbatches = p.num_microbatches;
    plan.job.parallel = workload::validated(plan.job.model, plan.job.parallel);
    plan.label = fmt::format("{} {}", job_name, i);
    plan.time_s = p.time_s;
    plan.energy_j = p.energy_j;
    for (const auto& stage : p.stages) {
      auto& list = plan.stages.emplace_back();
      for (const auto& ins : stage) list.push_back({ins.type, ins.microbatch, ins.freq_mhz});
    }
    if (static_cast<int>(plan.stages.size()) != plan.job.parallel.pp) {
      throw InputError({where, 0, 0, "stages"}, fmt::format("{} stages where {} has {}", plan.stages.size(), job_name,
                                                           plan.job.parallel.pp));
    }
    check_order(plan);
    out.push_back(std::move(plan));
    p.stages = {};
  });
  return out;
}

double PlanCheckRow::time_err() const { return model_time_s / plan->time_s - 1; }
double PlanCheckRow::energy_err() const { return model_energy_j / plan->energy_j - 1; }

PlanCheck check_plans(const std::vector<ReferencePlan>& plans, const evaluate::Evaluator& evaluator,
                      const PlannerOptions& options, bool frontiers) {
  PlanCheck check;
  std::map<std::pair<Method, std::string>, pipeline::OptionTable> tables;
  std::map<std::pair<Method, std::string>, const ReferencePlan*> fastest;
  const double p_static_w = options.p_static_w.value_or(evaluator.gpu().static_power_w);
  for (const ReferencePlan& plan : plans) {
    const auto group = std::pair{plan.method, plan.job.name};
    auto it = tables.find(group);
    if (it == tables.end()) it = tables.emplace(group, baseline_option_table(plan.method, plan.job, evaluator, options)).first;
    const pipeline::OptionTable& table = it->second;
    auto schedule = schedule::PipelineSchedule::make(schedule::ScheduleKind::k1F1B, plan.job.parallel.pp,
                                                     plan.job.parallel.microbatches);
    schedule::InstructionDag dag(schedule);
    std::vector<std::uint16_t> assignment(dag.num_nodes());
    for (int s = 0; s < plan.job.parallel.pp; ++s) {
      const auto& list = plan.stages[static_cast<std::size_t>(s)];
      for (std::size_t i = 0; i < list.size(); ++i) {
        const auto& options_here = table.at(s, list[i].type);
        auto o = std::find_if(options_here.begin(), options_here.end(),
                              [&](const pipeline::StageOption& x) { return std::abs(x.freq_mhz - list[i].freq_mhz) < 1e-6; });
        if (o == options_here.end()) {
          throw InputError({plan.source, 0, 0, "freq_mhz"},
                           fmt::format("{}: stage {} clock {} MHz is not on the clock grid", plan.label, s, list[i].freq_mhz));
        }
        assignment[dag.node_of(s, i)] = static_cast<std::uint16_t>(o - options_here.begin());
      }
    }
    TimeEnergy te = pipeline::evaluate_assignment(table, dag, assignment, p_static_w);
    check.rows.push_back({&plan, te.time_s, te.energy_j});
    auto& f = fastest[group];
    if (!f || plan.time_s < f->time_s) f = &plan;
  }

  std::vector<double> time_errs, energy_errs;
  for (const auto& r : check.rows) time_errs.push_back(std::abs(r.time_err())), energy_errs.push_back(std::abs(r.energy_err()));
  struct Missing {
    std::vector<double> times, powers;
    const PlanCheckRow *fastest = nullptr, *slowest = nullptr;
  };
  std::map<std::pair<std::string, Method>, Missing> missing;
  for (const auto& r : check.rows) {
    Missing& m = missing[{r.plan->job.name, r.plan->method}];
    if (!m.fastest || r.plan->time_s < m.fastest->plan->time_s) m.fastest = &r;
    if (!m.slowest || r.plan->time_s > m.slowest->plan->time_s) m.slowest = &r;
    const double dt = r.plan->time_s - r.model_time_s, de = r.plan->energy_j - r.model_energy_j;
    if (std::abs(dt) <= 0.01 * r.plan->time_s) continue;
    m.times.push_back(dt);
    m.powers.push_back(de / dt / r.plan->job.parallel.pp);
  }
  for (const auto& [key, m] : missing) {
    if (m.times.empty()) continue;
    check.missing.push_back({key.first, key.second, median(m.times), median(m.powers), m.times.size(),
                             m.fastest->plan->time_s / m.fastest->model_time_s,
                             m.slowest->plan->time_s / m.slowest->model_time_s});
  }
  auto max = [](const std::vector<double>& v) { return v.empty() ? 0.0 : *std::max_element(v.begin(), v.end()); };
  check.time_err_median = median(time_errs);
  check.time_err_max = max(time_errs);
  check.energy_err_median = median(energy_errs);
  check.energy_err_max = max(energy_errs);

  if (frontiers) {
    for (const auto& [group, plan] : fastest) {
      if (group.first == Method::kMegatron) continue;
      planner::MethodResult result = run_method(group.first, plan->job, evaluator, options);
      check.frontiers.push_back({group.first, group.second, plan->time_s, plan->energy_j,
                                 result.frontier.front().time_s, result.frontier.front().energy_j});
    }
  }
  return check;
}

std::string summary_line(const PlanCheck& check) {
  return fmt::format("time_err_median={:.2f} time_err_max={:.2f} energy_err_median={:.2f} energy_err_max={:.2f}",
                     100 * check.time_err_median, 100 * check.time_err_max, 100 * check.energy_err_median,
                     100 * check.energy_err_max);
}

std::map<std::string, OverlapGain> overlap_gains(const PlanCheck& check) {
  std::map<std::string, std::map<Method, const FrontierCheck*>> by_job;
  for (const FrontierCheck& f : check.frontiers) by_job[f.job][f.method] = &f;
  auto gain_pct = [](double perseus_s, double nanobatched_s) { return 100 * (perseus_s - nanobatched_s) / perseus_s; };
  std::map<std::string, OverlapGain> gains;
  for (const auto& [job, methods] : by_job) {
    auto p = methods.find(Method::kPerseus), n = methods.find(Method::kNanobatching);
    if (p == methods.end() || n == methods.end()) continue;
    gains[job] = {gain_pct(p->second->reference_fastest_time_s, n->second->reference_fastest_time_s),
                  gain_pct(p->second->model_fastest_time_s, n->second->model_fastest_time_s)};
  }
  return gains;
}

TimeScaleFit fit_time_scale(const PlanCheck& check, double checked_time_scale) {
  std::vector<double> ratios;
  for (const PlanCheckRow& r : check.rows) {
    if (r.plan->method == Method::kMegatron || r.plan->method == Method::kPerseus) {
      ratios.push_back(r.plan->time_s / r.model_time_s);
    }
  }
  if (ratios.empty()) {
    throw InputError("fitting a time scale needs measured plans of Megatron-LM or Perseus (methods that overlap "
                     "nothing); the plans given are all nanobatched");
  }
  return {checked_time_scale * median(ratios), ratios.size()};
}

}  // namespace kareus::calibrate
