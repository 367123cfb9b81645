// Rendering the acceptance JSON as report sections (HTML) and as a text summary.
#include "bench/serve/acceptance_report.h"

#include <fmt/format.h>

#include "bench/serve/acceptance_kv.h"
#include "common/html_escape.h"

namespace pdserve::bench {

using nlohmann::json;

namespace {

// A figure as the report prints it: numbers to 4 significant digits, null as "not measured".
std::string Figure(const json& v) {
  if (v.is_null()) return "not measured";
  if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
  if (v.is_number()) return fmt::format("{:.4g}", v.get<double>());
  if (v.is_string()) return v.get<std::string>();
  return v.dump();
}

std::string VerdictHeadline(const json& verdict) {
  const std::string result = verdict.value("result", "NONE");
  if (result == "NONE") return "NO VERDICT: no --require thresholds were given";
  int failed = 0, total = 0;
  for (const json& t : verdict.value("thresholds", json::array())) {
    ++total;
    if (!t.value("pass", false)) ++failed;
  }
  return result == "PASS" ? fmt::format("PASS: all {} thresholds met", total)
                          : fmt::format("FAIL: {} of {} thresholds not met", failed, total);
}

HtmlSection VerdictSection(const json& verdict) {
  const std::string result = verdict.value("result", "NONE");
  const char* color = result == "PASS" ? "#1a7f37" : result == "FAIL" ? "#cf222e" : "#666";
  HtmlSection s{"Verdict", {}, {}};
  s.html = fmt::format(
      "<p class=\"verdict\" style=\"font-size:28px;font-weight:bold;color:{}\">{}</p>\n", color,
      HtmlEscape(VerdictHeadline(verdict)));
  if (verdict.value("thresholds", json::array()).empty()) return s;
  s.html += "<table><tr><th>threshold</th><th>measured</th><th>result</th><th>where</th></tr>\n";
  for (const json& t : verdict["thresholds"]) {
    const bool pass = t.value("pass", false);
    s.html +=
        fmt::format("<tr><td>{}</td><td>{}</td><td style=\"color:{}\">{}</td><td>{}</td></tr>\n",
                    HtmlEscape(t.value("threshold", std::string())),
                    HtmlEscape(Figure(t["measured"])), pass ? "#1a7f37" : "#cf222e",
                    pass ? "pass" : "FAIL", HtmlEscape(t.value("note", std::string())));
  }
  s.html += fmt::format("<p>{}</p>\n", HtmlEscape(verdict.value("rule", std::string())));
  return s;
}

HtmlSection ComparisonSection(const json& cmp) {
  HtmlSection s{"Comparison with an earlier run", {}, {}};
  s.html = fmt::format(
      "<p>Before: {} ({}); after: this run ({}). {} figures differ.</p>\n<table><tr><th>figure"
      "</th><th>before</th><th>after</th><th>change</th></tr>\n",
      HtmlEscape(Figure(cmp["with"])), HtmlEscape(Figure(cmp["before_date"])),
      HtmlEscape(Figure(cmp["after_date"])), cmp.value("changed", 0));
  for (const json& r : cmp.value("rows", json::array())) {
    const std::string change = r.value("change", std::string());
    s.html += fmt::format("<tr{}><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
                          change == "same" ? "" : " style=\"background:#fff5d6\"",
                          HtmlEscape(Figure(r["figure"])), HtmlEscape(Figure(r["before"])),
                          HtmlEscape(Figure(r["after"])), HtmlEscape(change));
  }
  s.html += "</table>\n";
  return s;
}

std::vector<std::pair<std::string, std::string>> EnvironmentRows(const json& env) {
  std::vector<std::pair<std::string, std::string>> rows;
  for (auto [key, label] : {std::pair{"date", "date"},
                            {"provider", "provider"},
                            {"region", "region"},
                            {"hostname", "host"},
                            {"node_id", "node id"},
                            {"os", "OS"},
                            {"gpu_model", "GPU model"},
                            {"gpu_count", "GPU count"},
                            {"driver_version", "driver"},
                            {"cuda_version", "CUDA"},
                            {"nccl_version", "NCCL (dlopen libnccl.so.2, ncclGetVersion)"},
                            {"nccl_library", "NCCL library"},
                            {"pdserve_version", "pdserve"}}) {
    const json& v = env.value(key, json(nullptr));
    rows.emplace_back(label, v.is_null() ? "unknown" : Figure(v));
  }
  std::string ib;
  for (const json& port : env.value("infiniband", json::array())) ib += Figure(port) + "; ";
  rows.emplace_back("InfiniBand / RoCE",
                    ib.empty() ? env.value("infiniband_note", std::string("unknown")) : ib);
  std::string links;
  for (const json& link : env.value("network_links", json::array())) links += Figure(link) + "; ";
  rows.emplace_back("network links", links.empty() ? "none report a speed" : links);
  return rows;
}

std::string HostsHtml(const json& hosts) {
  std::string html =
      "<table><tr><th>role</th><th>host</th><th>address</th><th>node id</th><th>OS</th>"
      "<th>GPU</th><th>driver</th><th>NCCL</th></tr>\n";
  for (const json& h : hosts) {
    html += "<tr>";
    for (const char* key : {"role", "hostname", "address", "node_id", "os", "gpu_model",
                            "driver_version", "nccl_version"}) {
      html += fmt::format("<td>{}</td>", HtmlEscape(h.contains(key) ? Figure(h[key]) : "-"));
    }
    html += "</tr>\n";
  }
  return html + "</table>\n";
}

std::vector<std::pair<std::string, std::string>> MfuRows(const json& doc) {
  const json& mfu = doc.value("mfu", json::object());
  if (mfu.value("status", "") == "unknown") {
    return {{"MFU", "unknown: " + mfu.value("reason", std::string())}};
  }
  std::vector<std::pair<std::string, std::string>> rows = {
      {"model and peak from", Figure(mfu.value("source", json()))},
      {"prefill FLOPs per token", Figure(mfu.value("prefill_flops_per_token", json()))},
      {"decode FLOPs per token", Figure(mfu.value("decode_flops_per_token", json()))},
      {"device peak (GFLOP/s)", Figure(mfu.value("peak_gflops", json()))},
      {"peak is", Figure(mfu.value("peak_source", json()))},
      {"definition", Figure(mfu.value("definition", json()))}};
  const json serve = doc.value("serve", json(nullptr));
  if (serve.is_object()) {
    for (const json& run : serve.value("runs", json::array())) {
      const json& rate = run.value("request_rate", json("inf"));
      rows.emplace_back(fmt::format("MFU at rate {}", Figure(rate)),
                        run.value("mfu", json()).is_number()
                            ? fmt::format("{:.3f}%", run["mfu"].get<double>() * 100)
                            : "unknown");
    }
  }
  return rows;
}

std::vector<std::pair<std::string, std::string>> ScalingRows(const json& scaling) {
  if (!scaling.contains("efficiency")) {
    return {{"status", "not computed: " + scaling.value("reason", std::string())}};
  }
  const json one = scaling["one_worker"], many = scaling["n_workers"];
  return {{"1 worker", fmt::format("{} output tok/s peak ({})",
                                   Figure(one["peak_output_throughput"]), Figure(one["file"]))},
          {fmt::format("{} workers", Figure(many["workers"])),
           fmt::format("{} output tok/s peak ({})", Figure(many["peak_output_throughput"]),
                       Figure(many["file"]))},
          {"efficiency T1 / (TN x N)", fmt::format("{:.3f}", scaling.value("efficiency", 0.0))},
          {"same on requests/s",
           fmt::format("{:.3f}", scaling.value("efficiency_request_throughput", 0.0))},
          {"definition", Figure(scaling["definition"])}};
}

}  // namespace

std::vector<HtmlSection> AcceptanceSections(const json& doc) {
  std::vector<HtmlSection> sections;
  sections.push_back(VerdictSection(doc.value("verdict", json::object())));
  if (doc.value("comparison", json()).is_object()) {
    sections.push_back(ComparisonSection(doc["comparison"]));
  }
  const json env = doc.value("environment", json::object());
  sections.push_back({"Environment", EnvironmentRows(env), {}});
  sections.push_back({"Hosts", {}, HostsHtml(doc.value("hosts", json::array()))});
  sections.push_back({"GPU interconnect (nvidia-smi topo -m)",
                      {},
                      fmt::format("<pre>{}</pre>\n",
                                  HtmlEscape(env.value("gpu_topology", std::string("unknown"))))});
  sections.push_back({"KV bandwidth", {}, KvSectionHtml(doc.value("kv_bandwidth", json()))});
  sections.push_back({"Model FLOPs utilisation", MfuRows(doc), {}});
  sections.push_back({"Scaling", ScalingRows(doc.value("scaling", json::object())), {}});
  return sections;
}

std::string AcceptanceText(const json& doc) {
  const json verdict = doc.value("verdict", json::object());
  std::string out = fmt::format("ACCEPTANCE {}\n", VerdictHeadline(verdict));
  for (const json& t : verdict.value("thresholds", json::array())) {
    out += fmt::format(
        "  {:<4} {:<32} measured {:<12} {}\n", t.value("pass", false) ? "pass" : "FAIL",
        t.value("threshold", std::string()),
        t["measured"].is_null() ? "n/a" : Figure(t["measured"]), t.value("note", std::string()));
  }
  const json env = doc.value("environment", json::object());
  out += "Environment:\n";
  for (const auto& [key, value] : EnvironmentRows(env)) {
    out += fmt::format("  {}: {}\n", key, value);
  }
  out += "Hosts:\n";
  for (const json& h : doc.value("hosts", json::array())) {
    out += fmt::format("  {}: {}\n", Figure(h.value("role", json())),
                       Figure(h.value("hostname", h.value("address", json()))));
  }
  out += KvSectionText(doc.value("kv_bandwidth", json()));
  out += "Model FLOPs utilisation:\n";
  for (const auto& [key, value] : MfuRows(doc)) out += fmt::format("  {}: {}\n", key, value);
  const json cmp = doc.value("comparison", json());
  if (cmp.is_object()) {
    out += fmt::format("Compared with {} ({}): {} figures differ\n", Figure(cmp["with"]),
                       Figure(cmp["before_date"]), cmp.value("changed", 0));
    for (const json& r : cmp.value("rows", json::array())) {
      if (r.value("change", std::string()) == "same") continue;
      out += fmt::format("  {}: {} -> {} ({})\n", Figure(r["figure"]), Figure(r["before"]),
                         Figure(r["after"]), Figure(r["change"]));
    }
  }
  return out;
}

}  // namespace pdserve::bench
