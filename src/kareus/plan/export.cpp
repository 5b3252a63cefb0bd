#include "kareus/plan/export.hpp"

#include <fmt/format.h>

#include <cmath>

#include "kareus/core/error.hpp"
#include "kareus/core/io.hpp"

namespace kareus::plan {
namespace {

std::string frequency_lists(const Plan& plan) {
  std::string out = "[\n";
  for (const auto& stage : plan.stages) {
    out += "    [";
    for (std::size_t k = 0; k < stage.size(); ++k) {
      out += fmt::format("{}('{}', {})", k ? ", " : "", pipeline::to_string(stage[k].type),
                         static_cast<long>(std::lround(stage[k].freq_mhz)));
    }
    out += "],\n";
  }
  return out + "]\n";
}

std::string config_strings(const nlohmann::json& partitions, const std::string& where) {
  std::string out;
  for (const auto& p : partitions) {
    if (!p.contains("slot") || !p.contains("sms")) {
      throw InputError({where, 0, 0, "knob.partitions"}, "each partition needs 'slot' and 'sms'");
    }
    out += fmt::format("'{}-none-{}-1024', ", p.at("slot").get<std::string>(), p.at("sms").get<int>());
  }
  return out;
}

}  // namespace

std::string kareus_artifact_freqs(const Plan& plan) { return frequency_lists(plan); }

std::string zeus_pfo_schedule(const Plan& plan) { return frequency_lists(plan); }

std::string kareus_artifact_scheds(const Plan& plan) {
  std::string out = "[\n";
  for (std::size_t s = 0; s < plan.stages.size(); ++s) {
    out += "    [";
    for (std::size_t k = 0; k < plan.stages[s].size(); ++k) {
      const PlannedInstruction& ins = plan.stages[s][k];
      std::string where = fmt::format("stages[{}].instructions[{}]", s, k);
      if (!ins.knob.is_object() || !ins.knob.contains("partitions")) {
        throw InputError({where, 0, 0, "knob"},
                         "has no per-partition knobs; a clock-only plan exports as zeus-pfo, or as the "
                         "artifact's freqs file alone");
      }
      std::string tuple;
      if (ins.knob.contains("recompute")) tuple += config_strings(ins.knob.at("recompute"), where);
      tuple += config_strings(ins.knob.at("partitions"), where);
      out += fmt::format("{}({})", k ? ", " : "", tuple);
    }
    out += "],\n";
  }
  return out + "]\n";
}

std::vector<std::string> export_plan(const Plan& plan, std::string_view format,
                                     const std::filesystem::path& dir) {
  if (format == "zeus-pfo") {
    std::string text = zeus_pfo_schedule(plan);
    write_file_atomic(dir / "freqs_pipeline_00000.py", text);
    return {"freqs_pipeline_00000.py"};
  }
  if (format == "kareus-artifact") {
    std::string scheds = kareus_artifact_scheds(plan);  // first: it is the one that can fail
    std::string freqs = kareus_artifact_freqs(plan);
    write_file_atomic(dir / "freqs_pipeline_00000.py", freqs);
    write_file_atomic(dir / "scheds_pipeline_00000.py", scheds);
    return {"freqs_pipeline_00000.py", "scheds_pipeline_00000.py"};
  }
  throw InputError({"", 0, 0, "--format"},
                   fmt::format("'{}' is not an export format: use kareus-artifact or zeus-pfo", format));
}

}  // namespace kareus::plan
