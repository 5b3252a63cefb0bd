// resolve_workload names where a model, GPU or engine that does not load came from: the config
// file's key, or the flag (fuzz findings: `gpu: a100-sx?4-40gb` in a job file was refused naming neither, and
// so was `gpu: a05/x`, a path to no file).
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
  from_flags.model = "llama-3.2-3b";
  from_flags.engine = "pytorch-9";
  EXPECT_THAT(refusal(from_flags), HasSubstr("field '--engine': unknown engine 'pytorch-9'"));
}

TEST(WorkloadFlags, AFileTheNamePointsToIsNamedBesideWhereTheNameCameFrom) {
  const auto dir = std::filesystem::temp_directory_path() / "kareus-workload-flags-files";
  std::filesystem::create_directories(dir);
  const auto job = dir / "job.yaml";
  const auto missing = dir / "no-such-gpu.json";
  const auto bad = dir / "bad-model.json";
  std::ofstream(bad) << "{\"hidden_size\": \"wide\"}";
  std::ofstream(job) << "gpu: " << missing.string() << "\n";
  WorkloadFlags from_file;
  from_file.config = job.string();
  EXPECT_THAT(refusal(from_file), HasSubstr(job.string() + ": field 'gpu': " + missing.string() + ": no such file"));
  std::ofstream(job) << "model: " << bad.string() << "\n";
  const std::string bad_model = refusal(from_file);
  EXPECT_THAT(bad_model, HasSubstr(job.string() + ": field 'model': " + bad.string() + ": "));

  WorkloadFlags from_flags;
  from_flags.gpu = missing.string();
  EXPECT_THAT(refusal(from_flags), HasSubstr("field '--gpu': " + missing.string() + ": no such file"));
  from_flags.gpu = "a100-sxm4-40gb";
  from_flags.model = bad.string();
  EXPECT_THAT(refusal(from_flags), HasSubstr("field '--model': " + bad.string() + ": "));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kareus::cli
