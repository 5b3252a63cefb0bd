#include "kareus/compose/compose.hpp"

#include <gtest/gtest.h>

#include <optional>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cmath>

#include "kareus/core/error.hpp"
#include "kareus/core/pareto.hpp"
#include "kareus/workload/zero_bubble.hpp"

namespace kareus::compose {
namespace {

using schedule::InstructionType;

struct Job {
  workload::ModelSpec model = workload::load_model("llama-3.2-3b");
  workload::ParallelConfig parallel = workload::validated(model, workload::ParallelConfig{});
};

// Every key gets the same few points per clock: value = (time, energy) per knob.
PartitionPoints uniform_points(const Job& s, const std::vector<double>& clocks,
                               const std::vector<std::pair<double, double>>& per_knob) {
  PartitionPoints points;
  std::vector<std::string> keys;
  for (const auto& p : workload::build_partitions(s.model, s.parallel)) keys.push_back(p.key);
  for (int stage = 0; stage < s.parallel.pp; ++stage) {
    for (const auto& p : workload::non_partition_work(s.model, s.parallel, stage)) keys.push_back(p.key);
  }
  for (const std::string& key : keys) {
    for (double clock : clocks) {
      for (std::size_t k = 0; k < per_knob.size(); ++k) {
        double scale = 1410.0 / clock;
        points[key].push_back({{clock, static_cast<int>(3 * (k + 1)), k == 0 ? "none" : "linear_0"},
                               per_knob[k].first * scale, per_knob[k].second / scale});
      }
    }
  }
  return points;
}

// ZB-H1's slots: per stage and clock, W is the stage's layers × both nanobatches of the W points,
// and B is each backward option less W at its clock, with the backward's knobs.
TEST(Compose, SplitBackwardIsTheBackwardLessItsWeightGradients) {
  Job s;
  auto points = uniform_points(s, {1410, 1200}, {{1.0, 10.0}, {0.8, 11.0}});
  const std::string w_key(workload::kWeightGradientKey);
  points[w_key] = {{{1410, 0, "none"}, 0.25, 2.0}, {{1200, 0, "none"}, 0.3, 1.7}};
  const auto plain = compose_option_table(s.model, s.parallel, points, {.p_static_w = 50});
  EXPECT_FALSE(plain.splits_backward());
  const auto table = compose_option_table(s.model, s.parallel, points, {.p_static_w = 50, .overhead_factor = 1.1,
                                                                          .split_backward = true});
  ASSERT_TRUE(table.splits_backward());
  for (int stage = 0; stage < s.parallel.pp; ++stage) {
    const double per_clock = s.parallel.layers_per_stage[static_cast<std::size_t>(stage)] * 2 * 1.1;
    const auto& w = table.at(stage, schedule::OptionSlot::kBackwardWeight);
    ASSERT_EQ(w.size(), 2u);
    for (const auto& o : w) {
      const bool fast = o.freq_mhz == 1410;
      EXPECT_NEAR(o.time_s, per_clock * (fast ? 0.25 : 0.3), 1e-12);
      EXPECT_NEAR(o.energy_j, per_clock * (fast ? 2.0 : 1.7), 1e-12);
      EXPECT_EQ((*o.knob)["partitions"][0]["key"], w_key);
    }
    const auto& backward = table.at(stage, InstructionType::kBackward);
    const auto& b = table.at(stage, schedule::OptionSlot::kBackwardInput);
    ASSERT_EQ(b.size(), backward.size());
    for (std::size_t k = 0; k < b.size(); ++k) {
      const auto& wk = *std::find_if(w.begin(), w.end(), [&](const auto& o) { return o.freq_mhz == b[k].freq_mhz; });
      EXPECT_EQ(b[k].freq_mhz, backward[k].freq_mhz);
      EXPECT_NEAR(b[k].time_s + wk.time_s, backward[k].time_s, 1e-12);
      EXPECT_NEAR(b[k].energy_j + wk.energy_j, backward[k].energy_j, 1e-9);
      EXPECT_EQ(b[k].knob, backward[k].knob);  // the recompute's knobs stay with B
      EXPECT_TRUE(b[k].knob->contains("recompute"));
    }
  }
  points.erase(w_key);
  EXPECT_THROW(compose_option_table(s.model, s.parallel, points, {.split_backward = true}), InputError);
}

// Interleaved chunks: each has options of its own, a V-th of the stage's layers; the embedding is
// the first chunk's of the first stage, the LM head the last chunk's of the last stage; so the
// chunks of a stage add up to the stage, clock by clock.
TEST(Compose, ChunksSplitTheLayersAndHoldTheEmbeddingAndHeadWhereTheyRun) {
  Job s;
  workload::ParallelConfig p;
  p.layers_per_stage = {14, 14};
  s.parallel = workload::validated(s.model, p);
  const auto points = uniform_points(s, {1410, 1200}, {{1.0, 10.0}});
  const auto whole = compose_option_table(s.model, s.parallel, points, {.p_static_w = 40});
  const auto chunked = compose_option_table(s.model, s.parallel, points, {.p_static_w = 40, .virtual_stages = 2});
  ASSERT_EQ(chunked.chunks, 2);
  ASSERT_EQ(chunked.num_stages(), 2);
  for (int stage = 0; stage < 2; ++stage) {
    for (InstructionType type : {InstructionType::kForward, InstructionType::kBackward}) {
      const auto slot = schedule::option_slot(type);
      const auto& stage_options = whole.at(stage, slot);
      for (std::size_t k = 0; k < stage_options.size(); ++k) {
        double time = 0, energy = 0;
        for (int chunk = 0; chunk < 2; ++chunk) {
          const auto& o = chunked.at(stage, chunk, slot).at(k);
          EXPECT_EQ(o.freq_mhz, stage_options[k].freq_mhz);
          time += o.time_s;
          energy += o.energy_j;
        }
        EXPECT_NEAR(time, stage_options[k].time_s, 1e-9);
        EXPECT_NEAR(energy, stage_options[k].energy_j, 1e-9);
      }
      for (int chunk = 0; chunk < 2; ++chunk) {
        const InstructionKeys keys = instruction_keys(s.model, s.parallel, stage, type, chunk, 2);
        const bool embedding = stage == 0 && chunk == 0, head = stage == 1 && chunk == 1;
        EXPECT_EQ(keys.fixed.size(), embedding || head ? 1u : 0u) << stage << " " << chunk;
        if (embedding) {
          EXPECT_TRUE(keys.fixed.front().starts_with("embedding"));
        }
        if (head) {
          EXPECT_TRUE(keys.fixed.front().starts_with("head"));
        }
      }
    }
  }
  // The first stage's chunks differ by the embedding alone, the last's by the head.
  EXPECT_GT(chunked.at(0, 0, schedule::OptionSlot::kForward)[0].time_s,
            chunked.at(0, 1, schedule::OptionSlot::kForward)[0].time_s);
  EXPECT_LT(chunked.at(1, 0, schedule::OptionSlot::kForward)[0].time_s,
            chunked.at(1, 1, schedule::OptionSlot::kForward)[0].time_s);
  EXPECT_THROW(compose_option_table(s.model, s.parallel, points, {.virtual_stages = 4}), InputError);  // 14 / 4
}

TEST(Compose, InstructionsSumTheirPartitionsWithMultiplicity) {
  Job s;
  auto points = uniform_points(s, {1410}, {{1.0, 10.0}});
  auto table = compose_option_table(s.model, s.parallel, points, {.p_static_w = 0});
  for (int stage = 0; stage < s.parallel.pp; ++stage) {
    for (InstructionType type : {InstructionType::kForward, InstructionType::kBackward}) {
      const auto& options = table.at(stage, type);
      ASSERT_EQ(options.size(), 1u);
      // Every key contributes multiplicity × 1 s; count them independently.
      InstructionKeys keys = instruction_keys(s.model, s.parallel, stage, type);
      EXPECT_GE(options[0].time_s, static_cast<double>(keys.keys.size() + keys.recompute.size() + keys.fixed.size()));
      EXPECT_NEAR(options[0].energy_j, 10 * options[0].time_s, 1e-9);
      EXPECT_EQ((*options[0].knob)["partitions"].size(), keys.keys.size());
      if (type == InstructionType::kBackward) {
        EXPECT_EQ((*options[0].knob)["recompute"].size(), keys.recompute.size());
        EXPECT_FALSE(keys.recompute.empty());  // full checkpointing is the default
      }
    }
  }
  // The first stage (15 layers) does more forward work than the last (13 layers), minus its head.
  EXPECT_EQ(s.parallel.pp, 2);
}

TEST(Compose, OverheadFactorScalesTimeAndEnergy) {
  Job s;
  auto points = uniform_points(s, {1410}, {{1.0, 10.0}});
  auto plain = compose_option_table(s.model, s.parallel, points, {});
  auto padded = compose_option_table(s.model, s.parallel, points, {.p_static_w = 0, .overhead_factor = 1.15});
  EXPECT_NEAR(padded.at(0, InstructionType::kForward)[0].time_s, 1.15 * plain.at(0, InstructionType::kForward)[0].time_s, 1e-9);
  EXPECT_NEAR(padded.at(1, InstructionType::kBackward)[0].energy_j,
              1.15 * plain.at(1, InstructionType::kBackward)[0].energy_j, 1e-9);
}

// A job small enough to brute-force: one layer per stage, no recompute.
Job one_layer_per_stage() {
  Job s;
  s.parallel.layers_per_stage = {1, 1};
  s.parallel.checkpointing = workload::Checkpointing::kNone;
  return s;
}

// One to three random knobs per key at 1410 MHz, each key's a little different from the others'.
PartitionPoints random_points(const Job& s) {
  const int knobs = *rc::gen::inRange(1, 4);
  std::vector<std::pair<double, double>> base;
  for (int k = 0; k < knobs; ++k) base.emplace_back(*rc::gen::inRange(5, 20) / 10.0, *rc::gen::inRange(5, 40));
  PartitionPoints points = uniform_points(s, {1410}, base);
  int salt = 0;
  for (auto& [key, list] : points) {
    ++salt;
    for (auto& p : list) p.time_s *= 1 + 0.01 * (salt % 7), p.energy_j *= 1 + 0.013 * (salt % 5);
  }
  return points;
}

// The composed options at a clock equal the Pareto set of brute-force sums over every choice.
RC_GTEST_PROP(Compose, MatchesBruteForceParetoSums, ()) {
  Job s = one_layer_per_stage();
  PartitionPoints points = random_points(s);
  const double p_static = 60;
  auto table = compose_option_table(s.model, s.parallel, points, {.p_static_w = p_static});
  for (InstructionType type : {InstructionType::kForward, InstructionType::kBackward}) {
    InstructionKeys keys = instruction_keys(s.model, s.parallel, 0, type);
    std::vector<std::string> all = keys.keys;
    all.insert(all.end(), keys.fixed.begin(), keys.fixed.end());
    // Brute force: all choices, multiplicity from the partition counts (1 layer per stage).
    std::vector<TimeEnergy> sums{{0, 0}};
    for (const std::string& key : all) {
      int count = 1;
      for (const auto& p : workload::build_partitions(s.model, s.parallel)) if (p.key == key) count = p.count;
      std::vector<TimeEnergy> next;
      for (const TimeEnergy& a : sums) {
        for (const PartitionPoint& p : points.at(key)) next.push_back({a.time_s + count * p.time_s, a.energy_j + count * p.energy_j});
      }
      sums = next;
    }
    std::vector<TimeEnergy> effective;
    for (const auto& x : sums) effective.push_back({x.time_s, x.energy_j - p_static * x.time_s});
    auto expected = pareto_front(effective);
    const auto& got = table.at(0, type);
    RC_ASSERT(got.size() == expected.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
      RC_ASSERT(std::abs(got[i].time_s - expected[i].time_s) < 1e-9);
      RC_ASSERT(std::abs(got[i].energy_j - p_static * got[i].time_s - expected[i].energy_j) < 1e-9);
    }
  }
}

// Under an engine, the composed options at a clock equal the Pareto set, in the instruction's time
// and effective energy, of brute-force choices each timed by engine::instruction_time_s from its
// GPU and host sums, its idle time charged at P_static (and, where the engine's loop waits for the
// GPU at each op, its partitions' host time on the GPU's side, in every instruction that overlaps):
// pruning by GPU time, host time and effective energy loses no plan.
RC_GTEST_PROP(Compose, MatchesBruteForceUnderAnEngine, ()) {
  Job s = one_layer_per_stage();
  PartitionPoints points = random_points(s);
  const double p_static = 60;
  engine::EngineSpec engine;  // costs in seconds, to be as large as these partitions' times
  engine.host.partition_op_s = *rc::gen::inRange(0, 60) / 100.0;
  engine.host.layer_op_s = *rc::gen::inRange(0, 30) / 100.0;
  engine.host.collective_call_s = *rc::gen::inRange(0, 30) / 100.0;
  engine.host.instruction_s = *rc::gen::inRange(0, 30) / 100.0;
  engine.host.launch_latency_s = *rc::gen::inRange(0, 10) / 100.0;
  engine.sync_per_instruction = *rc::gen::arbitrary<bool>();
  engine.sync_per_loop_op = *rc::gen::arbitrary<bool>();
  engine.sync_per_module_op = *rc::gen::arbitrary<bool>();
  const auto table = compose_option_table(s.model, s.parallel, points, {.p_static_w = p_static, .engine = engine});
  std::vector<workload::Partition> partitions = workload::build_partitions(s.model, s.parallel);
  for (const auto& p : workload::non_partition_work(s.model, s.parallel, 0)) partitions.push_back(p);
  for (InstructionType type : {InstructionType::kForward, InstructionType::kBackward}) {
    InstructionKeys keys = instruction_keys(s.model, s.parallel, 0, type);
    std::vector<std::string> all = keys.keys;
    all.insert(all.end(), keys.fixed.begin(), keys.fixed.end());
    // Every choice of a point per key, then its sums on the issue path it takes: with an engine
    // whose loop waits at each op, the loop once any partition overlaps (its sequential ones in it
    // too, their host time on the GPU's side, idle), the modules when none does; else the path
    // each knob implies.
    std::vector<std::vector<const PartitionPoint*>> choices{{}};
    for (const std::string& key : all) {
      std::vector<std::vector<const PartitionPoint*>> next;
      for (const auto& c : choices) {
        for (const PartitionPoint& p : points.at(key)) {
          next.push_back(c);
          next.back().push_back(&p);
        }
      }
      choices = std::move(next);
    }
    struct Sum {
      double gpu_s = 0, host_s = 0, energy_j = 0;
    };
    std::vector<Sum> sums;
    for (const auto& c : choices) {
      bool overlaps = false;
      for (std::size_t k = 0; k < all.size(); ++k) {
        overlaps = overlaps || (!c[k]->knob.sequential() && workload::find_partition(partitions, all[k]).collective);
      }
      {
        Sum x;
        for (std::size_t k = 0; k < all.size(); ++k) {
          const workload::Partition& partition = workload::find_partition(partitions, all[k]);
          const int count = partition.per_layer ? partition.count : 1;
          // Written out, not engine::issue_path: the loop once any partition overlaps, where the
          // engine's loop waits; else the path the knob implies.
          const engine::IssuePath on = engine.sync_per_loop_op && overlaps ? engine::IssuePath::kLoop
                                                                           : engine::path_of(c[k]->knob);
          const double exposed = engine::exposed_host_time_s(engine, partition, on);
          x.gpu_s += count * (c[k]->time_s + exposed);
          x.host_s += count * engine::host_time_s(engine, partition, on);
          x.energy_j += count * (c[k]->energy_j + p_static * exposed);
        }
        sums.push_back(x);
      }
    }
    std::vector<TimeEnergy> effective;
    for (const Sum& x : sums) {
      const double t = engine::instruction_time_s(engine, x.gpu_s, x.host_s);
      effective.push_back({t, x.energy_j - p_static * x.gpu_s});
    }
    // Exposed host time joins time and energy alike (at P_static), so two choices can differ in
    // time alone, their effective energies equal but for rounding: both sides keep, of such ties,
    // the faster.
    auto front_of = [](std::vector<TimeEnergy> front) {
      std::ranges::sort(front);
      std::vector<TimeEnergy> kept;
      for (const TimeEnergy& x : front) {
        if (kept.empty() || x.energy_j < kept.back().energy_j - 1e-9) kept.push_back(x);
      }
      return kept;
    };
    const auto expected = front_of(effective);
    std::vector<TimeEnergy> composed;
    for (const auto& o : table.at(0, type)) composed.push_back({o.time_s, o.energy_j - p_static * o.time_s});
    const auto got = front_of(composed);
    RC_ASSERT(got.size() == expected.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
      RC_ASSERT(std::abs(got[i].time_s - expected[i].time_s) < 1e-9);
      RC_ASSERT(std::abs(got[i].energy_j - expected[i].energy_j) < 1e-9);
    }
  }
}

TEST(Compose, MissingPartitionsAndClocksAreInputErrors) {
  Job s;
  auto points = uniform_points(s, {1410, 1200}, {{1.0, 10.0}});
  auto without = points;
  without.erase(without.begin());
  EXPECT_THROW(compose_option_table(s.model, s.parallel, without, {}), InputError);
  // One key lacks 1200 MHz: only 1410 is offered.
  auto& list = points.at("fwd_attn");
  std::erase_if(list, [](const PartitionPoint& p) { return p.knob.freq_mhz == 1200; });
  auto table = compose_option_table(s.model, s.parallel, points, {});
  for (const auto& o : table.at(0, InstructionType::kForward)) EXPECT_EQ(o.freq_mhz, 1410);
}

}  // namespace
}  // namespace kareus::compose
