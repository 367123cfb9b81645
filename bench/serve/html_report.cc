#include "bench/serve/html_report.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "common/html_escape.h"

namespace pdserve::bench {

namespace {

constexpr const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                   "#9467bd", "#8c564b", "#e377c2", "#17becf"};

struct Series {
  std::string name;
  std::vector<std::pair<double, double>> points;  // (x, y), drawn in order
  bool steps = false;                             // a histogram outline
};

// A "nice" tick step (1, 2 or 5 times a power of ten) for about five ticks over [0, hi].
double TickStep(double hi) {
  if (!(hi > 0)) return 1;
  double raw = hi / 5;
  double mag = std::pow(10, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (raw <= m * mag) return m * mag;
  }
  return 10 * mag;
}

std::string Chart(const std::string& title, const std::string& x_label, const std::string& y_label,
                  const std::vector<Series>& series) {
  constexpr double kW = 640, kH = 360, kLeft = 70, kRight = 150, kTop = 30, kBottom = 50;
  double x_max = 0, y_max = 0;
  for (const Series& s : series) {
    for (auto [x, y] : s.points) {
      if (std::isfinite(x)) x_max = std::max(x_max, x);
      if (std::isfinite(y)) y_max = std::max(y_max, y);
    }
  }
  double x_step = TickStep(x_max), y_step = TickStep(y_max);
  x_max = std::max(x_step, std::ceil(x_max / x_step) * x_step);
  y_max = std::max(y_step, std::ceil(y_max / y_step) * y_step);
  double pw = kW - kLeft - kRight, ph = kH - kTop - kBottom;
  auto px = [&](double x) { return kLeft + x / x_max * pw; };
  auto py = [&](double y) { return kTop + ph - y / y_max * ph; };
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" "
      "font-family=\"sans-serif\" font-size=\"11\">\n<text x=\"{}\" y=\"18\" font-size=\"14\" "
      "font-weight=\"bold\">{}</text>\n",
      kW, kH, kLeft, HtmlEscape(title));
  for (double t = 0; t <= x_max * (1 + 1e-9); t += x_step) {
    svg += fmt::format(
        "<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" stroke=\"#ddd\"/><text "
        "x=\"{0:.1f}\" y=\"{3}\" text-anchor=\"middle\">{4:g}</text>\n",
        px(t), kTop, kTop + ph, kTop + ph + 15, t);
  }
  for (double t = 0; t <= y_max * (1 + 1e-9); t += y_step) {
    svg += fmt::format(
        "<line x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\" stroke=\"#ddd\"/><text "
        "x=\"{3}\" y=\"{4:.1f}\" text-anchor=\"end\">{5:g}</text>\n",
        kLeft, py(t), kLeft + pw, kLeft - 5, py(t) + 4, t);
  }
  svg += fmt::format(
      "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#333\"/>\n"
      "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n"
      "<text transform=\"translate(15,{}) rotate(-90)\" text-anchor=\"middle\">{}</text>\n",
      kLeft, kTop, pw, ph, kLeft + pw / 2, kH - 12, HtmlEscape(x_label), kTop + ph / 2,
      HtmlEscape(y_label));
  for (size_t i = 0; i < series.size(); ++i) {
    const Series& s = series[i];
    const char* color = kColors[i % std::size(kColors)];
    std::string path;
    for (size_t k = 0; k < s.points.size(); ++k) {
      auto [x, y] = s.points[k];
      if (!std::isfinite(x) || !std::isfinite(y)) continue;
      path += fmt::format("{}{:.1f},{:.1f} ", path.empty() ? "M" : "L", px(x), py(y));
      if (!s.steps) {
        svg += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\" fill=\"{}\"/>\n", px(x),
                           py(y), color);
      }
    }
    if (!path.empty()) {
      svg += fmt::format("<path d=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\"/>\n",
                         path, color);
    }
    double ly = kTop + 12 + 16 * static_cast<double>(i);
    svg += fmt::format(
        "<rect x=\"{}\" y=\"{:.1f}\" width=\"12\" height=\"3\" fill=\"{}\"/><text x=\"{}\" "
        "y=\"{:.1f}\">{}</text>\n",
        kLeft + pw + 10, ly - 4, color, kLeft + pw + 26, ly, HtmlEscape(s.name));
  }
  return svg + "</svg>\n";
}

const LatencyStats& Stats(const BenchmarkMetrics& m, int which) {
  switch (which) {
    case 0:
      return m.ttft;
    case 1:
      return m.tpot;
    case 2:
      return m.itl;
    default:
      return m.e2el;
  }
}

std::string RunsTable(const ServeSession& session) {
  std::string html =
      "<table><tr><th>rate (req/s)</th><th>completed</th><th>failed</th><th>duration "
      "(s)</th><th>req/s</th><th>goodput (req/s)</th><th>output tok/s</th><th>TTFT median / "
      "p99 (ms)</th><th>TPOT median / p99 (ms)</th><th>E2EL median / p99 (ms)</th><th>USD per "
      "1M output tok</th><th>failures</th></tr>\n";
  auto last_p = [](const LatencyStats& s) {
    return s.percentiles_ms.empty() ? 0.0 : s.percentiles_ms.back().second;
  };
  for (const ServeRun& run : session.runs) {
    const BenchmarkMetrics& m = run.metrics;
    std::string failures;
    for (const auto& [reason, count] : m.failures_by_reason) {
      failures += fmt::format("{} {} ", reason, count);
    }
    html += fmt::format(
        "<tr><td>{}</td><td>{}</td><td>{}</td><td>{:.2f}</td><td>{:.2f}</td><td>{}</td><td>{:.1f}"
        "</td><td>{:.1f} / {:.1f}</td><td>{:.2f} / {:.2f}</td><td>{:.1f} / {:.1f}</td><td>{}</td>"
        "<td>{}</td></tr>\n",
        std::isinf(run.request_rate) ? "inf" : fmt::format("{:g}", run.request_rate), m.completed,
        m.failed, run.load.duration_s, m.request_throughput,
        session.slo.any() ? fmt::format("{:.2f}", m.request_goodput) : "-", m.output_throughput,
        m.ttft.median_ms, last_p(m.ttft), m.tpot.median_ms, last_p(m.tpot), m.e2el.median_ms,
        last_p(m.e2el),
        run.cost.priced ? fmt::format("{:.2f}", run.cost.usd_per_1m_output_tokens) : "-",
        HtmlEscape(failures));
  }
  return html + "</table>\n";
}

std::string TtftHistogram(const ServeSession& session) {
  std::vector<std::vector<double>> ttfts_ms;
  double hi = 0;
  for (const ServeRun& run : session.runs) {
    std::vector<double> v;
    for (const RequestRecord& r : run.load.records) {
      if (r.success) v.push_back(r.ttft_s * 1000);
    }
    std::sort(v.begin(), v.end());
    // The axis ends at the largest p99 so one outlier does not squash every run.
    if (!v.empty()) hi = std::max(hi, Percentile(v, 99));
    ttfts_ms.push_back(std::move(v));
  }
  if (!(hi > 0)) return "<p>No successful requests: no TTFT distribution.</p>\n";
  constexpr int kBins = 40;
  double width = hi / kBins;
  std::vector<Series> series;
  for (size_t i = 0; i < session.runs.size(); ++i) {
    const auto& v = ttfts_ms[i];
    if (v.empty()) continue;
    std::vector<double> counts(kBins, 0);
    for (double t : v) counts[std::min<size_t>(kBins - 1, static_cast<size_t>(t / width))] += 1;
    Series s;
    s.steps = true;
    double rate = session.runs[i].request_rate;
    s.name = std::isinf(rate) ? "rate inf" : fmt::format("rate {:g}", rate);
    for (int b = 0; b < kBins; ++b) {
      double share = counts[b] / static_cast<double>(v.size()) * 100;
      s.points.emplace_back(b * width, share);
      s.points.emplace_back((b + 1) * width, share);
    }
    series.push_back(std::move(s));
  }
  return Chart("TTFT distribution (last bin holds everything above the largest p99)", "TTFT (ms)",
               "requests (%)", series);
}

}  // namespace

std::string HtmlReport(const std::string& title, const ServeSession& session,
                       const std::vector<HtmlSection>& sections) {
  const ServeConfig& c = session.config;
  std::string html = fmt::format(
      "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{0}</title>\n<style>"
      "body{{font-family:sans-serif;margin:24px;color:#222}}table{{border-collapse:collapse;"
      "margin:8px 0 20px}}td,th{{border:1px solid #ccc;padding:3px 8px;font-size:13px;text-align:"
      "left}}th{{background:#f3f3f3}}h2{{margin-top:28px}}</style></head><body>\n<h1>{0}</h1>\n",
      HtmlEscape(title));
  std::vector<HtmlSection> all = sections;
  all.push_back(
      {"Benchmark",
       {{"date", session.date},
        {"target", c.base_url + c.endpoint},
        {"model", c.model},
        {"label", c.label},
        {"dataset", c.dataset_name + (c.dataset_path.empty() ? "" : " " + c.dataset_path)},
        {"prompts per run", std::to_string(c.num_prompts)},
        {"burstiness", fmt::format("{:g}", c.burstiness)},
        {"max concurrency",
         c.max_concurrency > 0 ? std::to_string(c.max_concurrency) : "unlimited"},
        {"token counts", session.token_count_note}},
       {}});
  for (const HtmlSection& section : all) {
    html += fmt::format("<h2>{}</h2>\n", HtmlEscape(section.title));
    if (!section.rows.empty()) {
      html += "<table>\n";
      for (const auto& [key, value] : section.rows) {
        html +=
            fmt::format("<tr><th>{}</th><td>{}</td></tr>\n", HtmlEscape(key), HtmlEscape(value));
      }
      html += "</table>\n";
    }
    html += section.html;
  }
  html += "<h2>Runs</h2>\n" + RunsTable(session);
  bool any_inf = std::any_of(session.runs.begin(), session.runs.end(),
                             [](const ServeRun& r) { return std::isinf(r.request_rate); });
  std::string x_label = any_inf ? "achieved request throughput (req/s)" : "request rate (req/s)";
  html += "<h2>Latency against rate</h2>\n";
  const char* names[] = {"TTFT", "TPOT", "ITL", "E2EL"};
  for (int which = 0; which < 4; ++which) {
    std::vector<Series> series(1 + session.percentiles.size());
    series[0].name = "median";
    for (size_t p = 0; p < session.percentiles.size(); ++p) {
      series[p + 1].name = "p" + PercentileLabel(session.percentiles[p]);
    }
    for (const ServeRun& run : session.runs) {
      double x = any_inf ? run.metrics.request_throughput : run.request_rate;
      const LatencyStats& s = Stats(run.metrics, which);
      series[0].points.emplace_back(x, s.median_ms);
      for (size_t p = 0; p < s.percentiles_ms.size(); ++p) {
        series[p + 1].points.emplace_back(x, s.percentiles_ms[p].second);
      }
    }
    for (Series& s : series) std::sort(s.points.begin(), s.points.end());
    html += Chart(fmt::format("{} percentiles", names[which]), x_label,
                  fmt::format("{} (ms)", names[which]), series);
  }
  html += "<h2>TTFT distribution</h2>\n" + TtftHistogram(session);
  html +=
      "<p>Metrics follow vLLM's <code>calculate_metrics</code>. Written by pdserve bench.</p>\n";
  return html + "</body></html>\n";
}

}  // namespace pdserve::bench
