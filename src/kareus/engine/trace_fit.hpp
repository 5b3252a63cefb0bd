// An engine's host costs fitted to a PyTorch profiler trace (Chrome trace JSON, as
// torch.profiler's export_chrome_trace writes it, in either its Kineto form {"traceEvents": [...]}
// or the legacy list of events). The run being traced names each framework call it wants priced
// with torch.profiler.record_function("kareus:<constant>"), for <constant> one of the engine's host
// costs without its unit (partition_op, layer_op, collective_call, event, partition, instruction):
//
//   with record_function("kareus:layer_op"):
//       y = self.fc1(x)
//
// Each constant becomes the median, over its labelled spans, of the span's own host time (its
// duration less the labelled spans nested in it, so a partition's own cost leaves out its ops).
// Constants without a labelled span keep the base engine's value. The trace's other CPU ops are
// only counted: how many top-level ops each host thread ran, and their host time per op.
//
// Where the host waits: a trace that records the CUDA runtime (torch.profiler with CUDA activities)
// shows each call that blocks the host on the GPU (cudaStreamSynchronize, cudaDeviceSynchronize,
// cudaEventSynchronize, a synchronous cudaMemcpy, cudaFree, and their driver forms). When at least
// half of the spans labelled kareus:partition_op hold one, the fitted engine waits for the GPU at
// each op of its loop (EngineSpec::sync_per_loop_op), else it keeps ahead; a trace without runtime
// calls keeps the base's setting. Likewise for the spans labelled kareus:layer_op and the un-split
// modules (EngineSpec::sync_per_module_op). Which CPU op made each blocking call is counted too.
//
// Thread-safety: pure functions.
// Example:
//   TraceFit fit = fit_engine_trace(load_engine("megatron-te-eager"), "trace.json");
//   write(to_json(fit.engine));
#pragma once

#include <filesystem>
#include <map>
#include <string>

#include "kareus/engine/engine.hpp"

namespace kareus::engine {

struct FittedCost {
  std::size_t spans = 0;
  double median_s = 0;
  double min_s = 0, max_s = 0;
};

struct TraceFit {
  EngineSpec engine;                         // the base, with every labelled constant fitted
  std::map<std::string, FittedCost> fitted;  // by host cost key, e.g. "layer_op_us"
  std::size_t top_level_ops = 0;             // CPU ops not nested in another, on every thread
  double host_s_per_top_level_op = 0;        // their busy time over their count
  std::size_t runtime_calls = 0;             // CUDA runtime and driver calls recorded
  std::size_t loop_ops = 0, loop_ops_waiting = 0;    // kareus:partition_op spans, those holding a blocking call
  std::size_t layer_ops = 0, layer_ops_waiting = 0;  // kareus:layer_op spans (the un-split modules), the same
  // Where the host waited: per blocking call, the innermost CPU op that made it and the call, e.g.
  // "aten::item: cudaStreamSynchronize" (or "no CPU op: cudaFree") -> how many times.
  std::map<std::string, std::size_t> waits;
};

// InputError naming the file for anything that is not such a trace, for a label that names no
// host cost ("kareus:typo", listing the known ones), and when no span is labelled at all.
TraceFit fit_engine_trace(const EngineSpec& base, const std::filesystem::path& trace);

// The labels a trace may carry: "kareus:partition_op", ...
std::vector<std::string> trace_labels();

}  // namespace kareus::engine
