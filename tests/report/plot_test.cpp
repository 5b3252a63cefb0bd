// The frontier plot's iso annotation: the sentence, the arrows' geometry against core's iso
// figures, and (where gnuplot is installed) what the SVG carries.
#include "kareus/report/plot.hpp"

#include <gtest/gtest.h>

#include "test_util.hpp"

namespace kareus::report {
namespace {

using kareus::testing::Contains;

// Perseus slower and hungrier everywhere; Kareus's frontier reaches below and left of both its ends.
const std::vector<TimeEnergy> kKareus = {{3.0, 2500}, {3.5, 2100}, {4.0, 1900}, {4.6, 1800}};
const std::vector<TimeEnergy> kPerseus = {{4.0, 2700}, {5.0, 2300}, {6.0, 2200}};

FrontierPlot plot_with_iso() {
  return {.title = "job",
          .methods = {{"Perseus", kPerseus, false, {}, false},
                      {"Kareus", kKareus, false, {}, false},
                      {"Megatron-LM", {{4.0, 2900}}, false, {}, false}},
          .chosen = kKareus.front(),
          .iso = IsoSavings{"Kareus", "Perseus", iso_time_energy_reduction_pct(kKareus, kPerseus),
                            iso_energy_time_reduction_pct(kKareus, kPerseus)}};
}

TEST(IsoSavingsSentence, SaysBothFiguresAsPlanAndComparePrintThem) {
  EXPECT_EQ(iso_savings_sentence({"Kareus", "Perseus", 28.44, 34.06}),
            "Kareus against Perseus: 28.4% less energy at Perseus's fastest time, 34.1% less time at its lowest "
            "energy");
  // A loss is said as such, not as a negative saving; a missing figure says why it is missing.
  EXPECT_EQ(iso_savings_sentence({"Kareus", "Nanobatching+Perseus", -2.0, std::nullopt}),
            "Kareus against Nanobatching+Perseus: 2.0% more energy at Nanobatching+Perseus's fastest time, no plan "
            "as frugal as its lowest energy");
}

TEST(IsoArrows, GoFromTheReferencesEndsToTheMethodsFrontierAtTheSavingsCoreComputes) {
  const FrontierPlot plot = plot_with_iso();
  const std::vector<IsoArrow> arrows = iso_arrows(plot);
  ASSERT_EQ(arrows.size(), 2u);
  // Iso-time: straight down from Perseus's fastest plan to Kareus's least energy at 4.0 s.
  EXPECT_EQ(arrows[0].from, (TimeEnergy{4.0, 2700}));
  EXPECT_EQ(arrows[0].to, (TimeEnergy{4.0, 1900}));
  EXPECT_DOUBLE_EQ(100 * (1 - arrows[0].to.energy_j / arrows[0].from.energy_j),
                   *plot.iso->iso_time_energy_reduction_pct);
  EXPECT_EQ(arrows[0].label, "-29.6% energy");
  // Iso-energy: straight left from Perseus's lowest energy to Kareus's fastest plan within 2200 J.
  EXPECT_EQ(arrows[1].from, (TimeEnergy{6.0, 2200}));
  EXPECT_EQ(arrows[1].to, (TimeEnergy{3.5, 2200}));
  EXPECT_NEAR(100 * (1 - arrows[1].to.time_s / arrows[1].from.time_s), *plot.iso->iso_energy_time_reduction_pct, 1e-12);
  EXPECT_EQ(arrows[1].label, "-41.7% time");
}

TEST(IsoArrows, NoneForAFigureThatIsMissingOrASeriesThePlotLacks) {
  FrontierPlot plot = plot_with_iso();
  plot.iso->iso_energy_time_reduction_pct.reset();
  ASSERT_EQ(iso_arrows(plot).size(), 1u);
  EXPECT_EQ(iso_arrows(plot)[0].label.back(), 'y');  // "... energy": the iso-time arrow is kept
  plot.iso->reference = "Nanobatching+Perseus";      // not on this plot
  EXPECT_TRUE(iso_arrows(plot).empty());
  plot.iso.reset();
  EXPECT_TRUE(iso_arrows(plot).empty());
}

TEST(FrontierPlotSvg, DrawsEveryMethodInItsColourTheChosenPlanAndTheIsoFigures) {
  if (!gnuplot_available()) GTEST_SKIP() << "gnuplot is not installed";
  const std::string svg = frontier_plot_svg(plot_with_iso());
  ASSERT_FALSE(svg.empty());
  for (const char* title : {"Kareus", "Perseus", "Megatron-LM", "chosen plan", "-29.6% energy", "-41.7% time"}) {
    EXPECT_TRUE(Contains(svg, std::string(">") + title + "<")) << title;
  }
  EXPECT_TRUE(Contains(svg, "Kareus against Perseus: 29.6% less energy at Perseus"));
  EXPECT_TRUE(Contains(svg, "41.7% less time at its lowest energy"));
  // The method's colours, the same in every plot: Kareus vermillion, Perseus blue.
  EXPECT_TRUE(Contains(svg, "rgb(213,  94,   0)"));
  EXPECT_TRUE(Contains(svg, "rgb(  0, 114, 178)"));
  // Without iso figures: no arrow labels, no sentence.
  FrontierPlot plain = plot_with_iso();
  plain.iso.reset();
  const std::string plain_svg = frontier_plot_svg(plain);
  EXPECT_FALSE(Contains(plain_svg, "less energy"));
  EXPECT_FALSE(Contains(plain_svg, "% time"));
}

}  // namespace
}  // namespace kareus::report
