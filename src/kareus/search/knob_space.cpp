#include "kareus/search/knob_space.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <tuple>

#include "kareus/core/error.hpp"
#include "kareus/search/random.hpp"

namespace kareus::search {
namespace {

double scaled(double value, double lo, double hi) { return hi > lo ? (value - lo) / (hi - lo) : 0.0; }

// Evenly spread levels of one dimension for n points, then shuffled: point i gets level
// floor((i + u)·L/n), so that with n ≥ L every level appears and the counts differ by at most one.
std::vector<std::size_t> spread_levels(std::size_t levels, std::size_t n, Rng& rng) {
  const double u = rng.uniform();
  std::vector<std::size_t> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    auto level = static_cast<std::size_t>((static_cast<double>(i) + u) * static_cast<double>(levels) /
                                          static_cast<double>(n));
    out[i] = std::min(level, levels - 1);
  }
  rng.shuffle(out);
  return out;
}

std::size_t distance(std::size_t a, std::size_t b) { return a > b ? a - b : b - a; }

}  // namespace

KnobSpace KnobSpace::make(std::vector<double> freqs_mhz, std::vector<int> sms, std::vector<std::string> slots,
                          int sequential_sms) {
  if (freqs_mhz.empty()) throw InputError({"", 0, 0, "clocks"}, "the knob grid needs at least one SM clock");
  for (std::size_t i = 0; i < freqs_mhz.size(); ++i) {
    if (!(freqs_mhz[i] > 0) || !std::isfinite(freqs_mhz[i])) {
      throw InputError({"", 0, 0, "clocks"}, fmt::format("clock {} MHz is not positive", freqs_mhz[i]));
    }
    if (i > 0 && !(freqs_mhz[i] > freqs_mhz[i - 1])) {
      throw InputError({"", 0, 0, "clocks"}, "clocks must be strictly ascending");
    }
  }
  if (!slots.empty()) {
    if (sms.empty()) throw InputError({"", 0, 0, "sms"}, "the knob grid needs at least one SM level");
    for (std::size_t i = 0; i < sms.size(); ++i) {
      if (sms[i] < 1) throw InputError({"", 0, 0, "sms"}, fmt::format("SM level {} is below 1", sms[i]));
      if (i > 0 && sms[i] <= sms[i - 1]) throw InputError({"", 0, 0, "sms"}, "SM levels must be strictly ascending");
    }
    std::set<std::string> seen;
    for (const std::string& s : slots) {
      if (s == workload::kSequentialSlot) {
        throw InputError({"", 0, 0, "slots"}, "\"none\" is the sequential knob, not a launch slot");
      }
      if (!seen.insert(s).second) throw InputError({"", 0, 0, "slots"}, fmt::format("slot '{}' is repeated", s));
    }
    if (sequential_sms < 0) throw InputError({"", 0, 0, "sms"}, "the sequential knob's SM count is negative");
  } else {
    // No launch slot: one sequential knob per clock, with the collective's SMs if it has one.
    sms.clear();
    if (sequential_sms < 0) throw InputError({"", 0, 0, "sms"}, "the sequential knob's SM count is negative");
  }

  KnobSpace space;
  space.freqs_mhz_ = std::move(freqs_mhz);
  space.sms_ = std::move(sms);
  space.slots_ = std::move(slots);
  space.sequential_sms_ = sequential_sms;
  const bool collective = !space.slots_.empty();
  const auto cols = static_cast<Eigen::Index>(collective ? 2 + space.slots_.size() + 1 : 1);
  space.knobs_.reserve(space.freqs_mhz_.size() * space.block());
  const double f_lo = space.freqs_mhz_.front(), f_hi = space.freqs_mhz_.back();
  const double s_lo = collective ? space.sms_.front() : 0, s_hi = collective ? space.sms_.back() : 0;
  std::vector<Eigen::RowVectorXd> rows;
  auto add = [&](double f, int s, const std::string& slot, std::size_t slot_level) {
    space.knobs_.push_back(Knob{f, s, slot});
    Eigen::RowVectorXd row = Eigen::RowVectorXd::Zero(cols);
    row(0) = scaled(f, f_lo, f_hi);
    if (collective) {
      row(1) = std::clamp(scaled(std::log(std::max(s, 1)), std::log(s_lo), std::log(s_hi)), 0.0, 1.0);
      row(static_cast<Eigen::Index>(2 + slot_level)) = 1.0;
    }
    rows.push_back(std::move(row));
  };
  for (double f : space.freqs_mhz_) {
    add(f, space.sequential_sms_, std::string(workload::kSequentialSlot), space.slots_.size());
    for (std::size_t l = 0; l < space.slots_.size(); ++l) {
      for (int s : space.sms_) add(f, s, space.slots_[l], l);
    }
  }
  space.features_.resize(static_cast<Eigen::Index>(rows.size()), cols);
  for (std::size_t i = 0; i < rows.size(); ++i) space.features_.row(static_cast<Eigen::Index>(i)) = rows[i];
  return space;
}

KnobSpace KnobSpace::restricted_to(const std::vector<Knob>& known) const {
  KnobSpace out = *this;
  out.available_.assign(size(), false);
  for (const Knob& k : known) {
    if (slots_.empty()) {
      auto f = std::find(freqs_mhz_.begin(), freqs_mhz_.end(), k.freq_mhz);
      if (f != freqs_mhz_.end() && k.sequential()) out.available_[static_cast<std::size_t>(f - freqs_mhz_.begin())] = true;
    } else if (auto i = index_of(k)) {
      out.available_[*i] = true;
    }
  }
  return out;
}

std::size_t KnobSpace::available_count() const {
  if (available_.empty()) return size();
  return static_cast<std::size_t>(std::count(available_.begin(), available_.end(), true));
}

std::size_t KnobSpace::freq_level(double freq_mhz) const {
  auto it = std::find(freqs_mhz_.begin(), freqs_mhz_.end(), freq_mhz);
  if (it == freqs_mhz_.end()) {
    throw InputError({"", 0, 0, "freq_mhz"}, fmt::format("clock {} MHz is not on the knob grid", freq_mhz));
  }
  return static_cast<std::size_t>(it - freqs_mhz_.begin());
}

KnobSpace::Levels KnobSpace::levels(std::size_t i) const {
  Levels l;
  l.freq = i / block();
  std::size_t r = i % block();
  if (r == 0) {
    l.slot = slots_.size();
    return l;
  }
  l.slot = (r - 1) / sms_.size();
  l.sms = (r - 1) % sms_.size();
  return l;
}

std::size_t KnobSpace::index(const Levels& l) const {
  if (l.slot >= slots_.size()) return l.freq * block();
  return l.freq * block() + 1 + l.slot * sms_.size() + l.sms;
}

std::optional<std::size_t> KnobSpace::index_of(const Knob& knob) const {
  auto f = std::find(freqs_mhz_.begin(), freqs_mhz_.end(), knob.freq_mhz);
  if (f == freqs_mhz_.end()) return std::nullopt;
  Levels l;
  l.freq = static_cast<std::size_t>(f - freqs_mhz_.begin());
  if (knob.sequential()) {
    if (knob.sms != sequential_sms_) return std::nullopt;
    l.slot = slots_.size();
    return index(l);
  }
  auto s = std::find(slots_.begin(), slots_.end(), knob.slot);
  auto m = std::find(sms_.begin(), sms_.end(), knob.sms);
  if (s == slots_.end() || m == sms_.end()) return std::nullopt;
  l.slot = static_cast<std::size_t>(s - slots_.begin());
  l.sms = static_cast<std::size_t>(m - sms_.begin());
  return index(l);
}

std::size_t KnobSpace::sequential_knob(double freq_mhz) const { return freq_level(freq_mhz) * block(); }

std::size_t KnobSpace::nanobatching_knob(double freq_mhz, int sms) const {
  Levels l;
  l.freq = freq_level(freq_mhz);
  if (slots_.empty()) return index(l);
  l.slot = 0;
  int best = std::numeric_limits<int>::max();
  for (std::size_t m = 0; m < sms_.size(); ++m) {
    int d = std::abs(sms_[m] - sms);
    if (d < best) best = d, l.sms = m;
  }
  return index(l);
}

std::vector<std::size_t> KnobSpace::baseline_knobs(int nanobatching_sms) const {
  std::vector<std::size_t> out;
  for (double f : freqs_mhz_) {
    out.push_back(sequential_knob(f));
    std::size_t nb = nanobatching_knob(f, nanobatching_sms);
    if (nb != out.back()) out.push_back(nb);
  }
  return out;
}

std::vector<std::size_t> KnobSpace::initial_design(const InitialDesignOptions& options) const {
  std::vector<std::size_t> design;
  std::vector<bool> used(size(), false);  // in the design, or not available
  for (std::size_t i = 0; i < size(); ++i) used[i] = !available(i);
  if (options.include_baseline_knobs) {
    for (std::size_t i : baseline_knobs(options.nanobatching_sms)) {
      if (!used[i]) design.push_back(i), used[i] = true;
    }
  }
  Rng rng(options.seed);
  if (options.cover_configurations) {
    std::vector<Levels> configs;
    for (std::size_t slot = 0; slot <= slots_.size(); ++slot) {
      const std::size_t levels = slot < slots_.size() ? sms_.size() : 1;
      for (std::size_t m = 0; m < levels; ++m) {
        bool covered = false, any = false;
        for (std::size_t f = 0; f < freqs_mhz_.size() && !covered; ++f) {
          const std::size_t i = index({f, slot, m});
          covered = used[i] && available(i);
          any = any || available(i);
        }
        if (!covered && any) configs.push_back({0, slot, m});
      }
    }
    std::vector<std::size_t> f = spread_levels(freqs_mhz_.size(), configs.size(), rng);
    for (std::size_t k = 0; k < configs.size(); ++k) {
      // The spread clock, or the nearest one this configuration has available (ties to the lower).
      std::size_t best = 0, best_distance = std::numeric_limits<std::size_t>::max();
      for (std::size_t level = 0; level < freqs_mhz_.size(); ++level) {
        Levels l = configs[k];
        l.freq = level;
        if (available(index(l)) && distance(level, f[k]) < best_distance) best = level, best_distance = distance(level, f[k]);
      }
      configs[k].freq = best;
      const std::size_t pick = index(configs[k]);
      design.push_back(pick);
      used[pick] = true;
    }
  }
  const std::size_t n = std::min(options.latin_hypercube_points, available_count() - design.size());
  if (n == 0) return design;

  // Slot levels: the partition's slots, then "none". The baselines or the covering part already
  // measure "none" (the sequential knob), so then the hypercube spreads over the slots alone: a point
  // sent to "none" would only fall back to a neighbour with the fewest SMs.
  const bool none_measured = (options.include_baseline_knobs || options.cover_configurations) && !slots_.empty();
  const std::size_t slot_levels = slots_.size() + (none_measured ? 0 : 1);
  std::vector<std::size_t> f = spread_levels(freqs_mhz_.size(), n, rng);
  std::vector<std::size_t> s = spread_levels(slot_levels, n, rng);
  // SM levels matter only to overlapped knobs: spread them over those.
  const auto overlapped = static_cast<std::size_t>(std::count_if(s.begin(), s.end(), [&](std::size_t l) { return l < slots_.size(); }));
  std::vector<std::size_t> m = spread_levels(std::max<std::size_t>(1, sms_.size()), std::max<std::size_t>(1, overlapped), rng);
  std::size_t next_m = 0;
  for (std::size_t i = 0; i < n; ++i) {
    Levels want{f[i], s[i], 0};
    if (s[i] < slots_.size()) want.sms = m[next_m++];
    std::size_t pick = index(want);
    if (used[pick]) {
      // The nearest unused knob: fewest clock steps, then slot steps, then SM steps; ties to the
      // lower index. The grid is small enough to scan.
      auto best = std::make_tuple(std::numeric_limits<std::size_t>::max(), std::size_t{0}, std::size_t{0},
                                  std::size_t{0});
      for (std::size_t j = 0; j < size(); ++j) {
        if (used[j]) continue;
        Levels l = levels(j);
        std::size_t ds = l.slot == want.slot ? 0 : 1 + distance(l.slot, want.slot);
        std::size_t dm = l.slot == slots_.size() ? 0 : distance(l.sms, want.sms);
        auto key = std::make_tuple(distance(l.freq, want.freq), ds, dm, j);
        if (key < best) best = key;
      }
      pick = std::get<3>(best);
    }
    design.push_back(pick);
    used[pick] = true;
  }
  return design;
}

std::size_t KnobSpace::initial_design_size(const InitialDesignOptions& options) const {
  return initial_design(options).size();
}

}  // namespace kareus::search
