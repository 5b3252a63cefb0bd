#include "kareus/engine/engine.hpp"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <numeric>
#include <tuple>

#include "kareus/core/error.hpp"
#include "kareus/workload/model.hpp"
#include "kareus/workload/parallel.hpp"

namespace kareus::engine {
namespace {

using json = nlohmann::ordered_json;

json valid_engine() {
  return json::parse(R"({
    "format": "kareus-engine", "version": 1, "name": "test", "display_name": "Test", "source": "a test",
    "host": {"partition_op_us": 40, "layer_op_us": 30, "collective_call_us": 10, "event_us": 2,
             "partition_us": 5, "instruction_us": 20, "launch_latency_us": 15},
    "sync": "instruction",
    "sources": {"partition_op_us": "a", "layer_op_us": "b", "collective_call_us": "c", "event_us": "d",
                "partition_us": "e", "instruction_us": "f", "launch_latency_us": "g"}})");
}

// One message naming the field, for every way a file can be wrong.
TEST(EngineJson, BadFieldsAreErrorsNamingTheField) {
  EXPECT_NO_THROW(engine_from_json(valid_engine(), "e.json"));
  auto fails = [](json doc, const std::string& field) {
    try {
      engine_from_json(doc, "e.json");
      ADD_FAILURE() << "accepted a file with a bad " << field;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
    }
  };
  json doc = valid_engine();
  doc["host"]["event_us"] = -1;
  fails(doc, "host.event_us");
  doc = valid_engine();
  doc["host"].erase("layer_op_us");
  fails(doc, "host.layer_op_us");
  doc = valid_engine();
  doc["host"]["typo_us"] = 1;
  fails(doc, "host.typo_us");
  doc = valid_engine();
  doc["sync"] = "sometimes";
  fails(doc, "sync");
  doc = valid_engine();
  doc["op_sync"] = "always";
  fails(doc, "op_sync");
  doc["op_sync"] = "modules+partition_loop";  // one spelling of both
  fails(doc, "op_sync");
  doc = valid_engine();
  doc["sources"].erase("event_us");
  fails(doc, "sources.event_us");
  doc = valid_engine();
  doc["partition_calls"] = {{"qkv_proj", -1}};
  fails(doc, "partition_calls.qkv_proj");
  doc = valid_engine();
  doc["format"] = "kareus-gpu";
  fails(doc, "format");
  // A zero cost needs no source.
  doc = valid_engine();
  doc["host"]["event_us"] = 0;
  doc["sources"].erase("event_us");
  EXPECT_NO_THROW(engine_from_json(doc, "e.json"));
}

// Where the host waits: only the artifact's engine waits for the GPU at each op of its loop, and an
// engine file without "op_sync" keeps ahead.
TEST(EngineJson, OpSyncIsTheArtifactsLoopAloneAndOffUnlessSaid) {
  EXPECT_FALSE(engine_from_json(valid_engine(), "e.json").sync_per_loop_op);
  json doc = valid_engine();
  doc["op_sync"] = "partition_loop";
  EXPECT_TRUE(engine_from_json(doc, "e.json").sync_per_loop_op);
  EXPECT_TRUE(load_engine_preset("megatron-te-eager").sync_per_loop_op);
  EXPECT_FALSE(load_engine_preset("cuda-graphs").sync_per_loop_op);
  EXPECT_FALSE(load_engine_preset("kareus-executor").sync_per_loop_op);
  EXPECT_TRUE(load_engine_preset("megatron-te-eager").sources.contains("op_sync")) << "an inferred choice says why";
  // The un-split modules wait only where a file says so (a trace, trace_fit.hpp): no preset does.
  for (const std::string& name : engine_preset_names()) EXPECT_FALSE(load_engine_preset(name).sync_per_module_op) << name;
  // Each value sets its paths, and an engine writes back the value it was read from.
  for (const auto& [value, loop, modules] : {std::tuple{"none", false, false}, {"partition_loop", true, false},
                                             {"modules", false, true}, {"partition_loop+modules", true, true}}) {
    doc["op_sync"] = value;
    const EngineSpec e = engine_from_json(doc, "e.json");
    EXPECT_EQ(e.sync_per_loop_op, loop) << value;
    EXPECT_EQ(e.sync_per_module_op, modules) << value;
    EXPECT_EQ(to_json(e).at("op_sync"), value);
    EXPECT_EQ(engine_from_json(to_json(e), "back.json"), e) << value;
  }
}

TEST(EnginePresets, EveryPresetLoadsCitesItsCostsAndWritesBackEqual) {
  const auto names = engine_preset_names();
  for (const char* expected : {"megatron-te-eager", "cuda-graphs", "kareus-executor"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), expected), names.end()) << expected;
  }
  for (const std::string& name : names) {
    const EngineSpec e = load_engine_preset(name);
    EXPECT_EQ(e.name, name);
    EXPECT_FALSE(e.idle()) << name;
    EXPECT_EQ(engine_from_json(to_json(e), "round trip"), e) << name;
  }
  EXPECT_EQ(load_engine(std::string(kDefaultEngine)).name, kDefaultEngine);
  try {
    load_engine("no-such-engine");
    ADD_FAILURE();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("megatron-te-eager"), std::string::npos) << e.what();
  }
}

// The artifact's per-op loop issues 14 TransformerEngine ops per layer and nanobatch
// (TransformerLayer.get_all_operators); the preset's call counts over our ops must say the same.
TEST(EnginePresets, TheArtifactsEngineIssuesFourteenOpsPerLayerAndNanobatch) {
  EngineSpec e = load_engine_preset("megatron-te-eager");
  e.host = HostCosts{};
  e.host.partition_op_s = 1;
  const auto model = workload::load_model("llama-3.2-3b");
  workload::ParallelConfig cp;
  cp.tp = 4, cp.cp = 2;
  for (const workload::ParallelConfig& parallel : {workload::ParallelConfig{}, cp}) {
    const auto p = workload::validated(model, parallel);
    for (workload::Pass pass : {workload::Pass::kForward, workload::Pass::kBackward}) {
      double calls = 0;
      for (const workload::Partition& part : workload::build_partitions(model, p)) {
        if (part.pass != pass || part.slots.empty()) continue;
        // Each key runs for `count` of the layer's two nanobatch partitions.
        calls += part.count * host_time_s(e, part, {1410, 24, part.slots.front().name}) / 2;
      }
      EXPECT_EQ(calls, 14) << "tp " << p.tp << " cp " << p.cp << " " << workload::to_string(pass);
    }
  }
}

// The sequential knob runs the un-split segment through the modules, half charged to each of the
// segment's two partitions; the overlapped knob runs the per-op loop, its collective call and events.
TEST(EngineHostTime, CountsEachPathsCalls) {
  const EngineSpec e = engine_from_json(valid_engine(), "e.json");
  const auto model = workload::load_model("llama-3.2-3b");
  const auto parts = workload::build_partitions(model, workload::validated(model, {}));
  const workload::Partition& p = workload::find_partition(parts, "fwd_mlp");
  const double ops = static_cast<double>(p.ops.size());
  EXPECT_NEAR(host_time_s(e, p, {1410, 24, "norm_0"}), ops * 40e-6 + 10e-6 + 3 * 2e-6 + 5e-6, 1e-15);
  EXPECT_NEAR(host_time_s(e, p, {1410, 24, "none"}), 0.5 * (ops * 30e-6 + 10e-6), 1e-15);
  // The slot does not change what the host issues; the path does, whatever the knob.
  EXPECT_EQ(host_time_s(e, p, {1410, 24, "norm_0"}), host_time_s(e, p, {900, 8, "linear_1"}));
  EXPECT_EQ(host_time_s(e, p, IssuePath::kLoop), host_time_s(e, p, {1410, 24, "norm_0"}));
  EXPECT_EQ(host_time_s(e, p, IssuePath::kModules), host_time_s(e, p, {1410, 24, "none"}));
}

// What the host adds to a partition's GPU time: the loop's whole host time where it waits at each
// op of the loop, whatever the knob (a sequential partition of a nanobatched instruction runs the
// loop too), and the modules' where it waits at theirs (a partition without a collective runs them
// on either path); nothing where it keeps ahead. More host cost never exposes less.
RC_GTEST_PROP(EngineExposedHostTime, IsThePathsHostTimeWhereItWaitsAndGrowsWithItsCosts, ()) {
  EngineSpec e = engine_from_json(valid_engine(), "e.json");
  e.host.partition_op_s = *rc::gen::inRange(0, 500) * 1e-6;
  e.host.layer_op_s = *rc::gen::inRange(0, 500) * 1e-6;
  e.host.collective_call_s = *rc::gen::inRange(0, 100) * 1e-6;
  e.sync_per_loop_op = *rc::gen::arbitrary<bool>();
  e.sync_per_module_op = *rc::gen::arbitrary<bool>();
  const auto model = workload::load_model("llama-3.2-3b");
  const auto parts = workload::build_partitions(model, workload::validated(model, {}));
  const workload::Partition& p = *rc::gen::elementOf(parts);
  const workload::Knob overlapped{1410, 24, p.slots.empty() ? "none" : p.slots.front().name};
  const double on_modules = exposed_host_time_s(e, p, IssuePath::kModules);
  RC_ASSERT(on_modules == (e.sync_per_module_op ? host_time_s(e, p, IssuePath::kModules) : 0.0));
  const double exposed = exposed_host_time_s(e, p, IssuePath::kLoop);
  if (!p.collective) {
    RC_ASSERT(exposed == on_modules);  // never the loop
  } else if (e.sync_per_loop_op) {
    RC_ASSERT(exposed == host_time_s(e, p, IssuePath::kLoop));
    RC_ASSERT(exposed == host_time_s(e, p, overlapped));
  } else {
    RC_ASSERT(exposed == 0.0);
  }
  EngineSpec dearer = e;
  dearer.host.partition_op_s += 1e-6;
  dearer.host.layer_op_s += 1e-6;
  RC_ASSERT(exposed_host_time_s(dearer, p, IssuePath::kLoop) >= exposed);
  RC_ASSERT(exposed_host_time_s(dearer, p, IssuePath::kModules) >= on_modules);
}

// An instruction's time from its sums, against an op-by-op host timeline (kernel i starts at
// max(the previous kernel's end, its issue + launch latency), the host issuing back to back after
// the synchronisation and its first work): the closed form is that timeline's steady state. For a
// pattern repeated R times it is a lower bound, short by at most one pattern's GPU and host time
// together, so its error per repetition vanishes.
RC_GTEST_PROP(EngineInstructionTime, IsTheSteadyStateOfTheOpByOpTimeline, ()) {
  const int ops = *rc::gen::inRange(1, 12);
  const auto host_us = *rc::gen::container<std::vector<int>>(static_cast<std::size_t>(ops), rc::gen::inRange(0, 200));
  const auto gpu_us = *rc::gen::container<std::vector<int>>(static_cast<std::size_t>(ops), rc::gen::inRange(0, 400));
  const int repeats = *rc::gen::inRange(1, 40);
  const bool sync = *rc::gen::arbitrary<bool>();
  EngineSpec e;
  e.sync_per_instruction = sync;
  e.host.instruction_s = *rc::gen::inRange(0, 100) * 1e-6;
  e.host.launch_latency_s = sync ? *rc::gen::inRange(0, 30) * 1e-6 : 0;

  double issued = e.host.instruction_s, gpu_end = 0, g = 0, h = 0;
  for (int r = 0; r < repeats; ++r) {
    for (int i = 0; i < ops; ++i) {
      issued += host_us[static_cast<std::size_t>(i)] * 1e-6;
      gpu_end = std::max(gpu_end, issued + e.host.launch_latency_s) + gpu_us[static_cast<std::size_t>(i)] * 1e-6;
      g += gpu_us[static_cast<std::size_t>(i)] * 1e-6;
      h += host_us[static_cast<std::size_t>(i)] * 1e-6;
    }
  }
  const double pattern_s = (std::accumulate(gpu_us.begin(), gpu_us.end(), 0) +
                            std::accumulate(host_us.begin(), host_us.end(), 0)) * 1e-6;
  // Without a synchronisation the host's lead is not lost at the instruction's start: an
  // instruction whose GPU time covers its host time takes exactly its GPU time.
  const double exact = sync ? gpu_end : std::max(gpu_end, g);
  const double closed = instruction_time_s(e, g, h);
  RC_ASSERT(closed <= exact + 1e-12);
  RC_ASSERT(exact <= closed + pattern_s + e.host.instruction_s + 1e-12);
}

RC_GTEST_PROP(EngineInstructionTime, HostCostNeverShortensAnInstructionAndIdleIsTheGpuAlone, ()) {
  const double gpu_s = *rc::gen::inRange(0, 100000) * 1e-6;
  const double host_s = *rc::gen::inRange(0, 100000) * 1e-6;
  EngineSpec e;
  RC_ASSERT(instruction_time_s(e, gpu_s, host_s) == std::max(gpu_s, host_s));
  RC_ASSERT(instruction_time_s(e, gpu_s, 0) == gpu_s);
  e.sync_per_instruction = *rc::gen::arbitrary<bool>();
  e.host.instruction_s = *rc::gen::inRange(0, 1000) * 1e-6;
  e.host.launch_latency_s = *rc::gen::inRange(0, 100) * 1e-6;
  const double t = instruction_time_s(e, gpu_s, host_s);
  RC_ASSERT(t >= gpu_s);
  RC_ASSERT(t >= host_s);
  RC_ASSERT(instruction_time_s(e, gpu_s, host_s + 1e-6) >= t);
}

}  // namespace
}  // namespace kareus::engine
