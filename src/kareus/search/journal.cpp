#include "kareus/search/journal.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>

#include "kareus/core/error.hpp"
#include "kareus/core/io.hpp"
#include "kareus/interop/artifact_format.hpp"
#include "kareus/interop/artifact_log.hpp"

namespace kareus::search {
namespace {

using ordered_json = nlohmann::ordered_json;

constexpr std::string_view kFormat = "kareus-search-journal";
constexpr int kVersion = 1;
// Every header line starts with this, which tells a torn header from a foreign file.
const std::string kHeaderPrefix = fmt::format("{{\"format\":\"{}\"", kFormat);

std::string encode_header(const JournalHeader& h) {
  ordered_json doc;
  doc["format"] = kFormat;
  doc["version"] = kVersion;
  doc["partition"] = h.partition;
  doc["evaluator"] = h.evaluator;
  doc["workload"] = ordered_json::parse(h.workload.dump());
  return doc.dump();
}

JournalHeader decode_header(const std::string& line, const std::string& where) {
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(line);
  } catch (const nlohmann::json::exception&) {
    throw InputError({where, 1, 0, ""}, "not a Kareus search journal (the first line is not JSON)");
  }
  // Compared as JSON values: value("version", 0) would throw JSON's type_error on a version of
  // another type.
  if (!doc.is_object() || !doc.contains("format") || doc["format"] != kFormat) {
    throw InputError({where, 1, 0, "format"}, "not a Kareus search journal");
  }
  if (!doc.contains("version") || doc["version"] != kVersion) {
    throw InputError({where, 1, 0, "version"},
                     fmt::format("journal version {} is not supported (expected {})",
                                 doc.contains("version") ? doc["version"].dump() : "(none)", kVersion));
  }
  try {
    JournalHeader h;
    h.partition = doc.at("partition").get<std::string>();
    h.evaluator = doc.at("evaluator").get<std::string>();
    h.workload = doc.at("workload");
    return h;
  } catch (const nlohmann::json::exception& e) {
    throw InputError({where, 1, 0, ""}, fmt::format("bad journal header: {}", e.what()));
  }
}

double number_or_nan(const nlohmann::json& doc, const char* key) {
  auto it = doc.find(key);
  if (it == doc.end() || it->is_null()) return std::nan("");
  return it->get<double>();
}

// The differing top-level fields of two workload descriptions, for the refusal message.
// A recorded workload agrees with the wanted one when it has each of its fields, equal; fields the
// wanted identity lacks do not change a partition's cost (an older journal's pipeline depth or
// microbatch count) and are ignored.
bool workload_agrees(const nlohmann::json& found, const nlohmann::json& wanted) {
  if (!found.is_object() || !wanted.is_object()) return found == wanted;
  for (auto it = wanted.begin(); it != wanted.end(); ++it) {
    auto other = found.find(it.key());
    if (other == found.end() || *other != it.value()) return false;
  }
  return true;
}

std::string workload_difference(const nlohmann::json& found, const nlohmann::json& wanted) {
  if (!found.is_object() || !wanted.is_object()) return fmt::format("{} vs {}", found.dump(), wanted.dump());
  std::string out;
  for (auto it = wanted.begin(); it != wanted.end(); ++it) {
    auto other = found.find(it.key());
    if (other != found.end() && *other == it.value()) continue;
    if (!out.empty()) out += ", ";
    out += fmt::format("{} {} vs {}", it.key(), other == found.end() ? "(none)" : other->dump(), it.value().dump());
  }
  return out;
}

// Appends `data` and fsyncs it. A write or fsync that fails (a full disk, a file-size limit, an
// I/O error) throws EnvironmentError after cutting the file back to its length before, so that
// what it holds stays whole lines: a rerun resumes from it, and nothing written later is glued to a
// torn fragment.
void write_all(int fd, const std::string& data, const std::filesystem::path& path) {
  struct stat before {};
  const bool sized = ::fstat(fd, &before) == 0;
  auto fail = [&](const char* what) {
    const int error = errno;
    if (sized) (void)!::ftruncate(fd, before.st_size);
    throw EnvironmentError(fmt::format("{}: {} failed: {} (the measurements before are kept; free space and "
                                       "rerun to resume)",
                                       path.string(), what, std::strerror(error)));
  };
  const char* p = data.data();
  std::size_t left = data.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail("write");
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0) fail("fsync");
}

// NUL bytes (and blanks) only: what a crash of the machine leaves where a write's blocks were
// allocated but its data never reached the disk.
bool only_nul_bytes(const std::string& line) {
  return !line.empty() && line.find_first_not_of(std::string("\0 \t\r", 4)) == std::string::npos;
}

void fsync_directory(const std::filesystem::path& path) {
  std::filesystem::path dir = path.parent_path();
  if (dir.empty()) dir = ".";
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

// A successful measurement as the artifact logs one.
std::string encode_artifact_record(const Measurement& m) {
  return interop::format_artifact_log_line({m.knob.freq_mhz, m.knob.sms, m.knob.slot, m.time_s, m.energy_j});
}

// The records of an artifact log; the last line may be torn like ours.
JournalContents read_artifact_log(const std::string& text, const std::string& file) {
  JournalContents out;
  out.artifact_log = true;
  std::size_t start = 0;
  long line_no = 0;
  while (start < text.size()) {
    ++line_no;
    const std::size_t end = text.find('\n', start);
    if (end == std::string::npos) {
      out.torn_tail = true;
      break;
    }
    const std::string line = text.substr(start, end - start);
    const bool last = end + 1 == text.size();
    if (line.find_first_not_of(" \t\r") != std::string::npos) {
      try {
        auto parsed = interop::parse_artifact_log_line(line, file, line_no);
        if (auto* r = std::get_if<interop::ArtifactLogRecord>(&parsed)) {
          Measurement m;
          m.knob = {r->freq_mhz, r->sms, r->slot};
          m.ok = true;
          m.time_s = r->time_s;
          m.energy_j = r->energy_j;
          m.effective_energy_j = std::nan("");  // the search recomputes it with its static power
          out.measurements.push_back(std::move(m));
        } else {
          out.unusable.push_back(fmt::format("{}:{}: {}", file, line_no, std::get<interop::UnusableLogRecord>(parsed).reason));
        }
      } catch (const InputError&) {
        if (!last) throw;
        out.torn_tail = true;
        break;
      }
    }
    out.valid_bytes = end + 1;
    start = end + 1;
  }
  return out;
}

}  // namespace

std::string encode_measurement(const Measurement& m) {
  ordered_json doc;
  doc["freq"] = m.knob.freq_mhz;
  doc["overlap_start"] = m.knob.slot;
  doc["overlap_end"] = "none";
  doc["sm"] = m.knob.sms;
  doc["block"] = interop::kArtifactBlockSize;
  doc["status"] = m.ok ? "ok" : "failed";
  if (m.ok) {
    doc["time_s"] = m.time_s;
    doc["energy_j"] = m.energy_j;
    doc["effective_energy_j"] = m.effective_energy_j;
  } else {
    doc["time_s"] = nullptr;
    doc["energy_j"] = nullptr;
    doc["effective_energy_j"] = nullptr;
    doc["error"] = m.error;
  }
  doc["pass"] = to_string(m.pass);
  doc["batch"] = m.batch;
  if (m.repeat > 0) doc["repeat"] = m.repeat;
  if (m.predicted) {
    const Prediction& p = *m.predicted;
    doc["predicted"] = {{"time_s", p.time_s},
                        {"time_sd_s", p.time_sd_s},
                        {"energy_j", p.energy_j},
                        {"energy_sd_j", p.energy_sd_j},
                        {"effective_energy_j", p.effective_energy_j},
                        {"effective_energy_sd_j", p.effective_energy_sd_j}};
  } else {
    doc["predicted"] = nullptr;
  }
  return doc.dump();
}

namespace {

// An integer field of a measurement line, `fallback` when absent: a JSON integer within an int's
// range (get<int>() of a float such as 1e300 is undefined behaviour).
int int_field(const nlohmann::json& doc, const char* key, const std::string& where, std::optional<int> fallback) {
  const auto it = doc.find(key);
  if (it == doc.end() && fallback) return *fallback;
  if (it == doc.end()) throw InputError(fmt::format("{}: a measurement needs '{}'", where, key));
  const bool fits = it->is_number_integer() && *it >= std::numeric_limits<int>::min() && *it <= std::numeric_limits<int>::max();
  if (!fits) throw InputError(fmt::format("{}: '{}' must be an integer, got {}", where, key, it->dump()));
  return it->get<int>();
}

}  // namespace

Measurement decode_measurement(const std::string& line, const std::string& where) {
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(line);
  } catch (const nlohmann::json::exception&) {
    throw InputError(where + ": not a JSON line");
  }
  try {
    Measurement m;
    m.knob.freq_mhz = doc.at("freq").get<double>();
    m.knob.slot = doc.at("overlap_start").get<std::string>();
    m.knob.sms = int_field(doc, "sm", where, std::nullopt);
    std::string status = doc.value("status", "ok");
    if (status != "ok" && status != "failed") throw InputError(where + ": status must be ok or failed");
    m.ok = status == "ok";
    m.time_s = number_or_nan(doc, "time_s");
    m.energy_j = number_or_nan(doc, "energy_j");
    m.effective_energy_j = number_or_nan(doc, "effective_energy_j");
    if (m.ok && !(std::isfinite(m.time_s) && std::isfinite(m.energy_j))) {
      throw InputError(where + ": an ok measurement needs finite time_s and energy_j");
    }
    m.error = doc.value("error", "");
    auto pass = parse_pick_pass(doc.value("pass", "initial"));
    if (!pass) throw InputError(where + ": unknown pass '" + doc.value("pass", "") + "'");
    m.pass = *pass;
    m.batch = int_field(doc, "batch", where, 0);
    m.repeat = int_field(doc, "repeat", where, 0);
    if (m.repeat < 0) throw InputError(where + ": repeat must be 0 or more");
    auto p = doc.find("predicted");
    if (p != doc.end() && p->is_object()) {
      m.predicted = Prediction{p->at("time_s").get<double>(),         p->at("time_sd_s").get<double>(),
                               p->at("effective_energy_j").get<double>(), p->at("effective_energy_sd_j").get<double>(),
                               p->at("energy_j").get<double>(),       p->at("energy_sd_j").get<double>()};
    }
    return m;
  } catch (const nlohmann::json::exception& e) {
    throw InputError(fmt::format("{}: bad measurement line: {}", where, e.what()));
  }
}

JournalContents Journal::read(const std::filesystem::path& path) {
  const std::string text = read_text_file(path);
  const std::string file = path.string();
  JournalContents out;
  if (text.empty()) return out;
  std::size_t first_newline = text.find('\n');
  if (interop::is_artifact_log_line(text.substr(0, first_newline))) return read_artifact_log(text, file);
  if (first_newline == std::string::npos) {
    // Nothing complete: a header torn while being written, or something else entirely.
    bool torn_header = text.size() < kHeaderPrefix.size() ? kHeaderPrefix.starts_with(text) : text.starts_with(kHeaderPrefix);
    if (!torn_header) throw InputError({file, 1, 0, ""}, "not a Kareus search journal");
    out.torn_tail = true;
    return out;
  }
  out.header = decode_header(text.substr(0, first_newline), file);
  out.valid_bytes = first_newline + 1;
  std::size_t start = first_newline + 1;
  long line_no = 1;
  while (start < text.size()) {
    ++line_no;
    std::size_t end = text.find('\n', start);
    const bool complete = end != std::string::npos;
    const bool last = !complete || end + 1 == text.size();
    std::string line = text.substr(start, complete ? end - start : std::string::npos);
    if (!complete) {
      out.torn_tail = true;  // a write cut short; the newline is written last, in the same write
      break;
    }
    try {
      out.measurements.push_back(decode_measurement(line, fmt::format("{}:{}", file, line_no)));
    } catch (const InputError& e) {
      if (last && only_nul_bytes(line)) {
        out.torn_tail = true;  // the blocks of a write a machine crash cut short
        break;
      }
      // A whole line (its newline was written in the same write as the rest) that is not a
      // measurement was not torn by a crash: it was edited, or the file damaged. Dropping it would
      // throw away what someone wrote, so it is theirs to fix.
      throw InputError(fmt::format("{} (a line edited by hand or damaged; only a last line without its "
                                   "newline is a crash's, dropped on resume: fix or delete line {} to "
                                   "resume)",
                                   e.what(), line_no));
    }
    out.valid_bytes = end + 1;
    start = end + 1;
  }
  return out;
}

std::filesystem::path journal_path(const std::filesystem::path& dir, const std::string& partition_key) {
  return dir / (partition_key + ".journal.jsonl");
}

namespace {

struct Checked {
  JournalHeader wanted;
  JournalContents contents;
  bool has_header = false;
};

Checked check_journal(const std::filesystem::path& path, const JournalHeader& header) {
  // Normalise the expected header the way a round trip through the file would.
  Checked c;
  c.wanted = decode_header(encode_header(header), path.string());
  const JournalHeader& wanted = c.wanted;
  std::error_code ec;
  if (std::filesystem::exists(path, ec) || std::filesystem::is_symlink(path, ec)) {
    c.contents = Journal::read(path);  // throws on unreadable or foreign files, untouched
  }
  const JournalContents& contents = c.contents;
  c.has_header = !contents.header.partition.empty() || !contents.header.evaluator.empty();
  if (contents.artifact_log) {
    // The artifact names a log's partition by its directory; any other directory says nothing.
    const std::string dir = path.parent_path().filename().string();
    const bool names_partition = dir.starts_with("fwd_") || dir.starts_with("bwd_");
    if (names_partition && dir != wanted.partition) {
      throw InputError({path.string(), 0, 0, "partition"},
                       fmt::format("is the artifact's log of partition '{}' (its directory), not '{}'; use another "
                                   "--journal", dir, wanted.partition));
    }
  }
  if (c.has_header) {
    if (contents.header.partition != wanted.partition) {
      throw InputError({path.string(), 1, 0, "partition"},
                       fmt::format("journal belongs to partition '{}', not '{}'; use another --journal",
                                   contents.header.partition, wanted.partition));
    }
    if (!workload_agrees(contents.header.workload, wanted.workload)) {
      throw InputError({path.string(), 1, 0, "workload"},
                       fmt::format("journal belongs to another workload ({}); use another --journal",
                                   workload_difference(contents.header.workload, wanted.workload)));
    }
    if (contents.header.evaluator != wanted.evaluator) {
      throw InputError({path.string(), 1, 0, "evaluator"},
                       fmt::format("journal was measured with evaluator '{}', not '{}'; use another --journal",
                                   contents.header.evaluator, wanted.evaluator));
    }
  }
  return c;
}

}  // namespace

void Journal::check(const std::filesystem::path& path, const JournalHeader& header) { check_journal(path, header); }

Journal Journal::open(const std::filesystem::path& path, const JournalHeader& header) {
  Checked checked = check_journal(path, header);
  const JournalHeader& wanted = checked.wanted;
  JournalContents& contents = checked.contents;
  const bool has_header = checked.has_header;
  std::error_code ec;
  Journal j;
  j.path_ = path;
  j.header_ = wanted;
  j.artifact_log_ = contents.artifact_log;
  j.measurements_ = std::move(contents.measurements);
  if (!path.parent_path().empty()) std::filesystem::create_directories(path.parent_path(), ec);
  j.fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (j.fd_ < 0) {
    throw InputError({path.string(), 0, 0, ""}, fmt::format("cannot be opened for writing: {}", std::strerror(errno)));
  }
  if (contents.torn_tail) {
    spdlog::warn("{}: dropping a torn last line (a run was interrupted while writing it)", path.string());
    if (::ftruncate(j.fd_, static_cast<off_t>(has_header || contents.artifact_log ? contents.valid_bytes : 0)) != 0) {
      throw EnvironmentError(fmt::format("{}: cannot drop the torn line: {}", path.string(), std::strerror(errno)));
    }
  }
  if (contents.artifact_log) {
    spdlog::info("{}: resuming from the artifact's log ({} records, {} unusable{}); it names no workload or evaluator, "
                 "so they are taken as this search's; new measurements are appended in its record form",
                 path.string(), j.measurements_.size(), contents.unusable.size(),
                 contents.unusable.empty() ? "" : ", e.g. " + contents.unusable.front());
  } else if (!has_header) {
    write_all(j.fd_, encode_header(wanted) + "\n", path);
    fsync_directory(path);
  }
  return j;
}

Journal::Journal(Journal&& other) noexcept
    : path_(std::move(other.path_)),
      header_(std::move(other.header_)),
      artifact_log_(other.artifact_log_),
      measurements_(std::move(other.measurements_)),
      fd_(other.fd_),
      mutex_(std::move(other.mutex_)) {
  other.fd_ = -1;
}

Journal& Journal::operator=(Journal&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(other.path_);
    header_ = std::move(other.header_);
    artifact_log_ = other.artifact_log_;
    measurements_ = std::move(other.measurements_);
    fd_ = other.fd_;
    mutex_ = std::move(other.mutex_);
    other.fd_ = -1;
  }
  return *this;
}

Journal::~Journal() {
  if (fd_ >= 0) ::close(fd_);
}

std::vector<Measurement> Journal::measurements() const {
  std::lock_guard lock(*mutex_);
  return measurements_;
}

void Journal::append(const Measurement& m) {
  // An artifact log holds one measurement per knob (the artifact keeps a knob's first record): a
  // failure or a repeat stays in memory (a failure is retried next run).
  std::string line =
      artifact_log_ ? (m.ok && m.repeat == 0 ? encode_artifact_record(m) + "\n" : "") : encode_measurement(m) + "\n";
  std::lock_guard lock(*mutex_);
  KAREUS_CHECK(fd_ >= 0, "append to a closed journal");
  if (!line.empty()) write_all(fd_, line, path_);
  measurements_.push_back(m);
}

}  // namespace kareus::search
