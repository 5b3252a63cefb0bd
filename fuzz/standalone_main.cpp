// Runs a fuzz target over files and directories of inputs without libFuzzer: how a build without
// clang replays every seed and every input a fuzzer once failed on (fuzz/regressions/), so that the
// contract stays tested everywhere. All targets are linked in, each entry point renamed by the
// build (fuzz/CMakeLists.txt). Exits 0 when every input holds the contract; a broken one aborts
// (fuzz_support.hpp).
//   fuzz_replay plan fuzz/corpus/plan fuzz/regressions/plan
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_support.hpp"

#define X(name)                                                        \
  extern "C" int kareus_fuzz_init_##name(int* argc, char*** argv);     \
  extern "C" int kareus_fuzz_##name(const std::uint8_t* data, std::size_t size);
KAREUS_FUZZ_TARGETS
#undef X

namespace {

struct Target {
  std::string_view name;
  int (*init)(int*, char***);
  int (*one_input)(const std::uint8_t*, std::size_t);
};

#define X(name) Target{#name, kareus_fuzz_init_##name, kareus_fuzz_##name},
constexpr Target kTargets[] = {KAREUS_FUZZ_TARGETS};
#undef X

}  // namespace

int main(int argc, char** argv) {
  const Target* target = nullptr;
  for (const Target& t : kTargets) {
    if (argc > 1 && t.name == argv[1]) target = &t;
  }
  if (!target) {
    std::fprintf(stderr, "usage: fuzz_replay TARGET FILE|DIR...; targets:");
    for (const Target& t : kTargets) std::fprintf(stderr, " %.*s", static_cast<int>(t.name.size()), t.name.data());
    std::fprintf(stderr, "\n");
    return 2;
  }
  target->init(&argc, &argv);
  std::vector<std::filesystem::path> inputs;
  for (int i = 2; i < argc; ++i) {
    const std::filesystem::path arg = argv[i];
    if (std::filesystem::is_directory(arg)) {
      for (const auto& entry : std::filesystem::directory_iterator(arg)) {
        if (entry.is_regular_file()) inputs.push_back(entry.path());
      }
    } else {
      inputs.push_back(arg);
    }
  }
  std::sort(inputs.begin(), inputs.end());
  for (const auto& path : inputs) {
    std::ifstream in(path, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const long before = kareus::fuzz::refusals();
    target->one_input(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
    std::fprintf(stderr, "%s: %ld refusals\n", path.string().c_str(), kareus::fuzz::refusals() - before);
  }
  std::fprintf(stderr, "%zu inputs held the contract\n", inputs.size());
  return 0;
}
