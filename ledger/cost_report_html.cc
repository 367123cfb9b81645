// Writes the cost report's HTML page; see cost_report_html.h.
#include "ledger/cost_report_html.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "common/html_escape.h"

namespace pdserve::ledger {
namespace {

constexpr size_t kMaxApisCharted = 20;  // a full LiteLLM sheet has thousands; JSON has them all

std::string Money(double v) { return fmt::format("${:.4f}", v); }

struct Series {
  std::string name, color;
};
struct Bar {
  std::string label;
  std::vector<double> values;  // one per series; NaN: no value
};

// Horizontal bars, one row per Bar: the series side by side, or stacked into one bar.
std::string BarChart(const std::string& title, const std::vector<Series>& series,
                     const std::vector<Bar>& bars, bool stacked) {
  const int label_w = 220, plot_w = 520, row_h = stacked ? 22 : 12 * series.size() + 10;
  double max = 0;
  for (const Bar& b : bars) {
    double sum = 0;
    for (double v : b.values) {
      if (std::isnan(v)) continue;
      max = std::max(max, stacked ? (sum += v) : v);
    }
  }
  if (max <= 0) max = 1;
  const int height = 40 + static_cast<int>(bars.size()) * row_h + 20;
  std::string svg = fmt::format(
      "<h3>{}</h3>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" "
      "role=\"img\">\n",
      HtmlEscape(title), label_w + plot_w + 120, height);
  for (size_t i = 0; i < series.size(); ++i) {
    svg += fmt::format(
        "<rect x=\"{}\" y=\"8\" width=\"12\" height=\"12\" fill=\"{}\"/><text x=\"{}\" "
        "y=\"19\">{}</text>\n",
        label_w + i * 150, series[i].color, label_w + i * 150 + 16, HtmlEscape(series[i].name));
  }
  int y = 36;
  for (const Bar& b : bars) {
    svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n", label_w - 8,
                       y + row_h / 2, HtmlEscape(b.label));
    double x = 0;
    for (size_t i = 0; i < series.size() && i < b.values.size(); ++i) {
      const double v = b.values[i];
      if (std::isnan(v)) continue;
      const double w = v / max * plot_w;
      const int bar_y = stacked ? y : y + static_cast<int>(i) * 12;
      svg += fmt::format(
          "<rect x=\"{:.1f}\" y=\"{}\" width=\"{:.1f}\" height=\"{}\" fill=\"{}\"><title>{}: "
          "{}</title></rect>\n",
          label_w + x, bar_y, std::max(w, 0.5), stacked ? 18 : 10, series[i].color,
          HtmlEscape(series[i].name), Money(v));
      if (!stacked) {
        svg += fmt::format("<text x=\"{:.1f}\" y=\"{}\" class=\"v\">{}</text>\n", label_w + w + 4,
                           bar_y + 9, Money(v));
      }
      if (stacked) x += w;
    }
    y += row_h;
  }
  return svg + "</svg>\n";
}

double Nan() { return std::nan(""); }
double OrNan(std::optional<double> v) { return v ? *v : Nan(); }

std::string CostPerMillionChart(const CostReport& r) {
  std::vector<Bar> bars;
  for (const auto& [name, f] : r.overall.classes) {
    bars.push_back({name + " (compute)",
                    {OrNan(PerMillion(f.prefill_usd, f.input_tokens)),
                     OrNan(PerMillion(f.decode_usd, f.output_tokens))}});
  }
  const ClassFigures blended = Blended(r.overall);
  bars.push_back({"blended (compute)",
                  {OrNan(PerMillion(blended.prefill_usd, blended.input_tokens)),
                   OrNan(PerMillion(blended.decode_usd, blended.output_tokens))}});
  const double compute = blended.prefill_usd + blended.decode_usd;
  if (compute > 0) {
    const double in_share = blended.prefill_usd / compute;
    bars.push_back(
        {"fully loaded",
         {OrNan(PerMillion(r.overall.capacity_usd * in_share, blended.input_tokens)),
          OrNan(PerMillion(r.overall.capacity_usd * (1 - in_share), blended.output_tokens))}});
  }
  for (size_t i = 0; i < r.apis.size() && i < kMaxApisCharted; ++i) {
    bars.push_back({"api " + r.apis[i].name,
                    {r.apis[i].input_cost_per_token * 1e6, r.apis[i].output_cost_per_token * 1e6}});
  }
  return BarChart("Cost per 1M tokens by option (USD)",
                  {{"input", "#4e79a7"}, {"output", "#f28e2b"}}, bars, false);
}

std::string WasteChart(const CostReport& r) {
  std::vector<Bar> bars;
  auto add = [&](const std::string& label, const ReportSection& s) {
    bars.push_back({label, {s.request_usd, s.retry_waste_usd, s.idle_usd}});
  };
  add("overall", r.overall);
  for (const auto& [name, s] : r.tenants) add("tenant " + name, s);
  return BarChart(
      "Where the money went (USD; tenants' idle is an allocated share)",
      {{"request cost", "#59a14f"}, {"retry waste", "#e15759"}, {"idle waste", "#bab0ac"}}, bars,
      true);
}

std::string UtilisationChart(const CostReport& r) {
  if (r.utilisation.empty()) return "<h3>Utilisation over time</h3><p>No worker periods.</p>\n";
  const int plot_w = 720, plot_h = 200, left = 50, top = 20;
  const double bar_w = static_cast<double>(plot_w) / r.utilisation.size();
  std::string svg = fmt::format(
      "<h3>Utilisation over time (busy GPU-seconds / uptime GPU-seconds)</h3>\n<svg "
      "xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" role=\"img\">\n",
      left + plot_w + 20, top + plot_h + 50);
  for (int pct : {0, 50, 100}) {
    const int y = top + plot_h - plot_h * pct / 100;
    svg += fmt::format(
        "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#ddd\"/><text x=\"{}\" y=\"{}\" "
        "text-anchor=\"end\">{}%</text>\n",
        left, y, left + plot_w, y, left - 4, y + 4, pct);
  }
  for (size_t i = 0; i < r.utilisation.size(); ++i) {
    const UtilisationBucket& b = r.utilisation[i];
    const double u = b.uptime_gpu_seconds > 0 ? b.busy_gpu_seconds / b.uptime_gpu_seconds : 0.0;
    const double h = std::min(u, 1.0) * plot_h;
    svg += fmt::format(
        "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" "
        "fill=\"#76b7b2\"><title>{} to {}: {:.1f}%</title></rect>\n",
        left + i * bar_w + 1, top + plot_h - h, std::max(bar_w - 2, 1.0), h,
        FormatUnixTime(b.start_unix), FormatUnixTime(b.end_unix), u * 100);
  }
  svg += fmt::format(
      "<text x=\"{}\" y=\"{}\">{}</text><text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n",
      left, top + plot_h + 20, FormatUnixTime(r.utilisation.front().start_unix), left + plot_w,
      top + plot_h + 20, FormatUnixTime(r.utilisation.back().end_unix));
  return svg + "</svg>\n";
}

std::string SectionRow(const std::string& name, const ReportSection& s) {
  const std::optional<double> hit = s.prompt_cache.HitRate(), saved = s.prompt_cache.SavedUsd();
  return fmt::format(
      "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
      "<td>{}</td><td>{}</td><td>{}</td></tr>\n",
      HtmlEscape(name), s.requests, s.input_tokens, s.output_tokens, Money(s.capacity_usd),
      Money(s.request_usd), Money(s.retry_waste_usd), Money(s.idle_usd),
      hit ? fmt::format("{:.1f}%", *hit * 100) : std::string("-"),
      saved ? "~" + Money(*saved) : std::string("-"));
}

// Where accepted requests went, and what the external upstreams' tokens would have cost on burst.
std::string MixTables(const CostReport& r) {
  const std::vector<MixEntry> mix = Mix(r.overall);
  if (mix.empty()) return "";
  std::string html =
      "<h3>Mix</h3><table><tr><th>option</th><th>requests</th><th>share</th><th>input "
      "tokens</th><th>output tokens</th><th>cost</th></tr>\n";
  for (const MixEntry& m : mix) {
    html += fmt::format(
        "<tr><td>{}</td><td>{}</td><td>{:.1f}%</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
        HtmlEscape(m.option), m.requests, m.request_share * 100, m.input_tokens, m.output_tokens,
        Money(m.cost_usd));
  }
  html +=
      "</table><p>A class's cost is its capacity, idle and cold starts included; an API's, its "
      "rows.</p>\n";
  if (r.overall.external.empty()) return html;
  html +=
      "<h3>Overflow to external APIs against burst</h3><table><tr><th>API</th><th>requests</th>"
      "<th>failed</th><th>input tokens</th><th>from its prompt cache</th><th>cost</th><th>retry "
      "waste</th><th>same tokens on burst (compute)</th>"
      "<th>on burst (fully loaded)</th></tr>\n";
  auto money = [](std::optional<double> v) { return v ? Money(*v) : std::string("-"); };
  for (const auto& [name, e] : r.overall.external) {
    const OnBurst on = ExternalOnBurst(r.overall, e);
    html += fmt::format(
        "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</"
        "td>"
        "<td>{}</td></tr>\n",
        HtmlEscape(name), e.requests, e.failed_attempts, e.input_tokens, e.cached_input_tokens,
        Money(e.cost_usd), Money(e.wasted_usd), money(on.compute_usd), money(on.fully_loaded_usd));
  }
  return html + "</table><p>-: burst capacity served no tokens of that kind in this window.</p>\n";
}

// Admission's decisions and its predictions against the outcomes, overall and per tenant.
std::string PredictionsTable(const CostReport& r) {
  std::string html =
      "<h3>Predictions against outcomes</h3><table><tr><th>section</th><th>decisions</th>"
      "<th>predicted TTFT</th><th>predicted queue wait</th></tr>\n";
  auto row = [&](const std::string& name, const PredictionFigures& f) {
    html +=
        fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n", HtmlEscape(name),
                    HtmlEscape(DecisionsText(f)), HtmlEscape(ErrorSummaryText(Summarise(f.ttft))),
                    HtmlEscape(ErrorSummaryText(Summarise(f.queue_wait))));
  };
  row("overall", r.overall.predictions);
  for (const auto& [pool, errors] : r.overall.predictions.ttft_by_pool) {
    html += fmt::format("<tr><td>pool {}</td><td></td><td>{}</td><td></td></tr>\n",
                        HtmlEscape(pool), HtmlEscape(ErrorSummaryText(Summarise(errors))));
  }
  for (const auto& [name, s] : r.tenants) row("tenant " + name, s.predictions);
  return html +
         "</table><p>error = predicted - measured; relative error = |error| / measured; bias "
         "in % = the errors' sum over the measured sum. Requests admitted to workers whose "
         "first token arrived.</p>\n";
}

std::string Tables(const CostReport& r) {
  std::string html =
      "<h3>Sections</h3><table><tr><th>section</th><th>requests</th><th>input tokens</th>"
      "<th>output tokens</th><th>capacity</th><th>request cost</th><th>retry waste</th>"
      "<th>idle waste</th><th>prompt cache hit rate</th><th>cache saved **</th></tr>\n";
  html += SectionRow("overall", r.overall);
  for (const auto& [name, s] : r.tenants) html += SectionRow("tenant " + name + " *", s);
  html +=
      "</table><p>* capacity and idle belong to workers; a tenant's are allocated by its "
      "share of compute. ** an estimate: cached prompt tokens at the section's measured "
      "prefill compute cost per uncached prompt token.</p>\n";
  html +=
      "<h3>External APIs</h3><table><tr><th>API</th><th>provider</th><th>input / 1M</th>"
      "<th>output / 1M</th><th>cost of these tokens</th><th>break-even reserved "
      "utilisation</th></tr>\n";
  for (const ApiFigures& a : r.overall.apis) {
    const BreakEven b = ReservedBreakEven(r.overall, a);
    html += fmt::format(
        "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
        HtmlEscape(a.price.name), HtmlEscape(a.price.provider),
        Money(a.price.input_cost_per_token * 1e6), Money(a.price.output_cost_per_token * 1e6),
        Money(a.api_cost_usd),
        b.never ? std::string("never") : fmt::format("{:.1f}%", b.utilisation.value_or(0) * 100));
  }
  html += "</table>\n" + MixTables(r) + PredictionsTable(r);
  html +=
      "<h3>Workers</h3><table><tr><th>worker</th><th>class</th><th>GPUs</th>"
      "<th>$/GPU-hour</th><th>uptime s</th><th>busy s</th><th>capacity</th><th>idle "
      "waste</th><th>retry waste</th></tr>\n";
  for (const WorkerFigures& w : r.workers) {
    html += fmt::format(
        "<tr><td>{}</td><td>{}</td><td>{}</td><td>{:.2f}</td><td>{:.1f}</td><td>{:.1f}</td>"
        "<td>{}</td><td>{}</td><td>{}</td></tr>\n",
        HtmlEscape(w.worker.name), HtmlEscape(ToString(w.worker.capacity_class)),
        w.worker.gpu_count, w.worker.price_per_gpu_hour, w.uptime_seconds, w.busy_seconds,
        Money(w.capacity_usd), Money(w.idle_usd), Money(w.retry_waste_usd));
  }
  return html + "</table>\n";
}

}  // namespace

std::string CostReportHtml(const CostReport& r) {
  std::string window;
  if (r.options.from_unix) window += " from " + FormatUnixTime(*r.options.from_unix);
  if (r.options.to_unix) window += " to " + FormatUnixTime(*r.options.to_unix);
  std::string html =
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<title>pdserve cost report</title><style>body{font:14px sans-serif;margin:2em;"
      "color:#222}svg text{font:12px sans-serif}svg text.v{fill:#555}table{border-collapse:"
      "collapse;margin-bottom:1em}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}"
      "td:first-child,th:first-child{text-align:left}</style></head><body>\n";
  html += "<h2>pdserve cost report" + HtmlEscape(window) + "</h2>\n";
  html += fmt::format(
      "<p>{} requests, {} input and {} output tokens. Capacity {}, request cost {}, retry "
      "waste {}, idle waste {}.</p>\n",
      r.overall.requests, r.overall.input_tokens, r.overall.output_tokens,
      Money(r.overall.capacity_usd), Money(r.overall.request_usd), Money(r.overall.retry_waste_usd),
      Money(r.overall.idle_usd));
  html += CostPerMillionChart(r);
  html += UtilisationChart(r);
  html += WasteChart(r);
  html += Tables(r);
  return html + "</body></html>\n";
}

}  // namespace pdserve::ledger
