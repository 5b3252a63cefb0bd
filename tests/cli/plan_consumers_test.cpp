// Every consumer of a plan holds it to one validator (plan/validate.hpp): the same malformed plan
// gets the same one-line error from `kareus simulate`, `replay`, `export` in both formats and `hw
// check --plans`, and the same message from the runtime's C API (what the Python package and the
// C++ cursor raise), with exit code 2 and nothing written. The plans are the real producer's
// (`kareus plan`), broken one field at a time.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "cli/cli_fixture.hpp"
#include "kareus/runtime/kareus_runtime.h"

namespace kareus::testing {
namespace {

// The real producer's plans, made once per process: a TP job and a CP job (its twelve partitions'
// slots), both small.
const std::filesystem::path& produced() {
  static const struct Produced {
    std::filesystem::path dir = std::filesystem::temp_directory_path() / ("kareus-plan-consumers-" + std::to_string(::getpid()));
    Produced() {
      std::filesystem::remove_all(dir);
      std::filesystem::create_directories(dir);
      for (const auto& [job, flags] : {std::pair{"tp", ""}, std::pair{"cp", " --tp 4 --cp 2 --seq 8192"}}) {
        const CliResult r = run_kareus(fmt::format("plan --microbatches 4 --no-baselines{} --out {}", flags,
                                                   (dir / job).string()),
                                       dir, job);
        if (r.exit_code != 0) ADD_FAILURE() << r.err;
      }
    }
    ~Produced() { std::filesystem::remove_all(dir); }
  } produced;
  return produced.dir;
}

nlohmann::json read_json(const std::filesystem::path& p) { return nlohmann::json::parse(slurp(p)); }

// One field of one instruction broken, or the order of a stage: what the validator must refuse.
nlohmann::json broken(nlohmann::json plan, std::string& what) {
  auto& stages = plan["stages"];
  const auto s = *rc::gen::inRange<std::size_t>(0, stages.size());
  auto& list = stages[s]["instructions"];
  const auto k = *rc::gen::inRange<std::size_t>(0, list.size());
  auto& ins = list[k];
  nlohmann::json* knob = nullptr;
  if (ins.contains("knob") && !ins["knob"]["partitions"].empty()) {
    auto& parts = ins["knob"]["partitions"];
    knob = &parts[*rc::gen::inRange<std::size_t>(0, parts.size())];
  }
  switch (*rc::gen::inRange(0, knob ? 9 : 5)) {
    case 0: ins["freq_mhz"] = *rc::gen::element(-5.0, 0.0, 100.0, 5000.0, 1e7); what = "clock"; break;
    case 1: ins["time_s"] = *rc::gen::element(0.0, -1.0); what = "time"; break;
    case 2: ins["energy_j"] = -1.0; what = "energy"; break;
    case 3: list.erase(k); what = "a missing instruction"; break;
    case 4: ins["microbatch"] = (ins["microbatch"].get<int>() + 1) % plan["num_microbatches"].get<int>(); what = "order"; break;
    case 5: (*knob)["sms"] = *rc::gen::element<long long>(-3, 108, 500, 1'000'000'000'000LL); what = "SMs"; break;
    case 6: (*knob)["slot"] = *rc::gen::element<std::string>("nowhere_0", "linear_9", ""); what = "slot"; break;
    case 7: (*knob)["key"] = "bogus_key"; what = "key"; break;
    default:
      if ((*knob)["slot"] == "none") (*knob)["slot"] = "linear_9";
      (*knob)["sms"] = 0;
      what = "SMs of an overlapped knob";
  }
  return plan;
}

RC_GTEST_PROP(PlanConsumers, EveryConsumerRefusesAMalformedPlanWithTheSameLine, ()) {
  const std::string job = *rc::gen::element<std::string>("tp", "cp");
  std::string what;
  const nlohmann::json plan = broken(read_json(produced() / job / "plan.json"), what);
  static int round = 0;
  const auto case_dir = produced() / fmt::format("case{}", round++);
  std::filesystem::create_directories(case_dir);
  const std::string file = (case_dir / "plan.json").string();
  std::ofstream(file) << plan.dump(1);
  const std::string out = (case_dir / "out").string();

  const std::vector<std::string> commands = {
      "simulate --plan " + file + " --trace " + out + "/trace.json",
      "replay --plan " + file + " --energy-log " + out + "/energy.csv",
      "export --plan " + file + " --format kareus-artifact --out " + out,
      "export --plan " + file + " --format zeus-pfo --out " + out,
      "hw check --gpu a100-sxm4-40gb --plans " + file,
  };
  std::vector<std::string> lines;
  for (std::size_t i = 0; i < commands.size(); ++i) {
    std::filesystem::create_directories(out);
    const CliResult r = run_kareus(commands[i], case_dir, std::to_string(i));
    RC_ASSERT(r.exit_code == 2);
    RC_ASSERT(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    RC_ASSERT(std::filesystem::is_empty(out));
    lines.push_back(r.err);
  }
  for (const std::string& line : lines) {
    if (line != lines.front()) RC_FAIL(fmt::format("{}: '{}' against '{}'", what, line, lines.front()));
  }
  kareus_cursor* cursor = nullptr;
  RC_ASSERT(kareus_cursor_new(file.c_str(), -1, 0, nullptr, &cursor) == KAREUS_ERROR_INPUT);
  RC_ASSERT(lines.front() == fmt::format("kareus: error: {}\n", kareus_last_error()));
  RC_ASSERT(lines.front().find(file) != std::string::npos);
}

// The producer's own plans pass every consumer (the property above breaks what passes here).
TEST(PlanConsumers, TheProducersPlansPassEveryConsumer) {
  for (const std::string job : {"tp", "cp"}) {
    const std::string file = (produced() / job / "plan.json").string();
    const std::string out = (produced() / job / "exported").string();
    EXPECT_EQ(run_kareus("simulate --plan " + file, produced(), job + "s").exit_code, 0);
    EXPECT_EQ(run_kareus("replay --plan " + file, produced(), job + "r").exit_code, 0);
    EXPECT_EQ(run_kareus("export --plan " + file + " --format kareus-artifact --out " + out, produced(), job + "a").exit_code, 0);
    EXPECT_EQ(run_kareus("export --plan " + file + " --format zeus-pfo --out " + out, produced(), job + "z").exit_code, 0);
    kareus_cursor* cursor = nullptr;
    ASSERT_EQ(kareus_cursor_new(file.c_str(), -1, 0, nullptr, &cursor), KAREUS_OK) << kareus_last_error();
    kareus_cursor_free(cursor);
    const nlohmann::json source = read_json(file)["source"];
    EXPECT_EQ(source["gpu"]["name"], "a100-sxm4-40gb");
    EXPECT_EQ(source["gpu"]["sms"], 108);
    EXPECT_TRUE(source["launch_slots"].contains(job == "tp" ? "fwd_attn" : "fwd_qkv_ag")) << source.dump();
  }
}

}  // namespace
}  // namespace kareus::testing
