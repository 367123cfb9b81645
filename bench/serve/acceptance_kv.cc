// The KV bandwidth section of the acceptance report: table, plot and text from measured rows.
#include "bench/serve/acceptance_kv.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "bench/serve/acceptance_thresholds.h"
#include "bench/serve/metrics.h"
#include "common/html_escape.h"

namespace pdserve::bench {

using nlohmann::json;

namespace {

std::string Str(const json& j, const char* key) {
  const json& v = j.value(key, json(nullptr));
  if (v.is_string()) return v.get<std::string>();
  if (v.is_null()) return "unknown";
  return v.dump();
}

std::string HostsText(const json& kv) {
  std::string out;
  for (const json& h : kv.value("hosts", json::array())) {
    out += (out.empty() ? "" : " -> ") + (h.is_string() ? h.get<std::string>() : h.dump());
  }
  return out.empty() ? "unknown" : out;
}

// Bandwidth against message size, the x axis in powers of two (one tick per size measured).
std::string BandwidthPlot(const json& rows) {
  constexpr double kW = 640, kH = 340, kLeft = 60, kRight = 150, kTop = 30, kBottom = 55;
  const double pw = kW - kLeft - kRight, ph = kH - kTop - kBottom;
  double lo = INFINITY, hi = 0, y_max = 0;
  for (const json& r : rows) {
    double b = r.value("bytes", 0.0);
    if (!(b > 0)) continue;
    lo = std::min(lo, std::log2(b));
    hi = std::max(hi, std::log2(b));
    y_max = std::max({y_max, KvRowQuartiles(r).p75, r.value("baseline_gbps", 0.0)});
  }
  if (!(hi >= lo) || !(y_max > 0)) return "<p>No KV rows to plot.</p>\n";
  if (hi == lo) hi = lo + 1;
  double step = std::pow(10, std::floor(std::log10(y_max / 4)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (y_max / (m * step) <= 5) {
      step *= m;
      break;
    }
  }
  y_max = std::ceil(y_max / step) * step;
  auto px = [&](double bytes) { return kLeft + (std::log2(bytes) - lo) / (hi - lo) * pw; };
  auto py = [&](double gbps) { return kTop + ph - gbps / y_max * ph; };
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" "
      "font-family=\"sans-serif\" font-size=\"11\">\n<text x=\"{}\" y=\"18\" font-size=\"14\" "
      "font-weight=\"bold\">KV bandwidth against message size</text>\n",
      kW, kH, kLeft);
  for (double t = 0; t <= y_max * (1 + 1e-9); t += step) {
    svg += fmt::format(
        "<line x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\" stroke=\"#ddd\"/><text "
        "x=\"{3}\" y=\"{4:.1f}\" text-anchor=\"end\">{5:g}</text>\n",
        kLeft, py(t), kLeft + pw, kLeft - 5, py(t) + 4, t);
  }
  for (const json& r : rows) {
    double b = r.value("bytes", 0.0);
    if (!(b > 0)) continue;
    svg += fmt::format(
        "<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" stroke=\"#eee\"/><text "
        "x=\"{0:.1f}\" y=\"{3}\" text-anchor=\"end\" transform=\"rotate(-40 {0:.1f} {3})\">{4}"
        "</text>\n",
        px(b), kTop, kTop + ph, kTop + ph + 14, ByteSizeName(static_cast<uint64_t>(b)));
  }
  svg += fmt::format(
      "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#333\"/>\n"
      "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">message size (log scale)</text>\n"
      "<text transform=\"translate(15,{}) rotate(-90)\" text-anchor=\"middle\">GB/s</text>\n",
      kLeft, kTop, pw, ph, kLeft + pw / 2, kH - 4, kTop + ph / 2);
  struct Line {
    const char* name;
    const char* color;
    bool kv;
  };
  int i = 0;
  for (Line line : {Line{"KV transport (median)", "#1f77b4", true},
                    Line{"baseline (median)", "#7f7f7f", false}}) {
    std::string path;
    for (const json& r : rows) {
      double b = r.value("bytes", 0.0);
      if (!(b > 0)) continue;
      double y = line.kv ? r.value("gbps", 0.0) : r.value("baseline_gbps", 0.0);
      path += fmt::format("{}{:.1f},{:.1f} ", path.empty() ? "M" : "L", px(b), py(y));
      svg += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\" fill=\"{}\"/>\n", px(b),
                         py(y), line.color);
      if (line.kv) {  // the interquartile range of the iterations
        GbpsQuartiles q = KvRowQuartiles(r);
        svg += fmt::format(
            "<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" stroke=\"{3}\"/>\n",
            px(b), py(q.p25), py(q.p75), line.color);
      }
    }
    svg += fmt::format("<path d=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\"/>\n", path,
                       line.color);
    double ly = kTop + 12 + 16 * i++;
    svg += fmt::format(
        "<rect x=\"{}\" y=\"{:.1f}\" width=\"12\" height=\"3\" fill=\"{}\"/><text x=\"{}\" "
        "y=\"{:.1f}\">{}</text>\n",
        kLeft + pw + 10, ly - 4, line.color, kLeft + pw + 26, ly, line.name);
  }
  return svg + "</svg>\n";
}

}  // namespace

GbpsQuartiles KvRowQuartiles(const json& row) {
  GbpsQuartiles q;
  q.p25 = q.median = q.p75 = row.value("gbps", 0.0);
  const json& it = row.value("iterations", json::object()).value("kv_us", json::array());
  std::vector<double> gbps;
  double bytes = row.value("bytes", 0.0);
  for (const json& us : it) {
    if (us.is_number() && us.get<double>() > 0) gbps.push_back(bytes / us.get<double>() / 1e3);
  }
  if (gbps.empty()) return q;
  q.p25 = Percentile(gbps, 25);
  q.median = Percentile(gbps, 50);
  q.p75 = Percentile(gbps, 75);
  return q;
}

std::string KvSectionHtml(const json& kv) {
  if (kv.value("status", "") != "ok") {
    return fmt::format("<p>Not run: {}.</p>\n", HtmlEscape(Str(kv, "reason")));
  }
  std::string html = "<table>\n";
  for (auto [key, value] : {std::pair<std::string, std::string>{"transport", Str(kv, "transport")},
                            {"peer", Str(kv, "peer")},
                            {"hosts (sender -> receiver)", HostsText(kv)},
                            {"date", Str(kv, "date")},
                            {"iterations per size", Str(kv, "iters")},
                            {"baseline", Str(kv, "baseline")},
                            {"ratio", Str(kv, "ratio_method")},
                            {"order", Str(kv, "order")},
                            {"NCCL used by the test", Str(kv, "nccl_version")}}) {
    html += fmt::format("<tr><th>{}</th><td>{}</td></tr>\n", HtmlEscape(key), HtmlEscape(value));
  }
  html +=
      "</table>\n<table class=\"kv\"><tr><th>message</th><th>bytes</th><th>KV GB/s "
      "(median)</th><th>KV GB/s p25 / p75</th><th>baseline GB/s</th><th>ratio to "
      "baseline</th><th>ratio p25 / p75</th><th>time (us)</th></tr>\n";
  const json rows = kv.value("results", json::array());
  for (const json& r : rows) {
    GbpsQuartiles q = KvRowQuartiles(r);
    uint64_t bytes = r.value("bytes", uint64_t{0});
    html += fmt::format(
        "<tr><td>{}</td><td>{}</td><td>{:.3f}</td><td>{:.3f} / {:.3f}</td><td>{:.3f}</td>"
        "<td>{:.3f}</td><td>{:.3f} / {:.3f}</td><td>{:.1f}</td></tr>\n",
        ByteSizeName(bytes), bytes, r.value("gbps", 0.0), q.p25, q.p75,
        r.value("baseline_gbps", 0.0), r.value("ratio", 0.0), r.value("ratio_p25", 0.0),
        r.value("ratio_p75", 0.0), r.value("time_us", 0.0));
  }
  return html + "</table>\n" + BandwidthPlot(rows);
}

std::string KvSectionText(const json& kv) {
  if (kv.value("status", "") != "ok") return "KV bandwidth: not run (" + Str(kv, "reason") + ")\n";
  std::string out = fmt::format("KV bandwidth: transport {}, peer {}, hosts {}\n",
                                Str(kv, "transport"), Str(kv, "peer"), HostsText(kv));
  out += fmt::format("  {:>8} {:>10} {:>19} {:>13} {:>7} {:>15}\n", "message", "KV GB/s",
                     "KV GB/s p25 / p75", "baseline GB/s", "ratio", "ratio p25 / p75");
  for (const json& r : kv.value("results", json::array())) {
    GbpsQuartiles q = KvRowQuartiles(r);
    out += fmt::format(
        "  {:>8} {:>10.3f} {:>9.3f} / {:>7.3f} {:>13.3f} {:>7.3f} {:>7.3f} / {:<7.3f}\n",
        ByteSizeName(r.value("bytes", uint64_t{0})), r.value("gbps", 0.0), q.p25, q.p75,
        r.value("baseline_gbps", 0.0), r.value("ratio", 0.0), r.value("ratio_p25", 0.0),
        r.value("ratio_p75", 0.0));
  }
  return out;
}

}  // namespace pdserve::bench
