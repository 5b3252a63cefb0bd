// What every fuzz target holds an input to: the real reader either accepts it, and the real
// consumer then runs on what it read, or refuses it the way the `kareus` command reports bad input:
// an InputError (exit 2, cli::ExitCode::kBadInput) whose message is one line naming where the input
// is at fault (the file, or the flag). Any other exception, a second line or an unlocated refusal
// is a finding: the target prints it and aborts, so libFuzzer keeps the input. Crashes, sanitizer
// reports and hangs (libFuzzer's -timeout) are findings by themselves.
//
// Thread-safety: one fuzzing thread per process (libFuzzer's default).
// Example:
//   extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
//     const auto path = kareus::fuzz::write_input(data, size, "gpu.json");
//     kareus::fuzz::holds_contract(path.filename().string(), [&] { consume(load_gpu_spec(path)); });
//     return 0;
//   }
#pragma once

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "kareus/cli/commands.hpp"
#include "kareus/core/error.hpp"

namespace kareus::fuzz {

// Prints what broke the contract and aborts (libFuzzer saves the input as a crash).
[[noreturn]] inline void finding(std::string_view what, std::string_view detail) {
  std::fprintf(stderr, "kareus fuzz finding: %.*s: %.*s\n", static_cast<int>(what.size()), what.data(),
               static_cast<int>(detail.size()), detail.data());
  std::abort();
}

// This process's own scratch directory (several fuzzers may run at once, e.g. libFuzzer's -jobs).
inline const std::filesystem::path& scratch_dir() {
  static const std::filesystem::path dir = [] {
    auto d = std::filesystem::temp_directory_path() / ("kareus-fuzz-" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

// Writes `text` to `path` (creating its directories), whole.
inline void write_file(const std::filesystem::path& path, std::string_view text) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  if (!out) finding("harness", "cannot write " + path.string());
}

// The input as the file scratch_dir()/name; returns its path.
inline std::filesystem::path write_input(const std::uint8_t* data, std::size_t size, const std::string& name) {
  const auto path = scratch_dir() / name;
  write_file(path, std::string_view(reinterpret_cast<const char*>(data), size));
  return path;
}

// Readers warn through spdlog (a torn journal line, a skipped sample); the fuzzer's output stays
// its own.
inline void quiet_logs() { spdlog::set_level(spdlog::level::off); }

// Checks one refusal against the contract: exit 2, one line, naming `located_by` (or one of its
// '|'-separated alternatives; "" takes any).
inline void check_refusal(const std::exception& e, std::string_view located_by) {
  const std::string what = e.what();
  if (cli::exit_code_for(e) != cli::ExitCode::kBadInput) {
    finding("refusal is not bad input (exit " + std::to_string(static_cast<int>(cli::exit_code_for(e))) + ")",
            what);
  }
  const std::string line = cli::failure_line(e);
  if (line.find_first_of("\n\r") != line.size() - 1) {
    finding("refusal is not one line", what);
  }
  for (std::size_t start = 0;;) {  // any of the '|'-separated names
    const std::size_t end = located_by.find('|', start);
    if (what.find(located_by.substr(start, end - start)) != std::string::npos) break;
    if (end == std::string_view::npos) finding("refusal does not name " + std::string(located_by), what);
    start = end + 1;
  }
}

// Refusals so far in this process (each a refusal within the contract), for fuzz_replay to say
// which seeds a reader refuses.
inline long& refusals() {
  static long count = 0;
  return count;
}

// Runs `read_and_consume`; true when it accepted the input, false when it refused it within the
// contract (anything else aborts).
template <typename F>
bool holds_contract(std::string_view located_by, F&& read_and_consume) {
  try {
    read_and_consume();
    return true;
  } catch (const InputError& e) {
    check_refusal(e, located_by);
  } catch (const std::exception& e) {
    check_refusal(e, located_by);  // not an InputError: always a finding, with its exit code
  }
  ++refusals();
  return false;
}

}  // namespace kareus::fuzz
