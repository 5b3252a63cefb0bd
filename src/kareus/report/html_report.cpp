#include "kareus/report/html_report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "kareus/schedule/dag.hpp"

namespace kareus::report {
namespace {

std::string escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

}  // namespace

std::string clock_timeline_svg(const plan::Plan& plan) {
  // Start times from the plan's own dependency DAG and option times.
  auto schedule =
      schedule::PipelineSchedule::make(plan.schedule, plan.num_stages, plan.num_microbatches, plan.virtual_stages);
  schedule::InstructionDag dag(schedule);
  std::vector<double> durations;
  std::vector<double> clocks;
  for (const auto& stage : plan.stages) {
    for (const auto& ins : stage) {
      durations.push_back(ins.time_s);
      clocks.push_back(ins.freq_mhz);
    }
  }
  if (durations.size() != dag.num_nodes()) return "<p>(the plan does not match its schedule; no timeline)</p>";
  std::vector<double> finish = dag.earliest_finish<double>(durations);
  const double makespan = finish.empty() ? 1 : *std::max_element(finish.begin(), finish.end());
  const double lo = *std::min_element(clocks.begin(), clocks.end());
  const double hi = *std::max_element(clocks.begin(), clocks.end());
  const double width = 1000, row = 28, left = 70;
  // Scales to the window: the viewBox keeps the drawing whole in a narrow one.
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {0} {1}\" width=\"100%\" style=\"max-width:{0}px\" "
      "font-family=\"sans-serif\" font-size=\"11\">\n",
      left + width + 10, row * plan.num_stages + 80);
  for (std::size_t v = 0; v < dag.num_nodes(); ++v) {
    const auto& ins = dag.instruction(v);
    double x = left + width * (finish[v] - durations[v]) / makespan;
    double w = std::max(0.5, width * durations[v] / makespan);
    double y = 10 + row * ins.stage;
    double t = hi > lo ? (clocks[v] - lo) / (hi - lo) : 1.0;
    int red = static_cast<int>(60 + 190 * t), blue = static_cast<int>(230 - 170 * t);
    svg += fmt::format(
        "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{}\" fill=\"rgb({},90,{})\" stroke=\"white\" "
        "stroke-width=\"0.5\"><title>stage {} {} {}: {:.0f} MHz, {:.4f} s</title></rect>\n",
        x, y, w, row - 6, red, blue, ins.stage, schedule::to_string(ins.type), ins.microbatch, clocks[v],
        durations[v]);
    if (w > 18) {
      svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" fill=\"white\">{}{}</text>\n", x + 2, y + 15,
                         ins.type == schedule::InstructionType::kForward ? 'F' : 'B', ins.microbatch);
    }
  }
  for (int s = 0; s < plan.num_stages; ++s) {
    svg += fmt::format("<text x=\"4\" y=\"{:.1f}\" font-size=\"12\">stage {}</text>\n", 10 + row * s + 14, s);
  }
  // Time axis, and the colour legend: the clock range as a gradient with its MHz at both ends.
  const double axis_y = row * plan.num_stages + 26;
  svg += fmt::format("<text x=\"{}\" y=\"{:.1f}\" font-size=\"12\">0 s</text><text x=\"{}\" y=\"{:.1f}\" "
                     "font-size=\"12\" text-anchor=\"end\">{:.3f} s (gaps: a stage waiting)</text>\n",
                     left, axis_y, left + width, axis_y, makespan);
  svg += fmt::format(
      "<defs><linearGradient id=\"clock\"><stop offset=\"0\" stop-color=\"rgb(60,90,230)\"/>"
      "<stop offset=\"1\" stop-color=\"rgb(250,90,60)\"/></linearGradient></defs>\n"
      "<text x=\"{0}\" y=\"{1:.1f}\" font-size=\"12\">SM clock</text>"
      "<rect x=\"{2}\" y=\"{3:.1f}\" width=\"240\" height=\"12\" fill=\"url(#clock)\"/>"
      "<text x=\"{2}\" y=\"{4:.1f}\" font-size=\"12\">{5:.0f} MHz</text>"
      "<text x=\"{6}\" y=\"{4:.1f}\" font-size=\"12\" text-anchor=\"end\">{7:.0f} MHz</text>\n",
      left, axis_y + 26, left + 70, axis_y + 16, axis_y + 42, lo, left + 310, hi);
  return svg + "</svg>\n";
}

std::string overlap_decisions_html(const plan::Plan& chosen, const std::vector<plan::Plan>& frontier) {
  // Per partition key, how often each knob runs: in the chosen plan and over the frontier's plans,
  // counted over instructions (a recomputed forward's knobs count with the forward's keys).
  using Counts = std::map<std::string, std::map<std::string, long>>;  // key -> knob -> instructions
  auto count = [](const plan::Plan& p, Counts& into) {
    for (std::size_t s = 0; s < p.stages.size(); ++s) {
      for (std::size_t k = 0; k < p.stages[s].size(); ++k) {
        const auto knobs = plan::instruction_knobs(*p.stages[s][k].knob, "knob", "plan");
        for (const auto* list : {&knobs.partitions, &knobs.recompute}) {
          for (const plan::PartitionKnob& pk : *list) {
            into[pk.key][pk.slot == "none" ? std::string("sequential") : fmt::format("{}, {} SMs", pk.slot, pk.sms)]++;
          }
        }
      }
    }
  };
  Counts in_chosen, along;
  count(chosen, in_chosen);
  for (const plan::Plan& p : frontier) count(p, along);
  if (in_chosen.empty()) return "<p>(the plan carries no partition knobs: every collective after its compute)</p>";
  auto shares = [](const std::map<std::string, long>& knobs) {
    long total = 0;
    for (const auto& [knob, n] : knobs) total += n;
    std::vector<std::pair<long, std::string>> sorted;
    for (const auto& [knob, n] : knobs) sorted.emplace_back(-n, knob);
    std::sort(sorted.begin(), sorted.end());
    std::string out;
    for (const auto& [n, knob] : sorted) {
      out += fmt::format("{}{} ({:.0f}%)", out.empty() ? "" : "; ", escape(knob), 100.0 * static_cast<double>(-n) / static_cast<double>(total));
    }
    return out;
  };
  std::string rows;
  for (const auto& [key, knobs] : in_chosen) {
    rows += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td></tr>\n", escape(key), shares(knobs),
                        along.contains(key) ? shares(along.at(key)) : std::string("-"));
  }
  return fmt::format(
      "<p>Each partition's knob: where its collective launches (before which op) and how many SMs it takes, or "
      "sequential (the collective after the compute, the microbatch un-split); the share of the instructions that "
      "run it, in the chosen plan and over the {} plans of the frontier written beside it.</p>\n"
      "<table class=\"knobs\"><tr><th>partition</th><th>chosen plan</th><th>along the frontier</th></tr>\n{}</table>\n",
      frontier.size(), rows);
}

namespace {

// The one page both reports share: title, note, facts, then `body`.
std::string html_page(const ReportText& text, const std::string& body) {
  std::string facts;
  for (const auto& [key, value] : text.facts) {
    facts += fmt::format("<tr><th>{}</th><td>{}</td></tr>\n", escape(key), escape(value));
  }
  return fmt::format(
      "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width\">"
      "<title>{0}</title>\n"
      "<style>body{{font-family:sans-serif;margin:2em;max-width:1100px}}th{{text-align:left;padding-right:1em}}"
      "td{{padding-right:1em;vertical-align:top}}.note{{color:#a33}}svg{{height:auto;max-width:100%}}"
      ".knobs td,.knobs th{{border-bottom:1px solid #ddd;padding:2px 8px}}.num{{text-align:right}}"
      // A narrow window: a compare table's six columns still fit 480 px.
      "@media (max-width:600px){{body{{margin:0.5em}}.knobs{{font-size:0.8em}}"
      ".knobs td,.knobs th{{padding:2px 3px}}}}</style></head>\n<body>\n<h1>{0}</h1>\n"
      "<p class=\"note\">{1}</p>\n<table>\n{2}</table>\n{3}"
      "</body></html>\n",
      escape(text.title), escape(text.note), facts, body);
}

// A method's name, escaped, free to break after a '+' (Nanobatching+Perseus) in a narrow window.
std::string breakable(const std::string& method) {
  std::string out;
  for (char c : escape(method)) out += c == '+' ? std::string("+<wbr>") : std::string(1, c);
  return out;
}

constexpr const char* kNoGnuplot = "<p>(gnuplot is not installed: no plot)</p>";

std::string optional_pct(const std::optional<double>& pct) { return pct ? fmt::format("{:.1f}%", *pct) : "-"; }

}  // namespace

std::string html_report(const ReportText& text, const std::string& frontier_svg, const std::string& timeline_svg,
                        const std::vector<std::pair<std::string, std::string>>& sections) {
  std::string more;
  for (const auto& [title, html] : sections) more += fmt::format("<h2>{}</h2>\n{}\n", escape(title), html);
  return html_page(text, fmt::format("<h2>Iteration time–energy frontier</h2>\n{}\n"
                                     "<h2>Chosen plan: SM clock per instruction</h2>\n{}\n{}",
                                     frontier_svg.empty() ? kNoGnuplot : frontier_svg, timeline_svg, more));
}

std::string trust_note(evaluate::Provenance provenance) {
  return provenance == evaluate::Provenance::kModel
             ? "a model: on the Kareus cluster's measured plans, under the engine they ran through, its times are "
               "within 3.1% (median) and nanobatching's gain within 2 points of the measured, but the context-parallel "
               "un-split layer runs up to 5.7% short (docs/model.md, \"The simulated GPU against measured hardware\")"
             : "measured samples, as measured";
}

std::string compare_report_html(const ReportText& text, const std::vector<CompareSection>& configs) {
  std::string body;
  for (const CompareSection& c : configs) {
    std::string rows;
    for (const MethodSummary& m : c.methods) {
      rows += fmt::format(
          "<tr><td>{}</td><td class=\"num\">{:.4f}</td><td class=\"num\">{:.1f}</td><td class=\"num\">{}</td>"
          "<td class=\"num\">{}</td><td class=\"num\">{}</td></tr>\n",
          breakable(m.method), m.fastest.time_s, m.fastest.energy_j, optional_pct(m.iso_time_energy_reduction_pct),
          optional_pct(m.iso_energy_time_reduction_pct), m.measurements);
    }
    const std::string reference = c.reference.empty() ? std::string("the reference") : escape(c.reference);
    std::string notes;
    for (const std::string& note : c.notes) notes += fmt::format("<li>{}</li>\n", escape(note));
    body += fmt::format(
        "<h2>{}</h2>\n<p>Each method's fastest plan; energy covers {}. Iso figures against {}'s frontier{}.</p>\n"
        "<table class=\"knobs\"><tr><th>method</th><th>time (s)</th><th>energy (J)</th>"
        "<th>less energy at {}'s fastest time</th><th>less time at {}'s lowest energy</th>"
        "<th>measure&shy;ments</th></tr>\n"
        "{}</table>\n{}{}\n",
        escape(c.config), escape(c.energy_scope), reference,
        c.reference.empty() ? " (none: no baseline could run)" : "",
        reference, reference, rows, notes.empty() ? "" : "<ul class=\"note\">\n" + notes + "</ul>\n",
        c.frontier_svg.empty() ? (c.methods.empty() ? "<p>(every method left out: no plot)</p>" : kNoGnuplot)
                               : c.frontier_svg);
  }
  return html_page(text, body);
}

}  // namespace kareus::report
