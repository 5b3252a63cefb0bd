#include "kareus/engine/trace_fit.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "kareus/core/error.hpp"
#include "kareus/core/io.hpp"
#include "kareus/core/median.hpp"

namespace kareus::engine {
namespace {

constexpr std::string_view kPrefix = "kareus:";

// One complete ("X") event on the CPU: its span, its thread, and its label if it carries one.
struct Span {
  double start_us = 0, end_us = 0;
  std::string thread;
  std::string label;  // the host cost key ("layer_op_us"), empty for other ops
  double nested_labelled_us = 0;
  std::string name;
  bool holds_wait = false;  // a call that blocks the host on the GPU ran inside it
};

// Per thread, by start, the longer first at equal starts: a span's parent is the innermost open one.
bool sweep_order(const Span& a, const Span& b) {
  if (a.thread != b.thread) return a.thread < b.thread;
  if (a.start_us != b.start_us) return a.start_us < b.start_us;
  return a.end_us > b.end_us;
}

// Marks every span (in sweep_order) that holds one of the blocking `calls`, and counts the calls by
// the innermost span around each and the call's name.
std::map<std::string, std::size_t> mark_waits(std::vector<Span>& spans, std::vector<Span> calls) {
  std::ranges::stable_sort(calls, sweep_order);
  std::map<std::string, std::size_t> waits;
  std::vector<std::size_t> open;  // indices into spans, outermost first
  std::size_t next = 0;
  auto ended_before = [&](std::size_t j, const Span& s) {
    return spans[j].thread != s.thread || spans[j].end_us <= s.start_us;
  };
  for (const Span& call : calls) {
    auto started = [&](const Span& s) {
      return s.thread < call.thread || (s.thread == call.thread && s.start_us <= call.start_us);
    };
    while (next < spans.size() && started(spans[next])) {
      while (!open.empty() && ended_before(open.back(), spans[next])) open.pop_back();
      open.push_back(next++);
    }
    while (!open.empty() && ended_before(open.back(), call)) open.pop_back();
    const Span* innermost = nullptr;
    for (auto it = open.rbegin(); it != open.rend(); ++it) {
      Span& s = spans[*it];
      if (s.end_us < call.end_us) continue;  // ends inside the call: does not hold it
      if (!innermost) innermost = &s;
      s.holds_wait = true;
    }
    ++waits[fmt::format("{}: {}", innermost ? innermost->name : "no CPU op", call.name)];
  }
  return waits;
}

// A string field of an event, or "" where it is missing or not a string (a trace's events carry
// fields of many kinds; one that does not match is not the event this reader looks for).
std::string string_field(const nlohmann::json& e, const char* key) {
  const auto it = e.find(key);
  return it != e.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// Kineto marks CPU work with a category (cpu_op, user_annotation, python_function); the legacy
// exporter puts it under the pid "CPU functions". GPU kernels and memcpys are neither.
bool on_cpu(const nlohmann::json& e) {
  if (const std::string cat = string_field(e, "cat"); !cat.empty()) {
    return cat == "cpu_op" || cat == "user_annotation" || cat == "Operator" || cat == "python_function";
  }
  const std::string name = string_field(e, "name");
  return e.value("pid", nlohmann::json()) == "CPU functions" || name.starts_with("aten::") || name.starts_with(kPrefix);
}

// A CUDA runtime or driver call, which Kineto records under its own categories.
bool runtime_call(const nlohmann::json& e) {
  const std::string cat = string_field(e, "cat");
  return cat == "cuda_runtime" || cat == "cuda_driver";
}

// The calls that return only once the GPU has reached them (or, for cudaFree, drained the device).
bool blocks_host(const std::string& name) {
  static constexpr std::string_view kBlocking[] = {"cudaStreamSynchronize", "cudaDeviceSynchronize",
                                                   "cudaEventSynchronize",  "cudaMemcpy",
                                                   "cudaFree",              "cuStreamSynchronize",
                                                   "cuCtxSynchronize",      "cuEventSynchronize",
                                                   "cuMemFree"};
  for (std::string_view b : kBlocking) {
    if (name == b || name.starts_with(std::string(b) + "_v")) return true;  // cuMemFree_v2
  }
  return false;
}

std::string key_of_label(const std::string& name, const std::string& source) {
  const std::string constant = name.substr(kPrefix.size()) + "_us";
  for (const HostCostField& c : host_cost_fields()) {
    if (c.key == constant && c.key != "launch_latency_us") return constant;
  }
  throw InputError({source, 0, 0, "traceEvents"},
                   fmt::format("label '{}' names no host cost; the labels are {}", name, fmt::join(trace_labels(), ", ")));
}

std::string text_of(const nlohmann::json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

// The host thread an event ran on: its process and thread ids.
std::string thread_of(const nlohmann::json& e) {
  return text_of(e.value("pid", nlohmann::json())) + "/" + text_of(e.value("tid", nlohmann::json()));
}

}  // namespace

std::vector<std::string> trace_labels() {
  std::vector<std::string> labels;
  for (const HostCostField& c : host_cost_fields()) {
    if (c.key == "launch_latency_us") continue;  // not a host span
    labels.push_back(std::string(kPrefix) + std::string(c.key.substr(0, c.key.size() - 3)));
  }
  return labels;
}

TraceFit fit_engine_trace(const EngineSpec& base, const std::filesystem::path& path) {
  const std::string source = path.string();
  const nlohmann::json doc = read_json_file(path);
  const nlohmann::json* events = doc.is_array() ? &doc : (doc.is_object() && doc.contains("traceEvents") ? &doc["traceEvents"] : nullptr);
  if (!events || !events->is_array()) {
    throw InputError({source, 0, 0, "traceEvents"}, "not a Chrome trace: expected a list of events or {\"traceEvents\": [...]}");
  }
  std::vector<Span> spans;
  std::vector<Span> blocking;  // the runtime calls that block the host
  std::size_t runtime_calls = 0;
  for (const nlohmann::json& e : *events) {
    if (!e.is_object() || string_field(e, "ph") != "X") continue;
    if (runtime_call(e)) {
      ++runtime_calls;
      const nlohmann::json ts = e.value("ts", nlohmann::json()), dur = e.value("dur", nlohmann::json());
      const std::string name = string_field(e, "name");
      if (blocks_host(name) && ts.is_number() && dur.is_number()) {
        blocking.push_back({ts.get<double>(), ts.get<double>() + dur.get<double>(), thread_of(e), "", 0, name});
      }
      continue;
    }
    if (!on_cpu(e)) continue;
    const nlohmann::json ts = e.value("ts", nlohmann::json()), dur = e.value("dur", nlohmann::json());
    if (!ts.is_number() || !dur.is_number() || !(dur.get<double>() >= 0) || !std::isfinite(ts.get<double>())) {
      throw InputError({source, 0, 0, "traceEvents"},
                       fmt::format("event '{}' has no finite ts and non-negative dur", string_field(e, "name")));
    }
    const std::string name = string_field(e, "name");
    Span s{ts.get<double>(), ts.get<double>() + dur.get<double>(), thread_of(e), "", 0, name};
    if (name.starts_with(kPrefix)) s.label = key_of_label(name, source);
    spans.push_back(std::move(s));
  }
  std::ranges::stable_sort(spans, sweep_order);
  TraceFit fit;
  fit.engine = base;
  double top_level_busy_us = 0;
  std::vector<std::size_t> open;  // indices into spans, outermost first
  std::vector<std::size_t> labelled_open;
  for (std::size_t i = 0; i < spans.size(); ++i) {
    const Span& s = spans[i];
    auto closed = [&](std::size_t j) { return spans[j].thread != s.thread || spans[j].end_us <= s.start_us; };
    while (!open.empty() && closed(open.back())) open.pop_back();
    while (!labelled_open.empty() && closed(labelled_open.back())) labelled_open.pop_back();
    if (open.empty()) {
      ++fit.top_level_ops;
      top_level_busy_us += s.end_us - s.start_us;
    }
    if (!s.label.empty()) {
      if (!labelled_open.empty()) spans[labelled_open.back()].nested_labelled_us += s.end_us - s.start_us;
      labelled_open.push_back(i);
    }
    open.push_back(i);
  }
  std::map<std::string, std::vector<double>> own_s;
  for (const Span& s : spans) {
    if (!s.label.empty()) own_s[s.label].push_back(std::max(0.0, s.end_us - s.start_us - s.nested_labelled_us) * 1e-6);
  }
  if (own_s.empty()) {
    throw InputError({source, 0, 0, "traceEvents"},
                     fmt::format("no span is labelled; wrap the calls to price in torch.profiler.record_function with "
                                 "one of {}", fmt::join(trace_labels(), ", ")));
  }
  for (const auto& [key, values] : own_s) {
    const auto [lo, hi] = std::minmax_element(values.begin(), values.end());
    FittedCost& c = fit.fitted[key];
    c = {values.size(), median(values), *lo, *hi};
    for (const HostCostField& f : host_cost_fields()) {
      if (f.key == key) fit.engine.host.*f.member = c.median_s;
    }
    fit.engine.sources[key] = fmt::format("fitted to {}: the median own host time of {} spans labelled '{}{}' "
                                          "({:.2f} to {:.2f} us)",
                                          path.filename().string(), values.size(), kPrefix,
                                          key.substr(0, key.size() - 3), c.min_s * 1e6, c.max_s * 1e6);
  }
  fit.host_s_per_top_level_op = fit.top_level_ops ? top_level_busy_us * 1e-6 / static_cast<double>(fit.top_level_ops) : 0;
  fit.runtime_calls = runtime_calls;
  fit.waits = mark_waits(spans, std::move(blocking));
  for (const Span& op : spans) {
    if (op.label == "partition_op_us") ++fit.loop_ops, fit.loop_ops_waiting += op.holds_wait;
    if (op.label == "layer_op_us") ++fit.layer_ops, fit.layer_ops_waiting += op.holds_wait;
  }
  // Each path the trace labels says for itself whether the host waits at its ops.
  std::vector<std::string> read;
  if (runtime_calls > 0 && fit.loop_ops > 0) {
    fit.engine.sync_per_loop_op = 2 * fit.loop_ops_waiting >= fit.loop_ops;
    read.push_back(fmt::format("{} of the {} spans labelled '{}partition_op'", fit.loop_ops_waiting, fit.loop_ops, kPrefix));
  }
  if (runtime_calls > 0 && fit.layer_ops > 0) {
    fit.engine.sync_per_module_op = 2 * fit.layer_ops_waiting >= fit.layer_ops;
    read.push_back(fmt::format("{} of the {} spans labelled '{}layer_op'", fit.layer_ops_waiting, fit.layer_ops, kPrefix));
  }
  if (!read.empty()) {
    fit.engine.sources["op_sync"] =
        fmt::format("fitted to {}: {} hold a call that blocks the host on the GPU (a stream, device or event "
                    "synchronisation, a synchronous copy, cudaFree); where at least half do, the host waits at each op there",
                    path.filename().string(), fmt::join(read, "; "));
  }
  return fit;
}

}  // namespace kareus::engine
