// The report pages: `kareus compare`'s one section per config with its figures and plot, the page
// both commands share, and the trust sentence.
#include "kareus/report/html_report.hpp"

#include <gtest/gtest.h>

#include "test_util.hpp"

namespace kareus::report {
namespace {

using kareus::testing::Contains;

std::size_t count(const std::string& text, const std::string& part) {
  std::size_t n = 0;
  for (std::size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

CompareSection section(std::string config) {
  return {.config = std::move(config),
          .energy_scope = "one GPU per pipeline stage (2 GPUs)",
          .reference = "Perseus",
          .methods = {{"Perseus", {5.0753, 2716.8}, std::nullopt, std::nullopt, 12},
                      {"Nanobatching+Perseus", {4.1093, 2608.2}, 25.72, 29.18, 144},
                      {"Kareus", {3.8864, 2513.6}, 28.44, 34.06, 3384}},
          .notes = {},
          .frontier_svg = "<svg viewBox=\"0 0 900 640\"><path d=\"M0,0\"/></svg>"};
}

TEST(CompareReportHtml, OneSectionPerConfigInOrderWithItsFiguresAndPlot) {
  CompareSection second = section("qwen <3> & co");
  second.reference = "Nanobatching+Perseus";
  second.notes = {"Perseus left out: the table has no sequential knob"};
  const std::string html =
      compare_report_html({"Kareus against its baselines", {{"engine", "eager"}}, "a model"},
                          {section("llama"), second});
  EXPECT_EQ(count(html, "<h2>"), 2u);
  EXPECT_LT(html.find("<h2>llama</h2>"), html.find("<h2>qwen &lt;3&gt; &amp; co</h2>")) << "in order, escaped";
  EXPECT_EQ(count(html, "<svg"), 2u) << "each config's plot inline";
  // Each method's fastest plan and iso figures at the precision `kareus compare` prints them; the
  // reference has none.
  EXPECT_TRUE(Contains(html, "<td>Kareus</td><td class=\"num\">3.8864</td><td class=\"num\">2513.6</td>"
                             "<td class=\"num\">28.4%</td><td class=\"num\">34.1%</td><td class=\"num\">3384</td>"));
  EXPECT_TRUE(Contains(html, "<td>Perseus</td><td class=\"num\">5.0753</td><td class=\"num\">2716.8</td>"
                             "<td class=\"num\">-</td><td class=\"num\">-</td>"));
  EXPECT_TRUE(Contains(html, "less energy at Nanobatching+Perseus's fastest time")) << "the reference named";
  EXPECT_TRUE(Contains(html, "<td>Nanobatching+<wbr>Perseus</td>")) << "a method's name may break after its '+'";
  EXPECT_TRUE(Contains(html, "<li>Perseus left out: the table has no sequential knob</li>"));
  EXPECT_TRUE(Contains(html, "<tr><th>engine</th><td>eager</td></tr>"));
  EXPECT_FALSE(Contains(html, "<script")) << "no scripts: readable offline";
}

TEST(CompareReportHtml, SaysWhyAConfigHasNoPlot) {
  CompareSection none = section("empty");
  none.methods.clear();
  none.reference.clear();
  none.frontier_svg.clear();
  CompareSection no_gnuplot = section("plain");
  no_gnuplot.frontier_svg.clear();
  const std::string html = compare_report_html({"t", {}, ""}, {none, no_gnuplot});
  EXPECT_TRUE(Contains(html, "(none: no baseline could run)"));
  EXPECT_TRUE(Contains(html, "every method left out: no plot"));
  EXPECT_TRUE(Contains(html, "gnuplot is not installed"));
}

TEST(HtmlReport, SharesThePageAndKeepsItsSectionsInOrder) {
  const std::string html = html_report({"Kareus plan: job", {{"target", "max-throughput"}}, "a model"},
                                       "<svg id=\"f\"></svg>", "<svg id=\"t\"></svg>",
                                       {{"Overlap decisions", "<p>x</p>"}, {"One partition's overlap", "<p>y</p>"}});
  const auto at = [&](const std::string& part) { return html.find(part); };
  EXPECT_LT(at("<h1>Kareus plan: job</h1>"), at("<h2>Iteration time–energy frontier</h2>"));
  EXPECT_LT(at("<h2>Iteration time–energy frontier</h2>"), at("<svg id=\"f\">"));
  EXPECT_LT(at("<svg id=\"f\">"), at("<h2>Chosen plan: SM clock per instruction</h2>"));
  EXPECT_LT(at("<svg id=\"t\">"), at("<h2>Overlap decisions</h2>"));
  EXPECT_LT(at("<h2>Overlap decisions</h2>"), at("<h2>One partition's overlap</h2>"));
  EXPECT_NE(at("<h2>One partition's overlap</h2>"), std::string::npos);
  // The compare page has the same head (style, viewport): the two reports look alike.
  const std::string compare = compare_report_html({"Kareus plan: job", {}, ""}, {});
  EXPECT_EQ(html.substr(0, html.find("</head>")), compare.substr(0, compare.find("</head>")));
}

TEST(TrustNote, NamesTheModelsKnownErrorAndWhereItIsMeasured) {
  EXPECT_TRUE(Contains(trust_note(evaluate::Provenance::kModel), "docs/model.md"));
  EXPECT_TRUE(Contains(trust_note(evaluate::Provenance::kModel), "within 2 points of the measured"));
  EXPECT_TRUE(Contains(trust_note(evaluate::Provenance::kModel), "5.7% short"));
  EXPECT_FALSE(Contains(trust_note(evaluate::Provenance::kMeasurement), "model"));
}

}  // namespace
}  // namespace kareus::report
