#include "kareus/planner/planner.hpp"

#include <gtest/gtest.h>

#include "kareus/core/error.hpp"
#include "kareus/evaluate/simulated.hpp"
#include "kareus/planner/make_plan.hpp"

namespace kareus::planner {
namespace {

// Every point of `other` has a Kareus point no slower and no costlier.
void expect_weak_dominance(const std::vector<TimeEnergy>& kareus, const std::vector<TimeEnergy>& other,
                           const std::string& what) {
  for (const TimeEnergy& p : other) {
    auto energy = min_energy_within_time(kareus, p.time_s * (1 + 1e-9));
    ASSERT_TRUE(energy.has_value()) << what << ": nothing as fast as " << p.time_s;
    EXPECT_LE(*energy, p.energy_j * (1 + 1e-9)) << what << " at t=" << p.time_s;
  }
}

class EvaluationConfigs : public ::testing::TestWithParam<std::string> {};

TEST_P(EvaluationConfigs, KareusWeaklyDominatesTheBaselines) {
  Job job = evaluation_config(GetParam());
  evaluate::Evaluator evaluator = evaluate::make_simulated_evaluator(hardware::load_gpu_preset("a100-sxm4-40gb"));
  PlannerOptions options;
  options.search.mode = search::SearchMode::kExhaustive;
  std::vector<MethodResult> results;
  for (Method m : kAllMethods) results.push_back(run_method(m, job, evaluator, options));
  const auto kareus = results[3].points();
  ASSERT_FALSE(kareus.empty());
  EXPECT_EQ(results[0].frontier.size(), 1u) << "Megatron-LM runs one plan";
  expect_weak_dominance(kareus, results[1].points(), "Perseus");
  expect_weak_dominance(kareus, results[2].points(), "Nanobatching+Perseus");
  // Perseus runs every clock over the sequential schedule, so it includes Megatron-LM's plan.
  expect_weak_dominance(results[1].points(), results[0].points(), "Megatron-LM vs Perseus");
  // Plans carry each partition's knobs and replay to the frontier's figures.
  plan::Plan p = make_plan(results[3], job, results[3].frontier.front());
  EXPECT_NEAR(p.time_s, kareus.front().time_s, 1e-12);
  ASSERT_TRUE(p.stages[0][0].knob->contains("partitions"));
}

INSTANTIATE_TEST_SUITE_P(Kareus, EvaluationConfigs, ::testing::ValuesIn(evaluation_config_names()),
                         [](const auto& param_info) {
                           std::string name = param_info.param;
                           for (char& c : name) if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return name;
                         });

// The Bayesian search measures a fraction of each grid, and not the baselines' knobs unless told:
// the planner adds those (the comparison measures them anyway), so the dominance holds there too.
TEST(EvaluationConfigs, MoboSearchStillWeaklyDominatesTheBaselines) {
  Job job = evaluation_config("qwen3-1.7b-cp2tp4-mbs8-seq4096");
  evaluate::Evaluator evaluator = evaluate::make_simulated_evaluator(hardware::load_gpu_preset("a100-sxm4-40gb"));
  PlannerOptions options;
  options.search.mode = search::SearchMode::kMobo;
  options.search.seed = 7;
  MethodResult kareus = run_method(Method::kKareus, job, evaluator, options);
  EXPECT_LT(kareus.measurements, kareus.grid_knobs) << "MOBO measured the whole grid";
  expect_weak_dominance(kareus.points(), run_method(Method::kPerseus, job, evaluator, options).points(), "Perseus");
  expect_weak_dominance(kareus.points(), run_method(Method::kNanobatching, job, evaluator, options).points(),
                        "Nanobatching+Perseus");
}

// The baselines Kareus compares against reuse its search's measurements: with exhaustive search
// every knob of the grid is measured exactly once.
TEST(EvaluationConfigs, KareusMeasuresEachKnobOnce) {
  Job job = evaluation_config("qwen3-1.7b-tp8-mbs8-seq4096");
  evaluate::Evaluator evaluator = evaluate::make_simulated_evaluator(hardware::load_gpu_preset("a100-sxm4-40gb"));
  PlannerOptions options;
  options.search.mode = search::SearchMode::kExhaustive;
  const std::int64_t before = evaluator.calls();
  MethodResult kareus = run_method(Method::kKareus, job, evaluator, options);
  EXPECT_EQ(static_cast<std::size_t>(evaluator.calls() - before), kareus.grid_knobs);
  EXPECT_EQ(kareus.measurements, kareus.grid_knobs);
}

TEST(EvaluationConfigs, UnknownNamesListTheKnownOnes) {
  try {
    evaluation_config("gpt-5");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("qwen3-1.7b-cp2tp4-mbs16-seq4096"), std::string::npos);
  }
}

TEST(EvaluationConfigs, TheDataFileHoldsThePapersTenInOrder) {
  const std::vector<std::string> names = evaluation_config_names();
  ASSERT_EQ(names.size(), 10u);
  EXPECT_EQ(names.front(), "llama3.2-3b-tp8-mbs8-seq4096");
  EXPECT_EQ(names.back(), "qwen3-1.7b-cp2tp4-mbs16-seq4096");
  Job job = evaluation_config("llama3.2-3b-cp2tp4-mbs16-seq4096");
  EXPECT_EQ(job.model.name, "llama-3.2-3b");
  EXPECT_EQ(job.parallel.tp, 4);
  EXPECT_EQ(job.parallel.cp, 2);
  EXPECT_EQ(job.parallel.pp, 2);
  EXPECT_EQ(job.parallel.microbatch_size, 16);
  EXPECT_EQ(job.parallel.seq_len, 4096);
  EXPECT_EQ(job.parallel.microbatches, 8);
  EXPECT_EQ(job.parallel.layers_per_stage, (std::vector<int>{15, 13}));
}

// A malformed document is an InputError naming the JSON path at fault.
TEST(EvaluationConfigs, BadDocumentsNameTheFieldAtFault) {
  const nlohmann::json good = nlohmann::json::parse(R"({
    "format": "kareus-evaluation-configs", "version": 1, "common": {"pp": 2, "microbatches": 8},
    "configs": [{"name": "a", "model": "llama-3.2-3b", "tp": 8, "cp": 1, "mbs": 8, "seq": 4096}]})");
  ASSERT_EQ(parse_evaluation_configs(good, "f.json").size(), 1u);
  auto expect_error = [&](nlohmann::json doc, const std::string& field) {
    try {
      parse_evaluation_configs(doc, "f.json");
      ADD_FAILURE() << "accepted " << doc.dump();
    } catch (const InputError& e) {
      EXPECT_EQ(e.location().field, field) << e.what();
      EXPECT_EQ(e.location().file, "f.json");
    }
  };
  nlohmann::json doc = good;
  doc["format"] = "kareus-plan";
  expect_error(doc, "format");
  doc = good;
  doc["configs"][0]["tp"] = 0;
  expect_error(doc, "configs[0].tp");
  doc = good;
  doc["configs"][0].erase("seq");
  expect_error(doc, "configs[0].seq");
  doc = good;
  doc["configs"].push_back(good["configs"][0]);
  expect_error(doc, "configs[1].name");
  doc = good;
  doc["common"]["microbatches"] = "8";
  expect_error(doc, "common.microbatches");
  doc = good;
  doc["configs"][0]["tp"] = 7;  // does not divide the heads
  expect_error(doc, "configs[0].name");
  doc = good;
  doc["common"]["hidden_dropout"] = "0.1";
  expect_error(doc, "common.hidden_dropout");
  doc = good;
  doc["common"]["hidden_dropout"] = 1.0;
  expect_error(doc, "configs[0].name");
  doc = good;
  doc["common"]["hidden_dropout"] = 0.1;
  EXPECT_EQ(parse_evaluation_configs(doc, "f.json")[0].parallel.hidden_dropout, 0.1);
  EXPECT_EQ(parse_evaluation_configs(good, "f.json")[0].parallel.hidden_dropout, 0.0);
  // The Kareus evaluation trained with the artifact's hidden_dropout: 0.1.
  EXPECT_EQ(evaluation_config("llama3.2-3b-tp8-mbs8-seq4096").parallel.hidden_dropout, 0.1);
}

}  // namespace
}  // namespace kareus::planner
