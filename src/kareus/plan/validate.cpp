#include "kareus/plan/validate.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include "kareus/core/error.hpp"
#include "kareus/schedule/schedule.hpp"

namespace kareus::plan {
namespace {

struct GpuLimits {
  std::string name;
  double min_clock_mhz = 0;
  double max_clock_mhz = 0;
  int sms = 0;
};

std::optional<GpuLimits> gpu_limits(const Plan& plan, const std::string& source) {
  if (!plan.source.is_object() || !plan.source.contains("gpu")) return std::nullopt;
  const nlohmann::json& g = plan.source.at("gpu");
  const bool ok = g.is_object() && g.contains("name") && g.at("name").is_string() && g.contains("min_clock_mhz") &&
                  g.at("min_clock_mhz").is_number() && g.contains("max_clock_mhz") && g.at("max_clock_mhz").is_number() &&
                  g.contains("sms") && g.at("sms").is_number_integer();
  if (!ok) {
    throw InputError({source, 0, 0, "source.gpu"},
                     "expected {\"name\", \"min_clock_mhz\", \"max_clock_mhz\", \"sms\"} (the GPU the plan was made for)");
  }
  GpuLimits limits{g.at("name").get<std::string>(), g.at("min_clock_mhz").get<double>(),
                   g.at("max_clock_mhz").get<double>(), g.at("sms").get<int>()};
  if (!(limits.min_clock_mhz > 0 && limits.min_clock_mhz <= limits.max_clock_mhz) || limits.sms < 2) {
    throw InputError({source, 0, 0, "source.gpu"}, "needs 0 < min_clock_mhz <= max_clock_mhz and at least 2 SMs");
  }
  return limits;
}

using LaunchSlots = std::map<std::string, std::vector<std::string>>;

std::optional<LaunchSlots> launch_slots(const Plan& plan, const std::string& source) {
  if (!plan.source.is_object() || !plan.source.contains("launch_slots")) return std::nullopt;
  const nlohmann::json& doc = plan.source.at("launch_slots");
  LaunchSlots slots;
  if (doc.is_object()) {
    for (const auto& [key, list] : doc.items()) {
      if (!list.is_array() || !std::all_of(list.begin(), list.end(), [](const auto& s) { return s.is_string(); })) {
        slots.clear();
        break;
      }
      slots[key] = list.get<std::vector<std::string>>();
    }
  }
  if (slots.empty()) {
    throw InputError({source, 0, 0, "source.launch_slots"},
                     "expected an object of partition keys, each a list of its launch slots");
  }
  return slots;
}

void check_knob(const PartitionKnob& k, const std::string& path, const std::string& source,
                const std::optional<GpuLimits>& gpu, const std::optional<LaunchSlots>& slots) {
  const bool sequential = k.slot == "none";
  if (slots) {
    const auto it = slots->find(k.key);
    if (it == slots->end()) {
      throw InputError({source, 0, 0, path + ".key"}, fmt::format("'{}' is not a partition of this plan's workload", k.key));
    }
    if (!sequential && std::find(it->second.begin(), it->second.end(), k.slot) == it->second.end()) {
      throw InputError({source, 0, 0, path + ".slot"},
                       fmt::format("'{}' is not a launch slot of {} (its slots: {}, or none)", k.slot, k.key,
                                   it->second.empty() ? std::string("no launch slot") : fmt::format("{}", fmt::join(it->second, ", "))));
    }
  } else if (k.slot.empty()) {
    throw InputError({source, 0, 0, path + ".slot"}, "is empty (a launch slot, or none)");
  }
  if (!sequential && k.sms < 1) {
    throw InputError({source, 0, 0, path + ".sms"}, fmt::format("{} SMs for an overlapped collective; it needs at least 1", k.sms));
  }
  if (gpu && k.sms > gpu->sms - 1) {
    throw InputError({source, 0, 0, path + ".sms"},
                     fmt::format("{} SMs for the collective does not fit {} ({} SMs)", k.sms, gpu->name, gpu->sms));
  }
}

void check_instruction(const PlannedInstruction& ins, const std::string& path, const std::string& source,
                       const std::optional<GpuLimits>& gpu, const std::optional<LaunchSlots>& slots) {
  if (!(ins.time_s > 0) || !std::isfinite(ins.time_s)) {
    throw InputError({source, 0, 0, path + ".time_s"}, fmt::format("{} is not a positive time in seconds", ins.time_s));
  }
  if (!(ins.energy_j >= 0) || !std::isfinite(ins.energy_j)) {
    throw InputError({source, 0, 0, path + ".energy_j"}, fmt::format("{} is not a non-negative energy in joules", ins.energy_j));
  }
  if (!(ins.freq_mhz > 0) || !std::isfinite(ins.freq_mhz)) {
    throw InputError({source, 0, 0, path + ".freq_mhz"}, fmt::format("{} is not a positive SM clock in MHz", ins.freq_mhz));
  }
  if (gpu && (ins.freq_mhz < gpu->min_clock_mhz - 1e-6 || ins.freq_mhz > gpu->max_clock_mhz + 1e-6)) {
    throw InputError({source, 0, 0, path + ".freq_mhz"},
                     fmt::format("{} MHz is outside {}'s SM clocks, {}..{} MHz", ins.freq_mhz, gpu->name,
                                 gpu->min_clock_mhz, gpu->max_clock_mhz));
  }
  const InstructionKnobs knobs = instruction_knobs(*ins.knob, path + ".knob", source);
  for (std::size_t i = 0; i < knobs.partitions.size(); ++i) {
    check_knob(knobs.partitions[i], fmt::format("{}.knob.partitions[{}]", path, i), source, gpu, slots);
  }
  for (std::size_t i = 0; i < knobs.recompute.size(); ++i) {
    check_knob(knobs.recompute[i], fmt::format("{}.knob.recompute[{}]", path, i), source, gpu, slots);
  }
}

}  // namespace

nlohmann::json gpu_limits_json(const hardware::GpuSpec& gpu) {
  return {{"name", gpu.name}, {"min_clock_mhz", gpu.min_clock_mhz()}, {"max_clock_mhz", gpu.max_clock_mhz}, {"sms", gpu.sms}};
}

void validate(const Plan& plan, const std::string& source) {
  if (!(plan.time_s > 0) || !std::isfinite(plan.time_s)) {
    throw InputError({source, 0, 0, "time_s"}, fmt::format("{} is not a positive time in seconds", plan.time_s));
  }
  if (!std::isfinite(plan.energy_j)) throw InputError({source, 0, 0, "energy_j"}, "is not finite");
  const std::optional<GpuLimits> gpu = gpu_limits(plan, source);
  const std::optional<LaunchSlots> slots = launch_slots(plan, source);
  std::optional<schedule::PipelineSchedule> schedule;
  try {
    schedule = schedule::PipelineSchedule::make(plan.schedule, plan.num_stages, plan.num_microbatches, plan.virtual_stages);
  } catch (const InputError& e) {
    throw InputError({source, 0, 0, "schedule"}, e.what());
  }
  for (int s = 0; s < plan.num_stages; ++s) {
    const auto order = schedule->stage_order(s);
    const auto& listed = plan.stages.at(static_cast<std::size_t>(s));
    if (listed.size() != order.size()) {
      throw InputError({source, 0, 0, fmt::format("stages[{}].instructions", s)},
                       fmt::format("lists {} instructions; {} with {} microbatches runs {} on this stage", listed.size(),
                                   schedule::to_string(plan.schedule), plan.num_microbatches, order.size()));
    }
    for (std::size_t k = 0; k < order.size(); ++k) {
      const PlannedInstruction& p = listed[k];
      const schedule::Instruction& o = order[k];
      const std::string path = fmt::format("stages[{}].instructions[{}]", s, k);
      if (p.type != o.type || p.microbatch != o.microbatch || p.chunk != o.chunk || p.part != o.part) {
        throw InputError({source, 0, 0, path},
                         fmt::format("is not what the {} schedule runs there ({} of microbatch {}, chunk {})",
                                     schedule::to_string(plan.schedule), schedule::to_string(schedule::option_slot(o)),
                                     o.microbatch, o.chunk));
      }
      check_instruction(p, path, source, gpu, slots);
    }
  }
}

void validate_set(const std::vector<Plan>& plans, const std::string& source) {
  if (plans.empty()) throw InputError({source, 0, 0, "plans"}, "holds no plans");
  for (std::size_t i = 0; i < plans.size(); ++i) {
    const std::string where = fmt::format("{} plans[{}]", source, i);
    validate(plans[i], where);
    check_same_job(plans[i], plans.front(), where);
  }
}

void check_same_job(const Plan& p, const Plan& first, const std::string& where) {
  if (p.schedule != first.schedule || p.num_stages != first.num_stages || p.num_microbatches != first.num_microbatches ||
      p.virtual_stages != first.virtual_stages) {
    throw InputError({where, 0, 0, "schedule"},
                     fmt::format("runs {} over {} stages, {} microbatches and {} chunks, but plans[0] runs {} over {}, {} "
                                 "and {}: a set's plans must be of one job",
                                 schedule::to_string(p.schedule), p.num_stages, p.num_microbatches, p.virtual_stages,
                                 schedule::to_string(first.schedule), first.num_stages, first.num_microbatches,
                                 first.virtual_stages));
  }
}

}  // namespace kareus::plan
