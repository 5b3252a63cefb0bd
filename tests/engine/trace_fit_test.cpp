#include "kareus/engine/trace_fit.hpp"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "kareus/core/error.hpp"

namespace kareus::engine {
namespace {

const std::filesystem::path kRealTrace = std::filesystem::path(KAREUS_TESTS_DIR) / "engine/trace/layer_cpu_trace.json";

std::filesystem::path write_trace(const std::string& name, const nlohmann::json& doc) {
  const auto path = std::filesystem::temp_directory_path() / ("kareus-trace-" + std::to_string(::getpid()) + "-" + name);
  std::ofstream(path) << doc.dump();
  return path;
}

// The real producer's output: torch.profiler on this machine's CPU (record_layer_trace.py beside
// it). Its labelled spans are counted as the script issues them, each cost lands within its spans'
// range, unlabelled costs keep the base's value, and the engine written back reads as it was fitted.
TEST(TraceFit, FitsARealTraceOfASmallLayerLabelledByCall) {
  const EngineSpec base = load_engine("megatron-te-eager");
  const TraceFit fit = fit_engine_trace(base, kRealTrace);
  // One un-split and one nanobatched forward: 2 segments x 4 ops, the nanobatched twice over; an
  // all-reduce per segment un-split, and before every nanobatched partition but the first.
  EXPECT_EQ(fit.fitted.at("layer_op_us").spans, 8u);
  EXPECT_EQ(fit.fitted.at("partition_op_us").spans, 16u);
  EXPECT_EQ(fit.fitted.at("partition_us").spans, 4u);
  EXPECT_EQ(fit.fitted.at("collective_call_us").spans, 5u);
  EXPECT_EQ(fit.fitted.size(), 4u);
  for (const auto& [key, cost] : fit.fitted) {
    EXPECT_GT(cost.median_s, 0) << key;
    EXPECT_LE(cost.min_s, cost.median_s) << key;
    EXPECT_LE(cost.median_s, cost.max_s) << key;
  }
  EXPECT_EQ(fit.engine.host.layer_op_s, fit.fitted.at("layer_op_us").median_s);
  EXPECT_EQ(fit.engine.host.event_s, base.host.event_s);
  EXPECT_EQ(fit.engine.host.launch_latency_s, base.host.launch_latency_s);
  EXPECT_NE(fit.engine.sources.at("layer_op_us").get<std::string>().find("layer_cpu_trace.json"), std::string::npos);
  EXPECT_EQ(engine_from_json(to_json(fit.engine), "round trip"), fit.engine);
  EXPECT_GT(fit.top_level_ops, 100u);
  EXPECT_GT(fit.host_s_per_top_level_op, 0);
}

// A trace written from an engine, each labelled span lasting its cost (a partition's span holding
// its ops' spans and an aten op inside each, on two threads, in both export forms), fits back to it.
RC_GTEST_PROP(TraceFit, ATraceOfAnEngineFitsBackToIt, ()) {
  EngineSpec e = load_engine("megatron-te-eager");
  e.host.partition_op_s = *rc::gen::inRange(1, 500) * 1e-6;
  e.host.layer_op_s = *rc::gen::inRange(1, 500) * 1e-6;
  e.host.collective_call_s = *rc::gen::inRange(1, 100) * 1e-6;
  e.host.partition_s = *rc::gen::inRange(1, 100) * 1e-6;
  const int ops = *rc::gen::inRange(1, 8);
  const bool kineto = *rc::gen::arbitrary<bool>();
  // Kineto records the CUDA runtime: there, the loop's ops hold a blocking call or a launch.
  const bool waits = *rc::gen::arbitrary<bool>();
  const bool layer_waits = *rc::gen::arbitrary<bool>();  // and, apart, the un-split layer's op
  nlohmann::json events = nlohmann::json::array();
  auto span = [&](const std::string& name, double ts_us, double dur_us, int tid) {
    nlohmann::json ev = {{"name", name}, {"ph", "X"}, {"ts", ts_us}, {"dur", dur_us}, {"tid", tid}};
    if (kineto) {
      ev["cat"] = name.starts_with("kareus:") ? "user_annotation" : "cpu_op";
      ev["pid"] = 7;
    } else {
      ev["pid"] = "CPU functions";
    }
    events.push_back(ev);
  };
  double t = 0;
  for (int tid : {1, 2}) {
    for (int p = 0; p < 3; ++p) {
      const double own = e.host.partition_s * 1e6, op = e.host.partition_op_s * 1e6;
      span("kareus:partition", t, own + ops * op, tid);
      double inner = t + own / 2;
      for (int k = 0; k < ops; ++k, inner += op) {
        span("kareus:partition_op", inner, op, tid);
        span("aten::add", inner + op / 4, op / 2, tid);
        if (kineto) {
          events.push_back({{"name", waits ? "cudaStreamSynchronize" : "cudaLaunchKernel"}, {"ph", "X"},
                            {"cat", "cuda_runtime"}, {"ts", inner + op / 2}, {"dur", op / 8}, {"pid", 7}, {"tid", tid}});
        }
      }
      t += own + ops * op + 5;
    }
    const double layer = e.host.layer_op_s * 1e6;
    span("kareus:layer_op", t, layer, tid);
    span("aten::item", t + layer / 4, layer / 2, tid);
    if (kineto && layer_waits) {
      events.push_back({{"name", "cudaStreamSynchronize"}, {"ph", "X"}, {"cat", "cuda_runtime"},
                        {"ts", t + layer / 2}, {"dur", layer / 8}, {"pid", 7}, {"tid", tid}});
    }
    t += layer;
    span("kareus:collective_call", t, e.host.collective_call_s * 1e6, tid);
    t += e.host.collective_call_s * 1e6 + 3;
  }
  span("a GPU kernel", 0, 1e6, 99);  // not on the CPU in the Kineto form; top-level either way
  const auto path = write_trace("synthetic.json", kineto ? nlohmann::json{{"traceEvents", events}} : events);
  const TraceFit fit = fit_engine_trace(load_engine("megatron-te-eager"), path);
  for (const char* key : {"partition_op_us", "layer_op_us", "collective_call_us", "partition_us"}) {
    RC_ASSERT(fit.fitted.count(key) == 1u);
  }
  RC_ASSERT(std::abs(fit.engine.host.partition_op_s - e.host.partition_op_s) < 1e-12);
  RC_ASSERT(std::abs(fit.engine.host.layer_op_s - e.host.layer_op_s) < 1e-12);
  RC_ASSERT(std::abs(fit.engine.host.collective_call_s - e.host.collective_call_s) < 1e-12);
  RC_ASSERT(std::abs(fit.engine.host.partition_s - e.host.partition_s) < 1e-12);
  RC_ASSERT(fit.fitted.at("partition_op_us").spans == static_cast<std::size_t>(6 * ops));
  // Where the host waits: read from the runtime calls where the trace has them, else the base's.
  RC_ASSERT(fit.engine.sync_per_loop_op == (kineto ? waits : load_engine("megatron-te-eager").sync_per_loop_op));
  RC_ASSERT(fit.loop_ops_waiting == (kineto && waits ? fit.loop_ops : 0u));
  RC_ASSERT(fit.layer_ops == 2u);
  RC_ASSERT(fit.layer_ops_waiting == (kineto && layer_waits ? 2u : 0u));
  RC_ASSERT(fit.engine.sync_per_module_op == (kineto && layer_waits));  // the base's is off
  // Each wait is put down to the innermost op around it: the loop's add, the layer's item.
  std::map<std::string, std::size_t> where;
  if (kineto && waits) where["aten::add: cudaStreamSynchronize"] = static_cast<std::size_t>(6 * ops);
  if (kineto && layer_waits) where["aten::item: cudaStreamSynchronize"] = 2;
  RC_ASSERT(fit.waits == where);
  RC_ASSERT(fit.engine.sources.at("op_sync").get<std::string>().find("synthetic.json") != std::string::npos ||
            !kineto);
}

// A blocking call outside every CPU op counts as such; one inside nested ops goes to the innermost
// that holds it whole, on its own thread only, and marks the labelled span around it.
TEST(TraceFit, AWaitGoesToTheInnermostOpOfItsThreadThatHoldsIt) {
  auto ev = [](const std::string& name, const std::string& cat, double ts, double dur, int tid) {
    return nlohmann::json{{"name", name}, {"ph", "X"}, {"cat", cat}, {"ts", ts}, {"dur", dur}, {"pid", 1}, {"tid", tid}};
  };
  const nlohmann::json events = nlohmann::json::array({
      ev("kareus:layer_op", "user_annotation", 0, 100, 1),
      ev("aten::empty", "cpu_op", 10, 50, 1),
      ev("aten::fill_", "cpu_op", 20, 5, 1),              // ends before the call: not its maker
      ev("cudaFree", "cuda_runtime", 30, 10, 1),          // in aten::empty
      ev("aten::copy_", "cpu_op", 30, 40, 2),             // another thread: holds nothing of thread 1
      ev("cudaMemcpy", "cuda_runtime", 200, 5, 1),        // outside every op
      ev("kareus:layer_op", "user_annotation", 300, 10, 1),
  });
  const TraceFit fit = fit_engine_trace(load_engine("megatron-te-eager"), write_trace("waits.json", {{"traceEvents", events}}));
  EXPECT_EQ(fit.waits, (std::map<std::string, std::size_t>{{"aten::empty: cudaFree", 1}, {"no CPU op: cudaMemcpy", 1}}));
  EXPECT_EQ(fit.layer_ops, 2u);
  EXPECT_EQ(fit.layer_ops_waiting, 1u);
}

TEST(TraceFit, WhatIsNoTraceOrNamesNoCostIsAnErrorNamingIt) {
  const EngineSpec base = load_engine("megatron-te-eager");
  auto fails = [&](const nlohmann::json& doc, const std::string& fragment) {
    try {
      fit_engine_trace(base, write_trace("bad.json", doc));
      ADD_FAILURE() << "accepted " << doc.dump();
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  fails({{"events", 1}}, "not a Chrome trace");
  fails(nlohmann::json::array({{{"name", "aten::add"}, {"ph", "X"}, {"ts", 0}, {"dur", 1}, {"pid", "CPU functions"}}}),
        "no span is labelled");
  fails(nlohmann::json::array({{{"name", "kareus:layr_op"}, {"ph", "X"}, {"ts", 0}, {"dur", 1}}}), "kareus:layer_op");
  fails(nlohmann::json::array({{{"name", "kareus:layer_op"}, {"ph", "X"}, {"ts", 0}, {"dur", -1}}}), "dur");
}

}  // namespace
}  // namespace kareus::engine
