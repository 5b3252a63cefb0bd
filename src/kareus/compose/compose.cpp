#include "kareus/compose/compose.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "kareus/core/error.hpp"
#include "kareus/workload/zero_bubble.hpp"

namespace kareus::compose {
namespace {

using schedule::InstructionType;
using workload::Partition;
using workload::Pass;

bool same_clock(double a, double b) { return std::abs(a - b) < 1e-6; }

// A partial sum over the keys composed so far, with the index of each key's chosen point.
// time_s is the GPU's, host_s the host's issue time (0 under the idle engine).
struct Combo {
  double time_s = 0;
  double energy_j = 0;
  double host_s = 0;
  std::vector<std::uint32_t> choice;
  bool overlaps = false;  // some partition chosen overlaps its collective
};

// Keeps the Pareto set in (time, host time, effective energy) of each kind of combo (overlapping some
// partition or not); of equal points, the first. With one host time throughout and one kind, that is
// the Pareto set in (time, effective energy).
void prune(std::vector<Combo>& combos, double p_static_w) {
  auto effective = [&](const Combo& c) { return c.energy_j - p_static_w * c.time_s; };
  std::stable_sort(combos.begin(), combos.end(), [&](const Combo& a, const Combo& b) {
    if (a.time_s != b.time_s) return a.time_s < b.time_s;
    return effective(a) < effective(b);
  });
  std::vector<Combo> kept;
  for (Combo& c : combos) {
    // Kept points are no slower; c stays unless one of them also issues no slower at no more energy.
    const double e = effective(c);
    // A combo that overlaps nothing yet never stands for one that does (an instruction in the
    // waiting loop must overlap some partition), nor the other way round.
    const bool dominated = std::any_of(kept.rbegin(), kept.rend(), [&](const Combo& k) {
      return k.overlaps == c.overlaps && k.host_s <= c.host_s && effective(k) <= e;
    });
    if (!dominated) kept.push_back(std::move(c));
  }
  combos = std::move(kept);
}

// A key of an instruction with how many times it runs there.
struct Term {
  std::string key;
  int multiplicity = 1;
  bool recompute = false;
  bool fixed = false;  // non-partition work: not part of the knob
  Partition partition;  // what the host issues for it
};

std::vector<int> stage_layers(const workload::ModelSpec& model, const workload::ParallelConfig& parallel) {
  return parallel.layers_per_stage.empty() ? workload::default_layers_per_stage(model.num_layers, parallel.pp)
                                           : parallel.layers_per_stage;
}

// Layers of one chunk of `stage`; InputError when they do not split into whole layers.
int chunk_layers(const workload::ModelSpec& model, const workload::ParallelConfig& parallel, int stage, int chunks) {
  const int layers = stage_layers(model, parallel).at(static_cast<std::size_t>(stage));
  if (layers % chunks != 0) {
    throw InputError({"", 0, 0, "--virtual-stages"},
                     fmt::format("stage {} holds {} layers, which do not split into {} chunks of whole layers", stage,
                                 layers, chunks));
  }
  return layers / chunks;
}

// The embedding runs before the first layer, the LM head and loss after the last: in a stage's
// first and last chunk.
bool runs_in_chunk(const Partition& work, int chunk, int chunks) {
  return work.key.starts_with("embedding") ? chunk == 0 : chunk == chunks - 1;
}

std::vector<Term> instruction_terms(const workload::ModelSpec& model, const workload::ParallelConfig& parallel,
                                    int stage, InstructionType type, int chunk, int chunks) {
  const int layers = chunk_layers(model, parallel, stage, chunks);
  const Pass pass = type == InstructionType::kForward ? Pass::kForward : Pass::kBackward;
  std::vector<Partition> partitions = workload::build_partitions(model, parallel);
  std::vector<Term> terms;
  if (pass == Pass::kBackward && parallel.checkpointing == workload::Checkpointing::kFull) {
    for (const Partition& p : partitions) {
      if (p.pass == Pass::kForward) terms.push_back({p.key, p.count * layers, true, false, p});
    }
  }
  for (const Partition& p : partitions) {
    if (p.pass == pass) terms.push_back({p.key, p.count * layers, false, false, p});
  }
  for (const Partition& p : workload::non_partition_work(model, parallel, stage)) {
    if (p.pass == pass && runs_in_chunk(p, chunk, chunks)) terms.push_back({p.key, p.count, false, true, p});
  }
  return terms;
}

// B and W of every stage and chunk from its backward options and the W partition's points (see the
// header).
void split_backward_options(pipeline::OptionTable& table, const workload::ModelSpec& model,
                            const workload::ParallelConfig& parallel, const PartitionPoints& points,
                            const ComposeOptions& options) {
  const std::string key(workload::kWeightGradientKey);
  auto found = points.find(key);
  if (found == points.end() || found->second.empty()) {
    throw InputError({"", 0, 0, key}, fmt::format("backward_weight needs partition {}, which has no measurements", key));
  }
  const int count = workload::weight_gradient_partition(model, parallel).count;
  // Per clock, the W point of least effective energy (of equal ones, the first).
  std::vector<const PartitionPoint*> best;
  for (const PartitionPoint& p : found->second) {
    auto same = std::find_if(best.begin(), best.end(),
                             [&](const PartitionPoint* b) { return same_clock(b->knob.freq_mhz, p.knob.freq_mhz); });
    const double effective = p.energy_j - options.p_static_w * p.time_s;
    if (same == best.end()) best.push_back(&p);
    else if (effective < (*same)->energy_j - options.p_static_w * (*same)->time_s) *same = &p;
  }
  std::sort(best.begin(), best.end(), [](const auto* a, const auto* b) { return a->knob.freq_mhz < b->knob.freq_mhz; });
  for (int stage = 0; stage < table.num_stages(); ++stage) {
    for (int chunk = 0; chunk < table.chunks; ++chunk) {
      const double scale = chunk_layers(model, parallel, stage, table.chunks) * count * options.overhead_factor;
      std::vector<pipeline::StageOption>& input = table.at(stage, chunk, schedule::OptionSlot::kBackwardInput);
      std::vector<pipeline::StageOption>& weight = table.at(stage, chunk, schedule::OptionSlot::kBackwardWeight);
      for (const pipeline::StageOption& backward : table.at(stage, chunk, schedule::OptionSlot::kBackward)) {
        auto w = std::find_if(best.begin(), best.end(),
                              [&](const PartitionPoint* b) { return same_clock(b->knob.freq_mhz, backward.freq_mhz); });
        if (w == best.end()) continue;
        pipeline::StageOption b = backward;
        b.time_s -= (*w)->time_s * scale;
        b.energy_j -= (*w)->energy_j * scale;
        KAREUS_CHECK(b.time_s > 0 && b.energy_j > 0,
                     fmt::format("stage {}: the weight gradients cost more than the backward at {} MHz", stage,
                                 backward.freq_mhz));
        input.push_back(std::move(b));
      }
      for (const PartitionPoint* w : best) {
        if (std::none_of(input.begin(), input.end(), [&](const auto& b) { return same_clock(b.freq_mhz, w->knob.freq_mhz); })) {
          continue;
        }
        nlohmann::json knob = {{"partitions", {{{"key", key}, {"sms", w->knob.sms}, {"slot", w->knob.slot}}}}};
        weight.push_back({w->knob.freq_mhz, w->time_s * scale, w->energy_j * scale, SharedJson(std::move(knob))});
      }
      if (input.empty()) {
        throw InputError({"", 0, 0, key}, fmt::format("stage {}: no SM clock has measurements of both its backward and {}",
                                                      stage, key));
      }
    }
  }
}

}  // namespace

InstructionKeys instruction_keys(const workload::ModelSpec& model, const workload::ParallelConfig& parallel,
                                 int stage, InstructionType type, int chunk, int chunks) {
  InstructionKeys keys;
  for (const Term& t : instruction_terms(model, parallel, stage, type, chunk, chunks)) {
    (t.fixed ? keys.fixed : t.recompute ? keys.recompute : keys.keys).push_back(t.key);
  }
  return keys;
}

pipeline::OptionTable compose_option_table(const workload::ModelSpec& model,
                                           const workload::ParallelConfig& parallel,
                                           const PartitionPoints& points, const ComposeOptions& options) {
  KAREUS_CHECK(options.overhead_factor > 0, "the overhead factor must be positive");
  KAREUS_CHECK(options.virtual_stages >= 1, "virtual stages must be at least 1");
  pipeline::OptionTable table;
  table.chunks = options.virtual_stages;
  table.options.resize(static_cast<std::size_t>(parallel.pp * table.chunks));
  for (int stage = 0; stage < parallel.pp; ++stage) {
    for (int chunk = 0; chunk < table.chunks; ++chunk) {
      for (InstructionType type : {InstructionType::kForward, InstructionType::kBackward}) {
        const std::vector<Term> terms = instruction_terms(model, parallel, stage, type, chunk, table.chunks);
        const std::string what = table.chunks > 1
                                     ? fmt::format("stage {} chunk {} {}", stage, chunk, schedule::to_string(type))
                                     : fmt::format("stage {} {}", stage, schedule::to_string(type));
        // Clocks at which every key has a point.
        std::vector<double> clocks;
        for (const Term& t : terms) {
          auto found = points.find(t.key);
          if (found == points.end() || found->second.empty()) {
            throw InputError({"", 0, 0, t.key}, fmt::format("{} needs partition {}, which has no measurements", what, t.key));
          }
        }
        for (const PartitionPoint& p : points.at(terms.front().key)) {
          if (std::none_of(clocks.begin(), clocks.end(), [&](double c) { return same_clock(c, p.knob.freq_mhz); })) {
            clocks.push_back(p.knob.freq_mhz);
          }
        }
        std::sort(clocks.begin(), clocks.end());
        std::vector<double> usable;
        for (double clock : clocks) {
          bool all = std::all_of(terms.begin(), terms.end(), [&](const Term& t) {
            const auto& list = points.at(t.key);
            return std::any_of(list.begin(), list.end(), [&](const PartitionPoint& p) { return same_clock(p.knob.freq_mhz, clock); });
          });
          if (all) usable.push_back(clock);
        }
        if (usable.empty()) {
          throw InputError({"", 0, 0, terms.front().key},
                           fmt::format("{}: no SM clock has measurements of every partition it runs ({} keys)", what,
                                       terms.size()));
        }

        for (double clock : usable) {
          // Per key, its points at this clock.
          std::vector<std::vector<const PartitionPoint*>> candidates;
          for (const Term& t : terms) {
            std::vector<const PartitionPoint*> list;
            for (const PartitionPoint& p : points.at(t.key)) {
              if (same_clock(p.knob.freq_mhz, clock)) list.push_back(&p);
            }
            candidates.push_back(std::move(list));
          }
          // The instruction's choices where it overlaps some partition, or none (every knob
          // sequential): per key its points, each on its issue path (engine::issue_path; Pareto in
          // time, host time and effective energy), weighted, summed over the keys.
          // Where the loop waits, which instructions overlap decides their path: their combos keep
          // that apart while they are summed (Combo::overlaps).
          const bool loop_waits = options.engine.sync_per_loop_op;
          auto compose_on = [&](bool overlapping) {
            std::vector<Combo> combos{Combo{}};
            for (std::size_t k = 0; k < terms.size() && !combos.empty(); ++k) {
              const Term& t = terms[k];
              std::vector<Combo> own;
              for (std::size_t i = 0; i < candidates[k].size(); ++i) {
                const PartitionPoint& p = *candidates[k][i];
                if (!overlapping && !p.knob.sequential() && t.partition.collective) continue;
                const engine::IssuePath on = engine::issue_path(options.engine, p.knob, overlapping);
                const double exposed_s = engine::exposed_host_time_s(options.engine, t.partition, on);
                own.push_back({p.time_s + exposed_s, p.energy_j + options.p_static_w * exposed_s,
                               engine::host_time_s(options.engine, t.partition, on), {static_cast<std::uint32_t>(i)},
                               loop_waits && !p.knob.sequential() && t.partition.collective.has_value()});
              }
              prune(own, options.p_static_w);
              std::vector<Combo> next;
              next.reserve(combos.size() * own.size());
              for (const Combo& c : combos) {
                for (const Combo& o : own) {
                  Combo sum{c.time_s + t.multiplicity * o.time_s, c.energy_j + t.multiplicity * o.energy_j,
                            c.host_s + t.multiplicity * o.host_s, c.choice, c.overlaps || o.overlaps};
                  sum.choice.push_back(o.choice.front());
                  next.push_back(std::move(sum));
                }
              }
              prune(next, options.p_static_w);
              combos = std::move(next);
            }
            return combos;
          };
          // An engine whose loop waits at each op runs the whole instruction in it once any partition
          // overlaps, its sequential partitions included (their host time exposed too); an
          // instruction that overlaps nothing runs the un-split modules, as Perseus's plans do. (The
          // loop's sequential partitions keep the un-split segment's GPU cost: the artifact runs
          // them nanobatched, a few kernels and one collective call more.)
          std::vector<Combo> combos;
          if (options.engine.sync_per_loop_op) {
            combos = compose_on(false);
            for (Combo& c : compose_on(true)) {
              if (c.overlaps) combos.push_back(std::move(c));
            }
          } else {
            combos = compose_on(true);  // each point on the path its knob implies
          }
          // The instruction as the engine runs it: the GPU idles, at P_static, wherever the host is
          // behind it. A combo kept for its host time may lose once both are taken together.
          for (Combo& c : combos) {
            const double time_s = engine::instruction_time_s(options.engine, c.time_s, c.host_s);
            c.energy_j += options.p_static_w * (time_s - c.time_s);
            c.time_s = time_s;
            c.host_s = 0;
            c.overlaps = false;  // whole instructions now: each competes with every other
          }
          prune(combos, options.p_static_w);
          for (const Combo& c : combos) {
            nlohmann::json partitions = nlohmann::json::array(), recompute = nlohmann::json::array();
            for (std::size_t k = 0; k < terms.size(); ++k) {
              if (terms[k].fixed) continue;
              const workload::Knob& knob = candidates[k][c.choice[k]]->knob;
              nlohmann::json entry = {{"key", terms[k].key}, {"sms", knob.sms}, {"slot", knob.slot}};
              (terms[k].recompute ? recompute : partitions).push_back(std::move(entry));
            }
            nlohmann::json knob = {{"partitions", std::move(partitions)}};
            if (!recompute.empty()) knob["recompute"] = std::move(recompute);
            table.at(stage, chunk, schedule::option_slot(type))
                .push_back({clock, c.time_s * options.overhead_factor, c.energy_j * options.overhead_factor,
                            SharedJson(std::move(knob))});
          }
        }
      }
    }
  }
  if (options.split_backward) split_backward_options(table, model, parallel, points, options);
  return table;
}

}  // namespace kareus::compose
