// The reports of `kareus plan` and `kareus compare` on the default job: the frontier plot carries
// the run's own iso figures (the same in both), the chosen plan is marked, and `kareus compare`
// writes one page with a section per config whose plot is the SVG it writes beside it.
#include <nlohmann/json.hpp>

#include <fmt/format.h>

#include "cli_fixture.hpp"

namespace kareus::testing {
namespace {

std::size_t count(const std::string& text, const std::string& part) {
  std::size_t n = 0;
  for (std::size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

// The sentence the plots must show, from the figures a run recorded (one decimal, as printed).
std::string iso_sentence(double iso_time_pct, double iso_energy_pct) {
  return fmt::format("Kareus against Perseus: {:.1f}% less energy at Perseus's fastest time, {:.1f}% less time at its "
                     "lowest energy",
                     iso_time_pct, iso_energy_pct);
}

using ReportCli = CliTest;

TEST_F(ReportCli, PlanAndCompareDrawTheSameIsoFiguresTheyRecord) {
  ASSERT_EQ(run("plan --out " + path("plan")).exit_code, 0);
  const CliResult compared = run("compare --out " + path("cmp"));
  ASSERT_EQ(compared.exit_code, 0) << compared.err;

  const auto baselines = nlohmann::json::parse(slurp(path("plan/summary.json")))["baselines"];
  const std::string plan_sentence = iso_sentence(baselines["iso_time_energy_reduction_pct_vs_perseus"].get<double>(),
                                                 baselines["iso_energy_time_reduction_pct_vs_perseus"].get<double>());
  const std::string frontier_svg = slurp(path("plan/frontier.svg"));
  EXPECT_TRUE(contains(frontier_svg, plan_sentence)) << plan_sentence;
  EXPECT_TRUE(contains(slurp(path("plan/report.html")), plan_sentence)) << "the report embeds the same plot";
  EXPECT_TRUE(contains(frontier_svg, ">chosen plan<")) << "the chosen plan marked";
  EXPECT_TRUE(contains(frontier_svg, fmt::format(">{:+.1f}% energy<",
                                                 -baselines["iso_time_energy_reduction_pct_vs_perseus"].get<double>())))
      << "the iso-time arrow labelled";

  const auto compare = nlohmann::json::parse(slurp(path("cmp/compare.json")));
  ASSERT_EQ(compare["configs"].size(), 1u);
  const auto& config = compare["configs"][0];
  std::string compare_sentence;
  for (const auto& m : config["methods"]) {
    if (m["method"] == "Kareus") {
      compare_sentence = iso_sentence(m["iso_time_energy_reduction_pct"].get<double>(),
                                      m["iso_energy_time_reduction_pct"].get<double>());
    }
  }
  EXPECT_EQ(compare_sentence, plan_sentence) << "kareus plan and kareus compare agree on the same job";

  // One page, one section per config, its plot the SVG written beside it (a file, not a folder the
  // '/' of "15/13 layers" would make).
  const std::string html = slurp(path("cmp/report.html"));
  EXPECT_TRUE(contains(compared.out, "report.html")) << compared.out;
  EXPECT_EQ(count(html, "<h2>"), 1u);
  EXPECT_TRUE(contains(html, "<h2>" + config["config"].get<std::string>() + "</h2>"));
  EXPECT_TRUE(contains(html, compare_sentence));
  EXPECT_TRUE(contains(html, "<td>Nanobatching+<wbr>Perseus</td>"));
  EXPECT_FALSE(contains(html, "<script"));
  std::vector<std::filesystem::path> svgs;
  for (const auto& entry : std::filesystem::directory_iterator(path("cmp"))) {
    EXPECT_TRUE(entry.is_regular_file()) << entry.path();
    if (entry.path().extension() == ".svg") svgs.push_back(entry.path());
  }
  ASSERT_EQ(svgs.size(), 1u);
  EXPECT_EQ(svgs[0].filename(),
            "Llama-3.2-3B-on-NVIDIA-A100-SXM4-40GB-TP-8-CP-1-PP-2-15-13-layers-DP-1-mbs-8-seq-4096-8-microbatches-"
            "full-checkpointing.svg");
  const std::string svg = slurp(svgs[0]);
  EXPECT_TRUE(contains(html, svg.substr(svg.find("<svg")))) << "the page's plot is the file's";
}

}  // namespace
}  // namespace kareus::testing
