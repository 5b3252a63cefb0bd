#include "kareus/cli/workload_flags.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "kareus/core/error.hpp"
#include "kareus/workload/config_file.hpp"

namespace kareus::cli {
namespace {

const std::vector<std::string>& workload_keys() {
  static const std::vector<std::string> keys = {"model",
                                                "gpu",
                                                "tp",
                                                "cp",
                                                "pp",
                                                "dp",
                                                "mbs",
                                                "seq",
                                                "microbatches",
                                                "checkpointing",
                                                "hidden_dropout",
                                                "layers_per_stage"};
  return keys;
}

// The config key spelt as a flag, or a config key spelt with dashes, both map to the same key.
std::string normalized(std::string key) {
  std::replace(key.begin(), key.end(), '-', '_');
  return key;
}

// Runs `load`, a model, GPU or engine loaded by the name that `flag` takes and a setting gave; a
// refusal is rethrown at `where`, the setting (a config file's key or the flag), without the flag's
// name where the loader put it, and with the file the name points to, if missing or bad, named in
// the message.
template <typename Load>
auto loaded_at(const std::string& flag, const InputLocation& where, Load load) {
  try {
    return load();
  } catch (const InputError& e) {
    if (e.location().file == where.file && e.location().field == where.field) throw;
    std::string what = e.what();
    if (const std::string named = "field '" + flag + "': "; what.starts_with(named)) what.erase(0, named.size());
    throw InputError(where, what);
  }
}

}  // namespace

void add_workload_flags(CLI::App& cmd, WorkloadFlags& f) {
  auto& o = f.options;
  cmd.add_option("--config", f.config,
                 "Workload from a JSON or YAML file with the flags' names as keys");
  o["model"] =
      cmd.add_option("--model", f.model, "Model: a name under data/models/ or a .json file")
          ->capture_default_str();
  o["gpu"] = cmd.add_option("--gpu", f.gpu, "GPU preset (data/gpus/) or a .json file")
                 ->capture_default_str();
  o["tp"] = cmd.add_option("--tp", f.tp, "Tensor-parallel size")->capture_default_str();
  o["cp"] = cmd.add_option("--cp", f.cp, "Context-parallel size")->capture_default_str();
  o["pp"] = cmd.add_option("--pp", f.pp, "Pipeline-parallel size (stages)")->capture_default_str();
  o["dp"] = cmd.add_option("--dp", f.dp, "Data-parallel size")->capture_default_str();
  o["mbs"] = cmd.add_option("--mbs", f.mbs, "Microbatch size in sequences (even: two nanobatches)")
                 ->capture_default_str();
  o["seq"] = cmd.add_option("--seq", f.seq, "Sequence length in tokens")->capture_default_str();
  o["microbatches"] = cmd.add_option("--microbatches", f.microbatches, "Microbatches per iteration")
                          ->capture_default_str();
  o["checkpointing"] =
      cmd.add_option("--checkpointing", f.checkpointing, "Activation checkpointing: full or none")
          ->capture_default_str();
  o["hidden_dropout"] =
      cmd.add_option("--hidden-dropout", f.hidden_dropout,
                     "Dropout probability of the bias-dropout-adds (Megatron's hidden_dropout); above 0 "
                     "each writes and reads back a one-byte mask")
          ->capture_default_str();
  o["layers_per_stage"] =
      cmd.add_option("--layers-per-stage", f.layers_per_stage,
                     "Layers of each stage, e.g. 15,13 (default: even, one layer moved "
                     "from the last stage to the first)");
  // Like --gpu, a setting of the device: not a workload key, free beside --preset.
  cmd.add_option("--power-limit", f.power_limit_w,
                 "GPU power limit in W for the job, as nvidia-smi -pl sets it (default: the GPU's TDP)");
}

void add_engine_flag(CLI::App& cmd, std::string& engine) {
  // Like --gpu, a setting of the platform the job runs on: free beside --preset.
  cmd.add_option("--engine", engine,
                 "How the framework issues the work from the host: an engine under data/engines/ or a .json file "
                 "(megatron-te-eager: the Kareus artifact's eager PyTorch, as its plans were measured; cuda-graphs; "
                 "kareus-executor)")
      ->capture_default_str();
}

engine::EngineSpec load_engine_flag(std::string_view value) {
  return loaded_at("--engine", {"", 0, 0, "--engine"}, [&] { return engine::load_engine(value); });
}

void reject_workload_flags(const WorkloadFlags& flags, std::string_view fixing_flag) {
  auto conflict = [&](const std::string& flag) {
    return InputError({"", 0, 0, std::string(fixing_flag)},
                      fmt::format("{} fixes the workload; it cannot be combined with {}", fixing_flag, flag));
  };
  if (!flags.config.empty()) throw conflict("--config");
  for (const auto& [key, option] : flags.options) {
    if (key != "gpu" && option->count() > 0) throw conflict(option->get_name());
  }
}

// One workload key of a config file onto the flags it stands for.
void assign_config_value(const std::string& key, const nlohmann::json& value, const InputLocation& where,
                         WorkloadFlags& f, std::vector<int>& layers) {
  auto text = [&]() -> std::string {
    if (!value.is_string()) throw InputError(where, fmt::format("must be a string, got {}", value.dump()));
    return value.get<std::string>();
  };
  auto integer = [&]() -> int {
    if (!value.is_number_integer()) throw InputError(where, fmt::format("must be an integer, got {}", value.dump()));
    return value.get<int>();
  };
  if (key == "model") {
    f.model = text();
  } else if (key == "gpu") {
    f.gpu = text();
  } else if (key == "tp") {
    f.tp = integer();
  } else if (key == "cp") {
    f.cp = integer();
  } else if (key == "pp") {
    f.pp = integer();
  } else if (key == "dp") {
    f.dp = integer();
  } else if (key == "mbs") {
    f.mbs = integer();
  } else if (key == "seq") {
    f.seq = integer();
  } else if (key == "microbatches") {
    f.microbatches = integer();
  } else if (key == "checkpointing") {
    f.checkpointing = text();
  } else if (key == "hidden_dropout") {
    if (!value.is_number()) throw InputError(where, fmt::format("must be a number, got {}", value.dump()));
    f.hidden_dropout = value.get<double>();
  } else if (key == "layers_per_stage") {
    if (!value.is_array()) {
      f.layers_per_stage = text();
      return;
    }
    for (const auto& n : value) {
      if (!n.is_number_integer()) throw InputError(where, fmt::format("must list integers, got {}", value.dump()));
      layers.push_back(n.get<int>());
    }
    if (layers.empty()) throw InputError(where, "must list each stage's layers");
  }
}

// What --config gives: its workload keys onto `f` where the command line gave none (the command
// line wins), its extra keys into `extra`; returns each workload key's spelling in the file.
std::map<std::string, std::string> read_config(const WorkloadFlags& flags, const std::vector<std::string>& extra_keys,
                                               WorkloadFlags& f, std::vector<int>& layers,
                                               nlohmann::json& extra) {
  std::map<std::string, std::string> from_config;  // workload key -> its key in the config file
  const nlohmann::json doc = workload::read_config_document(f.config);
  auto given = [&](const std::string& key) {
    auto it = flags.options.find(key);
    return it != flags.options.end() && it->second && it->second->count() > 0;
  };
  for (const auto& item : doc.items()) {  // not a structured binding: clang before 16 cannot capture one
    const std::string& raw_key = item.key();
    const std::string key = normalized(raw_key);
    const InputLocation where{f.config, 0, 0, raw_key};
    if (std::find(extra_keys.begin(), extra_keys.end(), raw_key) != extra_keys.end()) {
      extra[raw_key] = item.value();
      continue;
    }
    const auto& known = workload_keys();
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      std::vector<std::string> all = known;
      all.insert(all.end(), extra_keys.begin(), extra_keys.end());
      throw InputError(where, fmt::format("unknown key; known keys: {}", fmt::join(all, ", ")));
    }
    if (given(key)) continue;
    from_config[key] = raw_key;
    assign_config_value(key, item.value(), where, f, layers);
  }
  return from_config;
}

ResolvedWorkload resolve_workload(const WorkloadFlags& flags,
                                  const std::vector<std::string>& extra_keys) {
  WorkloadFlags f = flags;
  ResolvedWorkload out;
  std::vector<int> config_layers;
  std::map<std::string, std::string> from_config;  // workload key -> its key in the config file
  if (!f.config.empty()) from_config = read_config(flags, extra_keys, f, config_layers, out.extra);

  // Where the model's and the GPU's names came from: the config file's key, else the flag.
  auto setting = [&](const std::string& key) {
    const auto it = from_config.find(key);
    return it != from_config.end() ? InputLocation{f.config, 0, 0, it->second} : InputLocation{"", 0, 0, "--" + key};
  };
  out.model = loaded_at("--model", setting("model"), [&] { return workload::load_model(f.model); });
  out.gpu = loaded_at("--gpu", setting("gpu"), [&] { return hardware::load_gpu(f.gpu); });
  if (f.power_limit_w) out.gpu = hardware::with_power_limit(std::move(out.gpu), *f.power_limit_w, "--power-limit");
  out.engine = load_engine_flag(f.engine);
  workload::ParallelConfig p;
  p.tp = f.tp;
  p.cp = f.cp;
  p.pp = f.pp;
  p.dp = f.dp;
  p.microbatch_size = f.mbs;
  p.seq_len = f.seq;
  p.microbatches = f.microbatches;
  auto checkpointing = workload::parse_checkpointing(f.checkpointing);
  if (!checkpointing) {
    throw InputError({"", 0, 0, "--checkpointing"},
                     fmt::format("expected full or none, got '{}'", f.checkpointing));
  }
  p.checkpointing = *checkpointing;
  p.hidden_dropout = f.hidden_dropout;
  if (!f.layers_per_stage.empty()) {
    p.layers_per_stage = workload::parse_layers_per_stage(f.layers_per_stage, "--layers-per-stage");
  } else {
    p.layers_per_stage = config_layers;
  }
  out.parallel = workload::validated(out.model, p);
  return out;
}

nlohmann::json journal_identity(const ResolvedWorkload& w) { return workload::cost_identity(w.model, w.parallel, w.gpu.name); }

std::string describe(const ResolvedWorkload& w) {
  const auto& p = w.parallel;
  return fmt::format(
      "{} on {}: TP {}, CP {}, PP {} ({} layers), DP {}, mbs {}, seq {}, {} microbatches, "
      "{} checkpointing{}",
      w.model.display_name, w.gpu.display_name, p.tp, p.cp, p.pp,
      fmt::join(p.layers_per_stage, "/"), p.dp, p.microbatch_size, p.seq_len, p.microbatches,
      workload::to_string(p.checkpointing),
      p.hidden_dropout > 0 ? fmt::format(", hidden dropout {:g}", p.hidden_dropout) : std::string());
}

}  // namespace kareus::cli
