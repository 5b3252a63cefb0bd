// Measured plans on an evaluator: the artifact's files read whole, bad rows named by file:line, and
// a plan's model time and energy checked against the planner's own frontier for a plan it can
// also make (every instruction at the highest clock is Megatron-LM's plan).
#include "kareus/calibrate/plan_check.hpp"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <filesystem>
#include <fstream>

#include "kareus/core/error.hpp"
#include "kareus/evaluate/simulated.hpp"
#include "kareus/plan/plan.hpp"
#include "kareus/schedule/schedule.hpp"

namespace kareus::calibrate {
namespace {

const std::filesystem::path kData = std::filesystem::path(KAREUS_DATA_DIR) / "kareus-osdi26";

std::filesystem::path write(const std::string& name, const std::string& text) {
  auto path = std::filesystem::temp_directory_path() / ("kareus-plan-check-" + std::to_string(::getpid()) + name);
  std::ofstream(path) << text;
  return path;
}

TEST(ArtifactPlans, AllPlansOfBothMethodsAreRead) {
  auto plans = read_artifact_plans(kData / "plans.csv", kData / "plan_clocks.csv");
  ASSERT_EQ(plans.size(), 85u);
  int perseus = 0;
  for (const auto& p : plans) {
    perseus += p.method == Method::kPerseus;
    ASSERT_EQ(p.stages.size(), 2u);
    EXPECT_EQ(p.job.parallel.microbatches, 8);
    for (const auto& stage : p.stages) EXPECT_EQ(stage.size(), 16u) << p.label;
    EXPECT_EQ(p.job.parallel.layers_per_stage, (std::vector<int>{15, 13}));
    // The evaluation configuration's training settings: its hidden dropout.
    EXPECT_EQ(p.job.parallel.hidden_dropout, 0.1) << p.label;
  }
  EXPECT_EQ(perseus, 45);
}

TEST(ArtifactPlans, AllClocksAtTheTopIsMegatronsPlan) {
  auto plans = read_artifact_plans(kData / "plans.csv", kData / "plan_clocks.csv");
  evaluate::Evaluator evaluator = evaluate::make_simulated_evaluator(hardware::load_gpu_preset("a100-sxm4-40gb"));
  for (std::size_t i : {std::size_t{0}, plans.size() - 1}) {
    ReferencePlan top = plans[i];
    top.method = Method::kPerseus;
    for (auto& stage : top.stages)
      for (auto& c : stage) c.freq_mhz = 1410;
    PlanCheck check = check_plans({top}, evaluator, {}, false);
    planner::MethodResult megatron = run_method(Method::kMegatron, top.job, evaluator, {});
    ASSERT_EQ(check.rows.size(), 1u);
    EXPECT_NEAR(check.rows[0].model_time_s, megatron.frontier.front().time_s, 1e-9) << top.label;
    EXPECT_NEAR(check.rows[0].model_energy_j, megatron.frontier.front().energy_j, 1e-6) << top.label;
  }
}

TEST(ArtifactPlans, SlowerClocksNeverShortenAPlan) {
  auto plans = read_artifact_plans(kData / "plans.csv", kData / "plan_clocks.csv");
  evaluate::Evaluator evaluator = evaluate::make_simulated_evaluator(hardware::load_gpu_preset("a100-sxm4-40gb"));
  ReferencePlan slow = plans.front();
  for (auto& stage : slow.stages)
    for (auto& c : stage) c.freq_mhz = std::max(900.0, c.freq_mhz - 90);
  PlanCheck check = check_plans({plans.front(), slow}, evaluator, {}, false);
  EXPECT_GT(check.rows[1].model_time_s, check.rows[0].model_time_s);
}

// What the host issues only ever adds: under any engine (host costs up to milliseconds a call, so
// that some instructions turn host-bound), every measured plan of both methods takes at least the
// time and the energy the GPU alone gives it, and more host cost never less.
RC_GTEST_PROP(ArtifactPlans, HostCostNeverShortensAPlanNorSavesEnergy, ()) {
  static const auto plans = read_artifact_plans(kData / "plans.csv", kData / "plan_clocks.csv");
  static const evaluate::Evaluator evaluator =
      evaluate::make_simulated_evaluator(hardware::load_gpu_preset("a100-sxm4-40gb"));
  static const PlanCheck alone = check_plans({plans.front(), plans.back()}, evaluator, {}, false);
  PlannerOptions options;
  engine::HostCosts& h = options.engine.host;
  h.partition_op_s = *rc::gen::inRange(0, 2000) * 1e-6;
  h.layer_op_s = *rc::gen::inRange(0, 2000) * 1e-6;
  h.collective_call_s = *rc::gen::inRange(0, 500) * 1e-6;
  h.event_s = *rc::gen::inRange(0, 50) * 1e-6;
  h.partition_s = *rc::gen::inRange(0, 500) * 1e-6;
  h.instruction_s = *rc::gen::inRange(0, 5000) * 1e-6;
  h.launch_latency_s = *rc::gen::inRange(0, 50) * 1e-6;
  options.engine.sync_per_instruction = *rc::gen::arbitrary<bool>();
  const PlanCheck hosted = check_plans({plans.front(), plans.back()}, evaluator, options, false);
  h.partition_op_s *= 2, h.layer_op_s *= 2, h.collective_call_s *= 2;
  const PlanCheck more = check_plans({plans.front(), plans.back()}, evaluator, options, false);
  for (std::size_t i = 0; i < 2; ++i) {
    RC_ASSERT(hosted.rows[i].model_time_s >= alone.rows[i].model_time_s - 1e-12);
    RC_ASSERT(hosted.rows[i].model_energy_j >= alone.rows[i].model_energy_j - 1e-9);
    RC_ASSERT(more.rows[i].model_time_s >= hosted.rows[i].model_time_s - 1e-12);
    RC_ASSERT(more.rows[i].model_energy_j >= hosted.rows[i].model_energy_j - 1e-9);
  }
  RC_ASSERT(plans.front().method != plans.back().method);
}

// How the missing time scales: measured times a fixed multiple of the model's give the same ratio at
// the fastest and the slowest plan; a fixed time added to each gives a ratio falling at the slow end.
TEST(ArtifactPlans, MissingWorkSaysWhetherTheMissingTimeScalesWithTheGpusTime) {
  auto plans = read_artifact_plans(kData / "plans.csv", kData / "plan_clocks.csv");
  evaluate::Evaluator evaluator = evaluate::make_simulated_evaluator(hardware::load_gpu_preset("a100-sxm4-40gb"));
  std::vector<ReferencePlan> frontier;
  for (const auto& p : plans) {
    if (p.method == plans.front().method && p.job.name == plans.front().job.name) frontier.push_back(p);
  }
  ASSERT_GE(frontier.size(), 3u);
  const PlanCheck model = check_plans(frontier, evaluator, {}, false);
  auto measured_as = [&](auto time_of) {
    std::vector<ReferencePlan> out = frontier;
    for (std::size_t i = 0; i < out.size(); ++i) {
      out[i].time_s = time_of(model.rows[i].model_time_s);
      out[i].energy_j = 1.1 * model.rows[i].model_energy_j;
    }
    return check_plans(out, evaluator, {}, false);
  };
  const PlanCheck scaled = measured_as([](double t) { return 1.2 * t; });
  ASSERT_EQ(scaled.missing.size(), 1u);
  EXPECT_NEAR(scaled.missing[0].time_ratio_fastest, 1.2, 1e-9);
  EXPECT_NEAR(scaled.missing[0].time_ratio_slowest, 1.2, 1e-9);
  const PlanCheck offset = measured_as([](double t) { return t + 0.5; });
  ASSERT_EQ(offset.missing.size(), 1u);
  EXPECT_GT(offset.missing[0].time_ratio_fastest, offset.missing[0].time_ratio_slowest + 0.01);
  EXPECT_NEAR(offset.missing[0].time_s, 0.5, 1e-9);
}

// The time scale fit: on the GPU at scale 1, the median of measured over model time of the
// Perseus plans; under the fitted scale that median is 1 (a uniform scale stretches every plan
// alike), the nanobatched plans play no part in it, and the bundled preset holds what the fit
// gives on the bundled plans under the engine its record names.
TEST(ArtifactPlans, TheFittedTimeScaleHoldsTheMedianPerseusPlanAndIgnoresTheNanobatchedOnes) {
  const auto plans = read_artifact_plans(kData / "plans.csv", kData / "plan_clocks.csv");
  const hardware::GpuSpec preset = hardware::load_gpu_preset("a100-sxm4-40gb");
  hardware::GpuSpec gpu = preset;
  gpu.time_scale = 1;
  PlannerOptions measured_through;
  measured_through.engine = engine::load_engine(preset.calibration.time_scale->engine);
  const TimeScaleFit preset_fit =
      fit_time_scale(check_plans(plans, evaluate::make_simulated_evaluator(gpu), measured_through, false), 1);
  EXPECT_NEAR(preset_fit.time_scale, preset.time_scale, 1e-9 * preset.time_scale);
  const PlanCheck at_one = check_plans(plans, evaluate::make_simulated_evaluator(gpu), {}, false);
  const TimeScaleFit fit = fit_time_scale(at_one, 1);
  EXPECT_EQ(fit.plans, 45u);

  std::vector<ReferencePlan> perseus, nanobatched;
  for (const auto& p : plans) (p.method == Method::kPerseus ? perseus : nanobatched).push_back(p);
  const TimeScaleFit perseus_only =
      fit_time_scale(check_plans(perseus, evaluate::make_simulated_evaluator(gpu), {}, false), 1);
  EXPECT_EQ(perseus_only.time_scale, fit.time_scale);
  EXPECT_THROW(fit_time_scale(check_plans(nanobatched, evaluate::make_simulated_evaluator(gpu), {}, false), 1),
               InputError);

  gpu.time_scale = fit.time_scale;
  const PlanCheck fitted = check_plans(perseus, evaluate::make_simulated_evaluator(gpu), {}, false);
  EXPECT_NEAR(fit_time_scale(fitted, fit.time_scale).time_scale, fit.time_scale, 1e-9);
  std::size_t longer = 0;
  for (const auto& r : fitted.rows) longer += r.plan->time_s > r.model_time_s;
  EXPECT_LE(longer, perseus.size() / 2 + 1);
  EXPECT_GE(longer, perseus.size() / 2 - 1);
  // At scale 1 the model ran short of most of them.
  std::size_t longer_at_one = 0;
  for (const auto& r : at_one.rows) longer_at_one += r.plan->method == Method::kPerseus && r.plan->time_s > r.model_time_s;
  EXPECT_GT(longer_at_one, perseus.size() * 3 / 4);
}

TEST(ArtifactPlans, BadRowsAreNamedByFileAndLine) {
  const std::string header = "method,model,tp,cp,mbs,seq,plan,time_s,energy_j\n";
  auto plans = write("p.csv", header + "Perseus,llama-3.2-3b,8,1,8,4096,1,5.0,2000\n");
  auto clocks = write("c.csv",
                      "method,model,tp,cp,mbs,seq,plan,stage,position,instruction,microbatch,freq_mhz\n"
                      "Perseus,llama-3.2-3b,8,1,8,4096,2,0,0,forward,0,1410\n");
  try {
    read_artifact_plans(plans, clocks);
    FAIL() << "a clock row of an unknown plan was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("c.csv:2"), std::string::npos) << e.what();
  }
  auto bad_method = write("m.csv", header + "Zeus,llama-3.2-3b,8,1,8,4096,1,5.0,2000\n");
  EXPECT_THROW(read_artifact_plans(bad_method, clocks), InputError);
  // A stage whose instructions are not in 1F1B order.
  auto swapped = write("s.csv",
                       "method,model,tp,cp,mbs,seq,plan,stage,position,instruction,microbatch,freq_mhz\n"
                       "Perseus,llama-3.2-3b,8,1,8,4096,1,0,0,backward,0,1410\n"
                       "Perseus,llama-3.2-3b,8,1,8,4096,1,0,1,forward,0,1410\n"
                       "Perseus,llama-3.2-3b,8,1,8,4096,1,1,0,forward,0,1410\n"
                       "Perseus,llama-3.2-3b,8,1,8,4096,1,1,1,backward,0,1410\n");
  EXPECT_THROW(read_artifact_plans(plans, swapped), InputError);
}

// Baseline plans in our own plan format, as a set and alone: each reads as the plan it holds, named
// by its place in the file, and a Kareus plan among them stops the read at that plan.
TEST(KareusPlans, ASetOfBaselinePlansReadsPlanByPlan) {
  const std::string job_name = planner::evaluation_config_names().front();
  const Job job = planner::evaluation_config(job_name);
  const int stages = job.parallel.pp, microbatches = job.parallel.microbatches;
  const auto order = schedule::PipelineSchedule::make(schedule::ScheduleKind::k1F1B, stages, microbatches);
  auto make = [&](Method method, double freq_mhz, double time_s) {
    plan::Plan p;
    p.num_stages = stages;
    p.num_microbatches = microbatches;
    p.p_blocking_w = 85;
    p.unit_time_s = 1e-3;
    p.energy_scope = plan::energy_scope_for(stages);
    p.time_s = time_s;
    p.energy_j = 1000 * time_s;
    p.source = {{"method", std::string(planner::to_string(method))}, {"job", job_name}};
    for (int s = 0; s < stages; ++s) {
      auto& list = p.stages.emplace_back();
      for (const schedule::Instruction& i : order.stage_order(s)) {
        list.push_back({i.type, i.microbatch, freq_mhz + 15 * s, SharedJson(), 0.01, 2.0});
      }
    }
    return p;
  };
  const std::vector<plan::Plan> set{make(Method::kPerseus, 1200, 5.0), make(Method::kMegatron, 1410, 4.5),
                                    make(Method::kNanobatching, 1005, 5.5)};
  const auto path = write("set.json", "");
  plan::write_plan_set(set, {0, 4, 9}, path);
  const std::vector<ReferencePlan> read = read_kareus_plans(path);
  ASSERT_EQ(read.size(), set.size());
  for (std::size_t k = 0; k < set.size(); ++k) {
    EXPECT_EQ(read[k].source, plan::plan_source(path, k));
    EXPECT_EQ(planner::to_string(read[k].method), set[k].source.at("method").get<std::string>());
    EXPECT_EQ(read[k].job.name, job.name);
    EXPECT_EQ(read[k].time_s, set[k].time_s);
    EXPECT_EQ(read[k].energy_j, set[k].energy_j);
    ASSERT_EQ(read[k].stages.size(), set[k].stages.size());
    for (std::size_t s = 0; s < set[k].stages.size(); ++s) {
      ASSERT_EQ(read[k].stages[s].size(), set[k].stages[s].size());
      for (std::size_t i = 0; i < set[k].stages[s].size(); ++i) {
        EXPECT_EQ(read[k].stages[s][i].type, set[k].stages[s][i].type);
        EXPECT_EQ(read[k].stages[s][i].microbatch, set[k].stages[s][i].microbatch);
        EXPECT_EQ(read[k].stages[s][i].freq_mhz, set[k].stages[s][i].freq_mhz);
      }
    }
  }

  const auto alone = write("alone.json", "");
  plan::write_plan(set[1], alone);
  const std::vector<ReferencePlan> one = read_kareus_plans(alone);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].source, alone.string());
  EXPECT_EQ(one[0].method, Method::kMegatron);

  std::vector<plan::Plan> with_kareus = set;
  with_kareus[2].source["method"] = "Kareus";
  plan::write_plan_set(with_kareus, {0, 4, 9}, path);
  try {
    read_kareus_plans(path);
    FAIL() << "a Kareus plan was read as a baseline's";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(plan::plan_source(path, 2) + ": field 'source.method'"), std::string::npos)
        << e.what();
  }
  const auto cut = write("cut.json", "{\"format\": \"kareus-plan-set\", \"plans\": [{\"form");
  try {
    read_kareus_plans(cut);
    FAIL() << "a set cut short was read";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("not valid JSON: [json.exception.parse_error"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kareus::calibrate
