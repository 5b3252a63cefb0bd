// Shared pieces of the runtime tests: a small clock-only plan (the knobs of real plans are tested
// on the real planner's output, real_plan_cursor_test.cpp), a fake GPU that logs its clock calls to
// a file (so a parent process can see what a child did), temporary directories, and string checks.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "kareus/schedule/schedule.hpp"
#include "kareus/plan/plan.hpp"
#include "kareus/runtime/fake_gpu.hpp"
#include "test_util.hpp"

namespace kareus::runtime::testing {

using kareus::testing::Contains;
using kareus::testing::input_error_of;

inline std::filesystem::path temp_dir(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() /
             ("kareus-runtime-" + name + "-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

inline std::string slurp(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A 1F1B plan of `stages` stages and `microbatches` microbatches. Clocks cycle through 1410, 1005
// and 810 MHz; forward takes 0.05 s and 20 J, backward 0.1 s and 40 J; no communication knobs.
inline plan::Plan make_test_plan(int stages = 2, int microbatches = 2) {
  auto schedule =
      schedule::PipelineSchedule::make(schedule::ScheduleKind::k1F1B, stages, microbatches);
  plan::Plan p;
  p.schedule = schedule::ScheduleKind::k1F1B;
  p.num_stages = stages;
  p.num_microbatches = microbatches;
  p.p_blocking_w = 85;
  p.unit_time_s = 1e-3;
  p.energy_scope = plan::energy_scope_for(stages);
  p.time_s = 1;
  p.energy_j = 100;
  const int clocks[] = {1410, 1005, 810};
  int k = 0;
  for (int s = 0; s < stages; ++s) {
    std::vector<plan::PlannedInstruction> list;
    for (const auto& ins : schedule.stage_order(s)) {
      bool forward = ins.type == schedule::InstructionType::kForward;
      list.push_back({ins.type, ins.microbatch, static_cast<double>(clocks[k++ % 3]), nullptr,
                      forward ? 0.05 : 0.1, forward ? 20.0 : 40.0});
    }
    p.stages.push_back(list);
  }
  return p;
}

// A fake GPU that appends every SM-clock call to a file ("lock <mhz>" / "reset"), flushed at once,
// so that another process can check what happened even after this one was killed.
class FileLoggingGpu : public FakeGpu {
 public:
  FileLoggingGpu(std::filesystem::path log, FakeGpuConfig config = make_fake_gpu_config())
      : FakeGpu(std::move(config)), log_(std::move(log)) {}
  void set_locked_sm_clocks(int min_clock_mhz, int max_clock_mhz) override {
    FakeGpu::set_locked_sm_clocks(min_clock_mhz, max_clock_mhz);
    append("lock " + std::to_string(max_clock_mhz));
  }
  void reset_locked_sm_clocks() override {
    FakeGpu::reset_locked_sm_clocks();
    append("reset");
  }

 private:
  void append(const std::string& line) {
    if (FILE* f = std::fopen(log_.c_str(), "a")) {
      std::fprintf(f, "%s\n", line.c_str());
      std::fclose(f);
    }
  }
  std::filesystem::path log_;
};

}  // namespace kareus::runtime::testing
