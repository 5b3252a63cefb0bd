// The Kareus artifact's measured plans (plans.csv and plan_clocks.csv, `kareus hw check --plans`),
// given as two files (files_input.hpp): read by read_artifact_plans.
#include <cstddef>
#include <cstdint>

#include "files_input.hpp"
#include "fuzz_support.hpp"
#include "kareus/calibrate/plan_check.hpp"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  kareus::fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace kareus;
  const auto root = kareus::fuzz::scratch_dir() / "artifact-plans";
  fuzz::write_files(data, size, root);
  fuzz::holds_contract(".csv", [&] { calibrate::read_artifact_plans(root / "plans.csv", root / "plan_clocks.csv"); });
  return 0;
}
