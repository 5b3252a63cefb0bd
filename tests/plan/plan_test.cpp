// Tests of the plan: make_plan from a frontier point, the kareus-plan JSON round trip, and JSON
// errors that name the path at fault.
#include "kareus/plan/plan.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "kareus/core/error.hpp"
#include "kareus/planner/make_plan.hpp"  // the real producer of plans

namespace kareus::plan {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using pipeline::FrontierPoint;
using schedule::InstructionDag;
using schedule::InstructionType;
using pipeline::OptionTable;
using schedule::PipelineSchedule;
using schedule::ScheduleKind;
using pipeline::StageOption;
using planner::make_plan;
using planner::PlanContext;

::testing::AssertionResult Contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "\"" << text << "\" does not contain \"" << part << "\"";
}

// 2 stages, 2 options per (stage, type); the fast forward of each stage carries a knob object.
OptionTable small_table() {
  OptionTable table;
  table.options.resize(2);
  for (int s = 0; s < 2; ++s) {
    double k = 1.0 + 0.1 * s;
    table.at(s, InstructionType::kForward) = {
        StageOption{1410, 0.010 * k, 3.0 * k, SharedJson(json{{"sm_clock", 1410}, {"mode", "fast"}, {"stage", s}})},
        StageOption{1005, 0.013 * k, 2.5 * k, nullptr},
    };
    table.at(s, InstructionType::kBackward) = {
        StageOption{1395, 0.021 * k, 6.0 * k, nullptr},
        StageOption{900, 0.030 * k, 4.5 * k, SharedJson(json{{"sm_clock", 900}})},
    };
  }
  return table;
}

PlanContext small_context() {
  PlanContext context;
  context.schedule = ScheduleKind::k1F1B;
  context.num_microbatches = 3;
  context.p_blocking_w = 83.64;
  context.unit_time_s = 1e-3;
  context.source = json{{"profile", "small.csv"}, {"solver", "test"}};
  return context;
}

// An assignment mixing both options: node v takes option (v * 5 / 3) % 2.
FrontierPoint small_point(const InstructionDag& dag) {
  FrontierPoint point;
  point.planned_time_s = 0.2;
  point.time_s = 0.2015625;
  point.energy_j = 77.3125;
  point.model_energy_j = 76.0;
  for (std::size_t v = 0; v < dag.num_nodes(); ++v) {
    point.assignment.push_back(static_cast<std::uint16_t>((v * 5 / 3) % 2));
  }
  return point;
}

struct Fixture {
  OptionTable table = small_table();
  PipelineSchedule schedule = PipelineSchedule::make(ScheduleKind::k1F1B, 2, 3);
  InstructionDag dag{schedule};
  FrontierPoint point = small_point(dag);
  Plan plan = make_plan(table, dag, point, small_context());
};

class TempDir : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("kareus_plan_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  fs::path dir_;
};

// Runs plan_from_json on `j`, expects an InputError and returns it.
InputError plan_error(const json& j) {
  try {
    (void)plan_from_json(j, "plan.json");
  } catch (const InputError& e) {
    return e;
  }
  ADD_FAILURE() << "expected an InputError for " << j.dump();
  return InputError("none");
}

// ---------------------------------------------------------------------------------------------
// make_plan

TEST(MakePlan, HeaderFieldsComeFromContextAndPoint) {
  Fixture f;
  const Plan& plan = f.plan;
  EXPECT_EQ(plan.schedule, ScheduleKind::k1F1B);
  EXPECT_EQ(plan.num_stages, 2);
  EXPECT_EQ(plan.num_microbatches, 3);
  EXPECT_DOUBLE_EQ(plan.p_blocking_w, 83.64);
  EXPECT_DOUBLE_EQ(plan.unit_time_s, 1e-3);
  EXPECT_DOUBLE_EQ(plan.time_s, 0.2015625);
  EXPECT_DOUBLE_EQ(plan.energy_j, 77.3125);
  EXPECT_EQ(plan.source, small_context().source);
  EXPECT_EQ(plan.energy_scope, energy_scope_for(2));
  EXPECT_TRUE(Contains(plan.energy_scope, "2 GPUs"));
  EXPECT_TRUE(Contains(energy_scope_for(1), "1 GPU)"));
}

TEST(MakePlan, InstructionOrderFollowsTheSchedule) {
  Fixture f;
  ASSERT_EQ(f.plan.stages.size(), 2u);
  for (int s = 0; s < 2; ++s) {
    auto order = f.schedule.stage_order(s);
    const auto& planned = f.plan.stages[static_cast<std::size_t>(s)];
    ASSERT_EQ(planned.size(), order.size());
    ASSERT_EQ(planned.size(), 6u);
    for (std::size_t k = 0; k < order.size(); ++k) {
      EXPECT_EQ(planned[k].type, order[k].type) << "stage " << s << " position " << k;
      EXPECT_EQ(planned[k].microbatch, order[k].microbatch) << "stage " << s << " position " << k;
    }
  }
  // 1F1B with 2 stages and 3 microbatches, spelled out: stage 0 warms up with one forward.
  auto F = InstructionType::kForward;
  auto B = InstructionType::kBackward;
  std::vector<std::pair<InstructionType, int>> stage0 = {{F, 0}, {F, 1}, {B, 0}, {F, 2}, {B, 1}, {B, 2}};
  std::vector<std::pair<InstructionType, int>> stage1 = {{F, 0}, {B, 0}, {F, 1}, {B, 1}, {F, 2}, {B, 2}};
  for (std::size_t k = 0; k < 6; ++k) {
    EXPECT_EQ(f.plan.stages[0][k].type, stage0[k].first);
    EXPECT_EQ(f.plan.stages[0][k].microbatch, stage0[k].second);
    EXPECT_EQ(f.plan.stages[1][k].type, stage1[k].first);
    EXPECT_EQ(f.plan.stages[1][k].microbatch, stage1[k].second);
  }
}

TEST(MakePlan, EveryInstructionTakesItsAssignedOption) {
  Fixture f;
  std::size_t seen_knobs = 0, seen_null = 0;
  for (int s = 0; s < 2; ++s) {
    for (std::size_t k = 0; k < f.plan.stages[static_cast<std::size_t>(s)].size(); ++k) {
      const PlannedInstruction& ins = f.plan.stages[static_cast<std::size_t>(s)][k];
      std::size_t node = f.dag.node_of(s, k);
      ASSERT_EQ(f.dag.instruction(node).stage, s);
      const StageOption& option = f.table.at(s, ins.type).at(f.point.assignment[node]);
      EXPECT_EQ(ins.freq_mhz, option.freq_mhz) << "stage " << s << " position " << k;
      EXPECT_EQ(ins.time_s, option.time_s) << "stage " << s << " position " << k;
      EXPECT_EQ(ins.energy_j, option.energy_j) << "stage " << s << " position " << k;
      EXPECT_EQ(ins.knob, option.knob) << "stage " << s << " position " << k;
      // Shared with the option, not copied: a front's plans take the same options many times.
      EXPECT_EQ(&*ins.knob, &*option.knob) << "stage " << s << " position " << k;
      (ins.knob.is_null() ? seen_null : seen_knobs)++;
    }
  }
  EXPECT_GT(seen_knobs, 0u);  // the fixture exercises both kinds
  EXPECT_GT(seen_null, 0u);
}

TEST(MakePlan, HandCheckedInstructions) {
  OptionTable table = small_table();
  auto schedule = PipelineSchedule::make(ScheduleKind::k1F1B, 2, 3);
  InstructionDag dag(schedule);
  FrontierPoint point;
  point.assignment.assign(dag.num_nodes(), 1);
  // Stage 0's first instruction (forward 0) takes the fast, knobbed option.
  point.assignment[dag.node_of(0, 0)] = 0;
  // Stage 1's last instruction (backward 2) takes the fast backward.
  point.assignment[dag.node_of(1, 5)] = 0;
  Plan plan = make_plan(table, dag, point, small_context());
  const PlannedInstruction& first = plan.stages[0][0];
  EXPECT_EQ(first.freq_mhz, 1410);
  EXPECT_DOUBLE_EQ(first.time_s, 0.010);
  EXPECT_DOUBLE_EQ(first.energy_j, 3.0);
  EXPECT_EQ(*first.knob, (json{{"sm_clock", 1410}, {"mode", "fast"}, {"stage", 0}}));
  const PlannedInstruction& second = plan.stages[0][1];  // forward 1, slow
  EXPECT_EQ(second.freq_mhz, 1005);
  EXPECT_TRUE(second.knob.is_null());
  const PlannedInstruction& third = plan.stages[0][2];  // backward 0, slow, knobbed
  EXPECT_EQ(third.type, InstructionType::kBackward);
  EXPECT_EQ(third.freq_mhz, 900);
  EXPECT_EQ(*third.knob, (json{{"sm_clock", 900}}));
  const PlannedInstruction& last = plan.stages[1][5];  // stage 1 backward 2, fast
  EXPECT_EQ(last.type, InstructionType::kBackward);
  EXPECT_EQ(last.microbatch, 2);
  EXPECT_EQ(last.freq_mhz, 1395);
  EXPECT_DOUBLE_EQ(last.time_s, 0.021 * 1.1);
  EXPECT_DOUBLE_EQ(last.energy_j, 6.0 * 1.1);
  EXPECT_TRUE(last.knob.is_null());
}

TEST(MakePlan, AssignmentOfWrongSizeIsABug) {
  Fixture f;
  FrontierPoint bad = f.point;
  bad.assignment.pop_back();
  EXPECT_THROW((void)make_plan(f.table, f.dag, bad, small_context()), InternalError);
}

// ---------------------------------------------------------------------------------------------
// JSON

TEST(PlanJson, DocumentShape) {
  Fixture f;
  json j = to_json(f.plan);
  EXPECT_EQ(j.at("format"), "kareus-plan");
  EXPECT_EQ(j.at("version"), 1);
  EXPECT_EQ(j.at("schedule"), "1f1b");
  EXPECT_EQ(j.at("num_stages"), 2);
  EXPECT_EQ(j.at("num_microbatches"), 3);
  EXPECT_EQ(j.at("source"), small_context().source);
  ASSERT_EQ(j.at("stages").size(), 2u);
  EXPECT_EQ(j.at("stages")[1].at("stage"), 1);
  const json& first = j.at("stages")[0].at("instructions")[0];
  EXPECT_EQ(first.at("type"), "forward");
  EXPECT_EQ(first.at("microbatch"), 0);
  EXPECT_EQ(first.at("freq_mhz").get<double>(), f.plan.stages[0][0].freq_mhz);
  // Instructions without a knob have no "knob" key; those with one carry it.
  for (std::size_t s = 0; s < 2; ++s) {
    for (std::size_t k = 0; k < f.plan.stages[s].size(); ++k) {
      const json& entry = j.at("stages")[s].at("instructions")[k];
      EXPECT_EQ(entry.contains("knob"), !f.plan.stages[s][k].knob.is_null());
      if (entry.contains("knob")) {
        EXPECT_EQ(entry.at("knob"), *f.plan.stages[s][k].knob);
      }
    }
  }
}

TEST(PlanJson, RoundTrip) {
  Fixture f;
  Plan back = plan_from_json(to_json(f.plan), "mem");
  EXPECT_EQ(back, f.plan);
  // Through text too (doubles survive their shortest decimal form).
  Plan reparsed = plan_from_json(json::parse(to_json(f.plan).dump()), "mem");
  EXPECT_EQ(reparsed, f.plan);
}

TEST(PlanJson, RoundTripWithoutSourceAndWithGPipe) {
  OptionTable table = small_table();
  auto schedule = PipelineSchedule::make(ScheduleKind::kGPipe, 2, 3);
  InstructionDag dag(schedule);
  FrontierPoint point = small_point(dag);
  PlanContext context = small_context();
  context.schedule = ScheduleKind::kGPipe;
  context.source = nullptr;
  Plan plan = make_plan(table, dag, point, context);
  json j = to_json(plan);
  EXPECT_FALSE(j.contains("source"));
  EXPECT_EQ(j.at("schedule"), "gpipe");
  EXPECT_EQ(plan_from_json(j, "mem"), plan);
}

TEST(PlanJson, InequalityIsDetected) {
  Fixture f;
  Plan changed = f.plan;
  changed.stages[1][3].freq_mhz += 15;
  EXPECT_NE(plan_from_json(to_json(changed), "mem"), f.plan);
  Plan knob = f.plan;
  knob.stages[0][0].knob = SharedJson(json{{"sm_clock", 1}});
  EXPECT_NE(plan_from_json(to_json(knob), "mem"), f.plan);
}

TEST_F(TempDir, WriteAndReadPlanFile) {
  Fixture f;
  auto path = dir_ / "plans" / "plan.json";
  write_plan(f.plan, path);
  ASSERT_TRUE(fs::is_regular_file(path));
  EXPECT_EQ(read_plan(path), f.plan);
  // The file is the documented JSON document.
  std::ifstream in(path);
  json j = json::parse(in);
  EXPECT_EQ(j, to_json(f.plan));
}

TEST_F(TempDir, ReadPlanErrorsNameThePath) {
  auto missing = dir_ / "missing.json";
  try {
    (void)read_plan(missing);
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_TRUE(Contains(e.what(), missing.string()));
  }
  auto broken = dir_ / "broken.json";
  {
    std::ofstream out(broken);
    out << "{\"format\": \"kareus-plan\", ";
  }
  try {
    (void)read_plan(broken);
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_TRUE(Contains(e.what(), broken.string()));
    EXPECT_TRUE(Contains(e.what(), "not valid JSON"));
  }
  // A field error in a file names the file and the field.
  Fixture f;
  json j = to_json(f.plan);
  j["stages"][0]["instructions"][2].erase("time_s");
  auto bad = dir_ / "bad.json";
  {
    std::ofstream out(bad);
    out << j.dump();
  }
  try {
    (void)read_plan(bad);
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_TRUE(Contains(e.what(), bad.string()));
    EXPECT_TRUE(Contains(e.what(), "stages[0].instructions[2].time_s"));
  }
}

// Plans of the fixture's shape at `count` different assignments and times, as a frontier's are.
std::vector<Plan> fixture_plans(std::size_t count) {
  Fixture f;
  std::vector<Plan> plans;
  for (std::size_t i = 0; i < count; ++i) {
    FrontierPoint point = f.point;
    for (std::size_t v = 0; v < point.assignment.size(); ++v) point.assignment[v] = static_cast<std::uint16_t>((v + i) % 2);
    point.time_s += 0.001 * static_cast<double>(i);
    plans.push_back(make_plan(f.table, f.dag, point, small_context()));
  }
  return plans;
}

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
}

TEST(PlanStages, WithOneStageOnlyAPlanKeepsEverythingButTheOtherStagesInstructions) {
  const Plan plan = Fixture().plan;
  for (std::size_t s = 0; s < plan.stages.size(); ++s) {
    Plan kept = with_stage_only(plan, s);
    ASSERT_EQ(kept.stages.size(), plan.stages.size());
    for (std::size_t other = 0; other < plan.stages.size(); ++other) {
      EXPECT_EQ(kept.stages[other].empty(), other != s) << s << " " << other;
    }
    kept.stages = plan.stages;  // every other field came along
    EXPECT_EQ(kept, plan) << s;
  }
}

TEST_F(TempDir, APlanSetReadsBackEveryPlanInOrderWholeOrByIndex) {
  for (std::size_t count : {1, 2, 7}) {
    const std::vector<Plan> plans = fixture_plans(count);
    std::vector<std::size_t> indices;
    for (std::size_t i = 0; i < count; ++i) indices.push_back(10 * i + 3);
    const fs::path path = dir_ / "plans.json";
    write_plan_set(plans, indices, path);
    EXPECT_EQ(read_plan_set(path), plans);
    for (std::size_t i = 0; i < count; ++i) EXPECT_EQ(read_plan(path, i), plans[i]);
    // The file is the documented document, read whole by the JSON library alone.
    std::ifstream in(path);
    const json set = json::parse(in);
    EXPECT_EQ(set.at("format"), kPlanSetFormat);
    EXPECT_EQ(set.at("version"), kPlanFormatVersion);
    ASSERT_EQ(set.at("plans").size(), count);
    for (std::size_t i = 0; i < count; ++i) {
      json expected = to_json(plans[i]);
      expected["frontier_index"] = indices[i];
      EXPECT_EQ(set["plans"][i], expected);
    }
  }
}

TEST_F(TempDir, APlanSetsEqualKnobsAreReadIntoOneTree) {
  const std::vector<Plan> plans = fixture_plans(3);
  const fs::path path = dir_ / "plans.json";
  write_plan_set(plans, {0, 1, 2}, path);
  // Each distinct knob of `read` has one tree; true when some knob recurs, so that sharing is exercised.
  auto shared_alike = [](const std::vector<Plan>& read) {
    std::map<std::string, const json*> tree_of;  // by its text
    std::size_t knobs = 0;
    for (const Plan& p : read) {
      for (const auto& stage : p.stages) {
        for (const PlannedInstruction& ins : stage) {
          if (ins.knob.is_null()) continue;
          ++knobs;
          const auto [it, first] = tree_of.emplace(ins.knob->dump(), &*ins.knob);
          EXPECT_EQ(it->second, &*ins.knob) << "an equal knob read into a tree of its own: " << it->first;
        }
      }
    }
    return knobs > tree_of.size();
  };
  const std::vector<Plan> back = read_plan_set(path);
  ASSERT_EQ(back, plans);
  EXPECT_TRUE(shared_alike(back));
  const Plan one = read_plan(path, 1);  // one plan taken alone: its own instructions share
  ASSERT_EQ(one, plans[1]);
  EXPECT_TRUE(shared_alike({one}));
}

TEST_F(TempDir, APlanSetsErrorsNameThePlanAtFault) {
  json set = {{"format", kPlanSetFormat}, {"version", kPlanFormatVersion}, {"plans", json::array()}};
  for (const Plan& p : fixture_plans(3)) set["plans"].push_back(to_json(p));
  set["plans"][2]["stages"][1]["instructions"][0].erase("freq_mhz");
  const fs::path path = dir_ / "plans.json";
  write_text(path, set.dump());
  auto error_of = [&](auto read) -> std::string {
    try {
      read();
    } catch (const InputError& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_TRUE(Contains(error_of([&] { (void)read_plan_set(path); }), "plans[2]"));
  EXPECT_TRUE(Contains(error_of([&] { (void)read_plan_set(path); }), "stages[1].instructions[0].freq_mhz"));
  EXPECT_TRUE(Contains(error_of([&] { (void)read_plan(path, 2); }), "plans[2]"));
  EXPECT_EQ(read_plan(path, 1), plan_from_json(set["plans"][1], "mem"));  // a plan taken alone is read alone
  EXPECT_TRUE(Contains(error_of([&] { (void)read_plan(path); }), "holds 3 plans; choose one with --index 0..2"));
  EXPECT_TRUE(Contains(error_of([&] { (void)read_plan(path, 3); }), "index 3 is out of range: the set holds 3 plans"));

  // Not plans: a scalar among them, none, or no array.
  set["plans"][2] = 7;
  write_text(path, set.dump());
  EXPECT_TRUE(Contains(error_of([&] { (void)read_plan_set(path); }), "plans[2]"));
  for (const json& list : {json::array(), json{{"a", 1}}, json(3)}) {
    set["plans"] = list;
    write_text(path, set.dump());
    EXPECT_TRUE(Contains(error_of([&] { (void)read_plan_set(path); }), "expected a non-empty array of plans"))
        << list.dump();
  }
  set.erase("plans");
  write_text(path, set.dump());
  EXPECT_TRUE(Contains(error_of([&] { (void)read_plan_set(path); }), "expected a non-empty array of plans"));

  // A set cut short is no JSON, whichever plan it ends in.
  write_plan_set(fixture_plans(3), {0, 1, 2}, path);
  const std::string whole = [&] {
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }();
  write_text(path, whole.substr(0, whole.size() / 2));
  EXPECT_TRUE(Contains(error_of([&] { (void)read_plan_set(path); }), "not valid JSON"));

  // A single plan reads as a set of one, its own "plans"-named fields untouched.
  const Plan single = fixture_plans(1)[0];
  json doc = to_json(single);
  doc["source"]["plans"] = json::array({json{{"note", "not a plan"}}});
  write_text(path, doc.dump());
  const std::vector<Plan> one = read_plan_set(path);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].source.at("plans"), doc["source"]["plans"]);
  EXPECT_TRUE(Contains(error_of([&] { (void)read_plan(path, 0); }), "holds a single plan"));
}

TEST(PlanJsonErrors, MissingFieldNamesItsPath) {
  Fixture f;
  json j = to_json(f.plan);
  j["stages"][1]["instructions"][0].erase("freq_mhz");
  InputError e = plan_error(j);
  EXPECT_TRUE(Contains(e.what(), "stages[1].instructions[0].freq_mhz"));
  EXPECT_TRUE(Contains(e.what(), "missing"));
  EXPECT_TRUE(Contains(e.what(), "plan.json"));
  EXPECT_EQ(e.location().field, "stages[1].instructions[0].freq_mhz");
  EXPECT_EQ(e.location().file, "plan.json");
}

TEST(PlanJsonErrors, EveryMissingTopLevelFieldIsNamed) {
  Fixture f;
  for (const char* key : {"format", "version", "schedule", "num_stages", "num_microbatches",
                          "p_blocking_w", "unit_time_s", "energy_scope", "time_s", "energy_j",
                          "stages"}) {
    json j = to_json(f.plan);
    j.erase(key);
    InputError e = plan_error(j);
    EXPECT_EQ(e.location().field, key);
    EXPECT_TRUE(Contains(e.what(), std::string("'") + key + "'"));
  }
  // "source" is optional.
  json j = to_json(f.plan);
  j.erase("source");
  Plan expected = f.plan;
  expected.source = nullptr;
  EXPECT_EQ(plan_from_json(j, "plan.json"), expected);
}

TEST(PlanJsonErrors, EveryMissingInstructionFieldIsNamed) {
  Fixture f;
  for (const char* key : {"type", "microbatch", "freq_mhz", "time_s", "energy_j"}) {
    json j = to_json(f.plan);
    j["stages"][0]["instructions"][4].erase(key);
    InputError e = plan_error(j);
    EXPECT_EQ(e.location().field, std::string("stages[0].instructions[4].") + key);
  }
  json j = to_json(f.plan);
  j["stages"][1].erase("instructions");
  EXPECT_EQ(plan_error(j).location().field, "stages[1].instructions");
}

TEST(PlanJsonErrors, WrongFormat) {
  Fixture f;
  json j = to_json(f.plan);
  j["format"] = "perseus-plan";
  InputError e = plan_error(j);
  EXPECT_EQ(e.location().field, "format");
  EXPECT_TRUE(Contains(e.what(), "kareus-plan"));
}

TEST(PlanJsonErrors, UnsupportedVersion) {
  Fixture f;
  json j = to_json(f.plan);
  j["version"] = 2;
  InputError e = plan_error(j);
  EXPECT_EQ(e.location().field, "version");
  EXPECT_TRUE(Contains(e.what(), "version 2"));
  EXPECT_TRUE(Contains(e.what(), "not supported"));
}

TEST(PlanJsonErrors, WrongTypes) {
  Fixture f;
  {
    json j = to_json(f.plan);
    j["stages"][0]["instructions"][1]["freq_mhz"] = "fast";
    InputError e = plan_error(j);
    EXPECT_EQ(e.location().field, "stages[0].instructions[1].freq_mhz");
    EXPECT_TRUE(Contains(e.what(), "wrong type"));
    EXPECT_TRUE(Contains(e.what(), "string"));
  }
  {
    json j = to_json(f.plan);
    j["num_stages"] = "two";
    EXPECT_EQ(plan_error(j).location().field, "num_stages");
  }
  {
    json j = to_json(f.plan);
    j["format"] = 7;
    InputError e = plan_error(j);
    EXPECT_EQ(e.location().field, "format");
    EXPECT_TRUE(Contains(e.what(), "wrong type"));
  }
  {
    json j = to_json(f.plan);
    j["stages"][1]["instructions"][5]["microbatch"] = json::array({1});
    EXPECT_EQ(plan_error(j).location().field, "stages[1].instructions[5].microbatch");
  }
  {
    json j = to_json(f.plan);
    j["stages"][0]["instructions"] = json::object();
    EXPECT_EQ(plan_error(j).location().field, "stages[0].instructions");
  }
  {
    json j = to_json(f.plan);
    j["stages"] = json::object();
    EXPECT_EQ(plan_error(j).location().field, "stages");
  }
  EXPECT_EQ(plan_error(json::array()).location().field, "format");
}

TEST(PlanJsonErrors, BadEnumerationsAndCounts) {
  Fixture f;
  {
    json j = to_json(f.plan);
    j["schedule"] = "zigzag";
    EXPECT_EQ(plan_error(j).location().field, "schedule");
  }
  {
    json j = to_json(f.plan);
    j["stages"][1]["instructions"][2]["type"] = "sideways";
    InputError e = plan_error(j);
    EXPECT_EQ(e.location().field, "stages[1].instructions[2].type");
    EXPECT_TRUE(Contains(e.what(), "forward"));
  }
  {
    json j = to_json(f.plan);
    j["stages"].erase(1);  // one stage listed, num_stages = 2
    InputError e = plan_error(j);
    EXPECT_EQ(e.location().field, "stages");
    EXPECT_TRUE(Contains(e.what(), "num_stages = 2"));
  }
}

// Integer fields must be JSON integers in range: truncating 1.9 to version 1 or 2.7 to
// microbatch 2 would run a different plan than the file says.
TEST(PlanJsonErrors, NonIntegralIntegersAreRejected) {
  Fixture f;
  for (json version : {json(1.9), json(4294967297LL)}) {
    json j = to_json(f.plan);
    j["version"] = version;
    EXPECT_THROW((void)plan_from_json(j, "plan.json"), InputError) << "version " << version;
  }
  json j = to_json(f.plan);
  j["stages"][0]["instructions"][0]["microbatch"] = 2.7;
  EXPECT_THROW((void)plan_from_json(j, "plan.json"), InputError);
}

}  // namespace
}  // namespace kareus::plan

namespace kareus::plan {
namespace {

TEST(PlanFormat, ChunksAndSplitBackwardsRoundTrip) {
  Plan plan;
  plan.schedule = schedule::ScheduleKind::kInterleaved1F1B;
  plan.num_stages = 1;
  plan.num_microbatches = 1;
  plan.virtual_stages = 2;
  plan.energy_scope = energy_scope_for(1);
  plan.stages = {{{schedule::InstructionType::kForward, 0, 1410, nullptr, 0.1, 30, 1},
                  {schedule::InstructionType::kBackward, 0, 1200, nullptr, 0.1, 20, 1,
                   schedule::BackwardPart::kInputGradient},
                  {schedule::InstructionType::kBackward, 0, 900, nullptr, 0.1, 10, 0,
                   schedule::BackwardPart::kWeightGradient}}};
  nlohmann::json written = to_json(plan);
  EXPECT_EQ(written["virtual_stages"], 2);
  EXPECT_EQ(written["stages"][0]["instructions"][1]["type"], "backward_input");
  EXPECT_EQ(written["stages"][0]["instructions"][2]["type"], "backward_weight");
  EXPECT_EQ(written["stages"][0]["instructions"][0]["chunk"], 1);
  EXPECT_EQ(plan_from_json(written, "test"), plan);
  written["stages"][0]["instructions"][0]["chunk"] = 2;  // beyond virtual_stages
  EXPECT_THROW((void)plan_from_json(written, "test"), InputError);
}

}  // namespace
}  // namespace kareus::plan
