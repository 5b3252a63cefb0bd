// The Kareus artifact's BO logs (<partition>/eval_results.jsonl, one JSON record per measured
// knob): each line through parse_artifact_record, the file through TableEvaluator::add_file (a
// table of the artifact's measurements) and through the journal (a search resuming the
// artifact's log and appending to it).
#include <cstddef>
#include <cstdint>
#include <sstream>

#include "fixtures.hpp"
#include "fuzz_support.hpp"
#include "kareus/evaluate/artifact_tree.hpp"
#include "kareus/search/journal.hpp"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  kareus::fuzz::quiet_logs();
  kareus::fuzz::default_job();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace kareus;
  const std::string text(reinterpret_cast<const char*>(data), size);
  const auto path = fuzz::write_input(data, size, "fwd_attn/eval_results.jsonl");
  std::istringstream lines(text);
  std::string line;
  for (long number = 1; std::getline(lines, line); ++number) {
    fuzz::holds_contract("eval_results.jsonl:" + std::to_string(number),
                         [&] { evaluate::parse_artifact_record(line, "eval_results.jsonl", number, "fwd_attn"); });
  }
  fuzz::holds_contract("eval_results.jsonl", [&] {
    evaluate::TableEvaluator table(fuzz::default_job().gpu);
    table.add_file(path, std::string("fwd_attn"));
  });
  fuzz::holds_contract("eval_results.jsonl", [&] {
    search::Journal::read(path);
    search::Journal::open(path, {nlohmann::json::object(), "fwd_attn", "simulated"});
  });
  return 0;
}
