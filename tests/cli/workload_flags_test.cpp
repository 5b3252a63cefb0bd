// resolve_workload names where an unknown model or GPU name came from: the config file's key, or
// the flag (a fuzz finding: `gpu: a100-sx?4-40gb` in a job file was refused naming neither).
#include "kareus/cli/workload_flags.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "kareus/core/error.hpp"

namespace kareus::cli {
namespace {

using ::testing::HasSubstr;

std::string refusal(const WorkloadFlags& flags) {
  try {
    resolve_workload(flags);
  } catch (const InputError& e) {
    return e.what();
  }
  return "accepted";
}

TEST(WorkloadFlags, AnUnknownNameIsRefusedWhereItCameFrom) {
  const auto job = std::filesystem::temp_directory_path() / "kareus-workload-flags-test.yaml";
  std::ofstream(job) << "model: llama-3.2-3b\ngpu: a100-sxm4-4gb\n";
  WorkloadFlags from_file;
  from_file.config = job.string();
  EXPECT_THAT(refusal(from_file), HasSubstr(job.string() + ": field 'gpu': unknown GPU 'a100-sxm4-4gb'"));
  std::ofstream(job) << "model: llama-9\n";
  EXPECT_THAT(refusal(from_file), HasSubstr(job.string() + ": field 'model': unknown model 'llama-9'"));
  std::filesystem::remove(job);

  WorkloadFlags from_flags;
  from_flags.gpu = "h300";
  EXPECT_THAT(refusal(from_flags), HasSubstr("field '--gpu': unknown GPU 'h300'"));
  from_flags.gpu = "a100-sxm4-40gb";
  from_flags.model = "llama-9";
  EXPECT_THAT(refusal(from_flags), HasSubstr("field '--model': unknown model 'llama-9'"));
}

}  // namespace
}  // namespace kareus::cli
