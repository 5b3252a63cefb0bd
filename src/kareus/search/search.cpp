#include "kareus/search/search.hpp"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <mutex>

#include "kareus/core/error.hpp"
#include "kareus/core/parallel.hpp"

namespace kareus::search {
namespace {

Measurement measure_one(const KnobSpace& space, const Proposal& p, int repeat, const MeasureFn& measure,
                        double static_power_w) {
  Measurement m;
  m.knob = space.knob(p.knob);
  m.pass = p.pass;
  m.batch = p.batch;
  m.repeat = repeat;
  m.predicted = p.predicted;
  auto fail = [&](std::string why) {
    m.ok = false;
    m.time_s = m.energy_j = m.effective_energy_j = std::nan("");
    m.error = std::move(why);
  };
  try {
    TimeEnergy r = measure(m.knob, repeat);
    if (!std::isfinite(r.time_s) || !std::isfinite(r.energy_j) || r.time_s < 0 || r.energy_j < 0) {
      fail(fmt::format("non-finite or negative result (time {} s, energy {} J)", r.time_s, r.energy_j));
    } else {
      m.time_s = r.time_s;
      m.energy_j = r.energy_j;
      m.effective_energy_j = r.energy_j - static_power_w * r.time_s;
    }
  } catch (const InputError&) {
    throw;
  } catch (const InternalError&) {
    throw;
  } catch (const EnvironmentError&) {
    throw;  // the machine's, not the knob's: ends the search (the journal keeps what came before)
  } catch (const std::exception& e) {
    fail(e.what());
  }
  return m;
}

}  // namespace

FrontierHypervolume frontier_hypervolume(const std::vector<TimeEnergy>& points) {
  FrontierHypervolume out;
  if (points.empty()) return out;
  for (const TimeEnergy& p : points) {
    out.reference.time_s = std::max(out.reference.time_s, p.time_s);
    out.reference.energy_j = std::max(out.reference.energy_j, p.energy_j);
  }
  out.hypervolume = hypervolume_2d(points, out.reference);
  return out;
}

SearchOutcome run_search(const KnobSpace& space, Strategy& strategy, const MeasureFn& measure, bool concurrent_measure,
                         Journal* journal, const SearchOptions& options,
                         const std::function<void(const SearchProgress&)>& progress) {
  SearchState state(space, options.static_power_w, options.max_failures);
  std::vector<Measurement> all;
  if (journal) all = journal->measurements();
  for (const Measurement& m : all) state.add(m);
  state.start_run();

  const auto start = std::chrono::steady_clock::now();
  std::mutex mutex;
  SearchOutcome outcome;
  std::size_t failed = 0;
  for (const Measurement& m : all) failed += m.ok ? 0 : 1;
  auto report = [&] {
    if (!progress) return;
    SearchProgress p;
    p.measurements = state.measurement_count();
    p.budget = options.budget;
    p.failed = failed;
    p.hypervolume = frontier_hypervolume(state.real_points()).hypervolume;
    p.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    p.measured_now = outcome.measured_now;
    progress(p);
  };
  report();

  outcome.stop = StopReason::kBudgetSpent;
  while (state.measurement_count() < options.budget) {
    const std::size_t left = options.budget - state.measurement_count();
    ProposalBatch batch = strategy.propose(state, left);
    if (batch.proposals.empty()) {
      outcome.stop = batch.stop.value_or(StopReason::kGridExhausted);
      break;
    }
    KAREUS_CHECK(batch.proposals.size() <= left, "a strategy proposed more knobs than the budget allows");
    std::vector<int> repeat;  // each proposal's measurements so far: its repetition
    std::vector<bool> proposed(space.size(), false);
    for (const Proposal& p : batch.proposals) {
      KAREUS_CHECK(p.knob < space.size() && (state.is_eligible(p.knob) || state.may_measure_again(p.knob)) &&
                       !proposed[p.knob],
                   "a strategy proposed an ineligible knob, or one knob twice");
      proposed[p.knob] = true;
      repeat.push_back(state.is_measured(p.knob) ? state.successes(p.knob) : 0);
    }
    auto record = [&](const Measurement& m) {
      std::lock_guard lock(mutex);
      if (journal) journal->append(m);
      all.push_back(m);
      state.add(m);
      ++outcome.measured_now;
      failed += m.ok ? 0 : 1;
      report();
    };
    if (concurrent_measure && options.parallel && batch.proposals.size() > 1) {
      parallel_for(std::size_t{0}, batch.proposals.size(), [&](std::size_t k) {
        record(measure_one(space, batch.proposals[k], repeat[k], measure, options.static_power_w));
      });
    } else {
      for (std::size_t k = 0; k < batch.proposals.size(); ++k) {
        record(measure_one(space, batch.proposals[k], repeat[k], measure, options.static_power_w));
      }
    }
  }
  outcome.measurements = std::move(all);
  return outcome;
}

}  // namespace kareus::search
