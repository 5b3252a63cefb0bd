// Search journals (`kareus search --out`, `plan --journal-dir`, `profile --out`: a header line, then
// one measurement per line, the last maybe torn by a kill): read by Journal::read, then resumed by
// Journal::open with the header it holds, as a rerun does (which truncates a torn tail away).
#include <cstddef>
#include <cstdint>

#include "fuzz_support.hpp"
#include "kareus/search/journal.hpp"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  kareus::fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace kareus;
  const auto path = fuzz::write_input(data, size, "fwd_mlp.journal.jsonl");
  search::JournalContents contents;
  if (!fuzz::holds_contract("fwd_mlp.journal.jsonl", [&] { contents = search::Journal::read(path); })) return 0;
  if (contents.valid_bytes > size) fuzz::finding("journal", "intact part longer than the file");
  if (contents.header.partition.empty() || contents.artifact_log) return 0;
  fuzz::holds_contract("fwd_mlp.journal.jsonl", [&] {
    search::Journal::check(path, contents.header);
    const search::Journal journal = search::Journal::open(path, contents.header);
    if (journal.measurements().size() != contents.measurements.size()) {
      fuzz::finding("journal", "open() resumed other measurements than read() found");
    }
  });
  return 0;
}
