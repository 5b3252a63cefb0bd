// The solver on the measured A100 profiles of the Perseus paper, against Perseus's own frontiers.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>

#include "kareus/core/csv.hpp"
#include "kareus/pipeline/frontier_solver.hpp"
#include "test_util.hpp"

namespace kareus::pipeline {
namespace {

const std::filesystem::path kData = std::filesystem::path(KAREUS_DATA_DIR) / "perseus-sosp24";
constexpr double kBlockingPowerW = 83.64;  // the setting that reproduces Perseus's frontiers

std::vector<TimeEnergy> read_points(const std::filesystem::path& path, const char* time_col,
                                    const char* energy_col) {
  CsvTable csv = read_csv(path);
  std::size_t t = csv.require_column(time_col), e = csv.require_column(energy_col);
  std::vector<TimeEnergy> points;
  for (std::size_t r = 0; r < csv.rows(); ++r) points.push_back({csv.number(r, t), csv.number(r, e)});
  return points;
}

// At the solver's default settings (unit and local search budget).
std::vector<TimeEnergy> our_frontier(const std::string& model, int microbatches) {
  OptionTable table = read_option_table(kData / "stage_profile" / (model + "+a100_sxm_bf16.csv"), 8);
  auto schedule = schedule::PipelineSchedule::make(schedule::ScheduleKind::k1F1B, 8, microbatches);
  Frontier f = solve_frontier(table, schedule, {.p_blocking_w = kBlockingPowerW});
  std::vector<TimeEnergy> points;
  for (const auto& p : f.points) points.push_back(p.time_energy());
  return points;
}

// While the steps run, the evaluating thread finds local search moves ahead whenever it waits for
// the next batch, the first round's and then the second's: on this profile, hundreds of plans'
// worth with two cores or more, none with one. How many depends on timing; the front must not.
TEST(PerseusData, FrontIsTheSameOnOneThreadAsOnFour) {
  OptionTable table = read_option_table(kData / "stage_profile" / "gpt3-175b+a100_sxm_bf16.csv", 8);
  auto schedule = schedule::PipelineSchedule::make(schedule::ScheduleKind::k1F1B, 8, 24);
  auto solve = [&] { return solve_frontier(table, schedule, {.p_blocking_w = kBlockingPowerW}); };
  const Frontier one = kareus::testing::on_threads(1, solve), four = kareus::testing::on_threads(4, solve);
  ASSERT_EQ(one.points.size(), four.points.size());
  for (std::size_t k = 0; k < one.points.size(); ++k) {
    ASSERT_EQ(one.points[k].assignment, four.points[k].assignment) << "plan " << k;
    ASSERT_EQ(one.points[k].energy_j, four.points[k].energy_j) << "plan " << k;
  }
  EXPECT_EQ(one.total_points, four.total_points);
}

struct Case {
  std::string model;
  int microbatches;
  double true_tolerance;  // our energy may exceed Perseus's true energy by at most this fraction
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.model << " M=" << c.microbatches; }

class PerseusData : public ::testing::TestWithParam<Case> {};

// Perseus's plans re-evaluated on the measured options: at every one of their (time, energy), our
// lowest true energy at a time no later is no higher (+tolerance). And Perseus's published
// (model) energies, each taken at the true time its plan really needs: within 1%.
TEST_P(PerseusData, MatchesOrBeatsPerseusTruePlansAndPublishedFrontier) {
  const Case& c = GetParam();
  auto ours = our_frontier(c.model, c.microbatches);
  const std::string m = std::to_string(c.microbatches);
  auto perseus_true = read_points(kData / "perseus_true" / (c.model + "_a100_mb" + m + ".csv"), "time_s", "energy_j");
  auto published = read_points(kData / "iteration_time_energy" / "a100_sxm" / (c.model + "_bf16_mb" + m + ".csv"),
                               "time", "energy");
  ASSERT_EQ(perseus_true.size(), published.size());
  double worst_true = -1, sum_true = 0, best_true = 1, worst_published = -1;
  for (std::size_t i = 0; i < perseus_true.size(); ++i) {
    auto energy = min_energy_within_time(ours, perseus_true[i].time_s);
    ASSERT_TRUE(energy.has_value()) << "Perseus has a plan faster than all of ours: " << perseus_true[i].time_s;
    double gap = (*energy - perseus_true[i].energy_j) / perseus_true[i].energy_j;
    EXPECT_LE(gap, c.true_tolerance) << "at t=" << perseus_true[i].time_s;
    worst_true = std::max(worst_true, gap);
    best_true = std::min(best_true, gap);
    sum_true += gap;

    double time = std::max(published[i].time_s, perseus_true[i].time_s);
    auto at_published = min_energy_within_time(ours, time);
    ASSERT_TRUE(at_published.has_value());
    double gap_published = (*at_published - published[i].energy_j) / published[i].energy_j;
    EXPECT_LE(gap_published, 0.01) << "published point " << i << " at t=" << published[i].time_s;
    worst_published = std::max(worst_published, gap_published);
  }
  std::printf("%s M=%d vs Perseus true: worst %+.3f%% mean %+.3f%% best %+.3f%%; vs published: worst %+.3f%%\n",
              c.model.c_str(), c.microbatches, 100 * worst_true, 100 * sum_true / static_cast<double>(perseus_true.size()),
              100 * best_true, 100 * worst_published);
}

// Phillips–Dessouky alone is above Perseus at a few isolated BLOOM points (+0.108% at M = 24,
// +0.058% at M = 48); the local search brings every point within +0.05%.
INSTANTIATE_TEST_SUITE_P(A100, PerseusData,
                         ::testing::Values(Case{"gpt3-175b", 12, 0.0005}, Case{"gpt3-175b", 24, 0.0005},
                                           Case{"gpt3-175b", 48, 0.0005}, Case{"bloom", 12, 0.0005},
                                           Case{"bloom", 24, 0.0005}, Case{"bloom", 48, 0.0005}),
                         [](const auto& param_info) {
                           return (param_info.param.model == "bloom" ? std::string("bloom") : std::string("gpt3")) +
                                  "_M" + std::to_string(param_info.param.microbatches);
                         });

// M = 96 has no re-evaluated Perseus plans; compare with the published frontier wherever its time is
// reachable at all. Published times are planned, up to ~1% shorter than the plans really take, so
// points within 1% of our fastest (the fastest any plan can be) are left out. Published BLOOM
// energies run up to 2.1% below the true energy of Perseus's own plans, so BLOOM is held to 2%.
TEST(PerseusData, NinetySixMicrobatchesAgainstThePublishedFrontier) {
  for (auto [model, tolerance] : {std::pair<std::string, double>{"gpt3-175b", 0.01}, {"bloom", 0.02}}) {
    auto ours = our_frontier(model, 96);
    auto published = read_points(kData / "iteration_time_energy" / "a100_sxm" / (model + "_bf16_mb96.csv"), "time", "energy");
    double worst = -1;
    int compared = 0;
    for (const TimeEnergy& p : published) {
      if (p.time_s < ours.front().time_s * 1.01) continue;
      auto energy = min_energy_within_time(ours, p.time_s);
      ASSERT_TRUE(energy.has_value());
      double gap = (*energy - p.energy_j) / p.energy_j;
      EXPECT_LE(gap, tolerance) << model << " at t=" << p.time_s;
      worst = std::max(worst, gap);
      ++compared;
    }
    EXPECT_GT(compared, static_cast<int>(published.size()) * 3 / 4);
    std::printf("%s M=96 vs published (%d of %zu points): worst %+.3f%%\n", model.c_str(), compared,
                published.size(), 100 * worst);
  }
}

// Against a MIP at M = 12 (bench/mip_reference.py; HiGHS's plans at the deadlines where the front at
// the former fixed 1 ms unit was furthest above them, bench/results/frontier_mip.md): at the default
// unit and budget, within 0.1% of each. At 1 ms the default front was 0.28%, 0.20% and 0.19% above
// BLOOM's, 0.10% above GPT-3's.
TEST(PerseusData, WithinATenthOfAPercentOfAMipAtItsHardestDeadlines) {
  struct Deadline {
    const char* model;
    double deadline_s, highs_j;
  };
  const Deadline deadlines[] = {{"bloom", 2.841293, 6261.836140},
                                {"bloom", 2.866100, 6092.578095},
                                {"bloom", 2.890907, 5966.669491},
                                {"gpt3-175b", 2.969667, 5767.096597}};
  std::string last_model;
  std::vector<TimeEnergy> ours;
  for (const Deadline& d : deadlines) {
    if (d.model != last_model) ours = our_frontier(last_model = d.model, 12);
    const auto energy = min_energy_within_time(ours, d.deadline_s * (1 + 1e-9));
    ASSERT_TRUE(energy.has_value()) << d.model << " at " << d.deadline_s;
    EXPECT_LE(*energy, d.highs_j * 1.001) << d.model << " at " << d.deadline_s << " s: " << *energy << " J";
    std::printf("%s M=12 at %.6f s: %.3f J, HiGHS's plan %.3f J (%+.4f%%)\n", d.model, d.deadline_s, *energy,
                d.highs_j, 100 * (*energy - d.highs_j) / d.highs_j);
  }
}

}  // namespace
}  // namespace kareus::pipeline
