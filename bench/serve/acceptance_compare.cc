// The differences of two acceptance runs, figure by figure.
#include "bench/serve/acceptance_compare.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>

#include <fmt/format.h>

#include "bench/serve/acceptance_thresholds.h"

namespace pdserve::bench {

using nlohmann::json;

namespace {

using Figures = std::vector<std::pair<std::string, json>>;

void Add(Figures& out, const std::string& name, const json& value) {
  if (value.is_number() || value.is_string()) out.emplace_back(name, value);
}

std::string RateName(const json& run) {
  const json& r = run.value("request_rate", json(nullptr));
  return r.is_number() ? fmt::format("{:g} req/s", r.get<double>()) : "inf";
}

}  // namespace

Figures HeadlineFigures(const json& doc) {
  Figures out;
  const json env = doc.value("environment", json::object());
  for (const char* key : {"hostname", "gpu_model", "gpu_count", "driver_version", "cuda_version",
                          "nccl_version", "os", "pdserve_version"}) {
    Add(out, fmt::format("environment: {}", key), env.value(key, json(nullptr)));
  }
  const json kv = doc.value("kv_bandwidth", json::object());
  Add(out, "KV: transport", kv.value("transport", json(nullptr)));
  Add(out, "KV: peer", kv.value("peer", json(nullptr)));
  for (const json& row : kv.value("results", json::array())) {
    std::string size = ByteSizeName(row.value("bytes", uint64_t{0}));
    Add(out, fmt::format("KV GB/s at {}", size), row.value("gbps", json(nullptr)));
    Add(out, fmt::format("KV ratio to baseline at {}", size), row.value("ratio", json(nullptr)));
  }
  const json serve = doc.value("serve", json(nullptr));
  const json runs = serve.is_object() ? serve.value("runs", json::array()) : json::array();
  double peak_rps = 0, peak_out = 0, peak_good = -1, peak_mfu = -1;
  for (const json& run : runs) {
    peak_rps = std::max(peak_rps, run.value("request_throughput", 0.0));
    peak_out = std::max(peak_out, run.value("output_throughput", 0.0));
    if (run.value("request_goodput", json()).is_number()) {
      peak_good = std::max(peak_good, run["request_goodput"].get<double>());
    }
    if (run.value("mfu", json()).is_number()) {
      peak_mfu = std::max(peak_mfu, run["mfu"].get<double>());
    }
  }
  if (!runs.empty()) {
    Add(out, "serving: peak request throughput (req/s)", peak_rps);
    Add(out, "serving: peak output tokens/s", peak_out);
  }
  if (peak_good >= 0) Add(out, "serving: peak goodput (req/s)", peak_good);
  if (peak_mfu >= 0) Add(out, "serving: peak MFU", peak_mfu);
  for (const json& run : runs) {
    const std::string rate = RateName(run);
    for (const char* which : {"ttft", "tpot", "e2el"}) {
      for (const auto& [key, value] : run.items()) {
        // Every percentile the run measured, e.g. p99_ttft_ms, and the median.
        const std::string suffix = fmt::format("_{}_ms", which);
        if (key.size() <= suffix.size() ||
            key.compare(key.size() - suffix.size(), suffix.size(), suffix) != 0 ||
            (key[0] != 'p' && key.rfind("median", 0) != 0)) {
          continue;
        }
        Add(out, fmt::format("run at {}: {}", rate, key), value);
      }
    }
    const json cost = run.value("cost", json(nullptr));
    if (cost.is_object()) {
      Add(out, fmt::format("run at {}: usd_per_1m_output_tokens", rate),
          cost.value("usd_per_1m_output_tokens", json(nullptr)));
    }
  }
  Add(out, "scaling efficiency",
      doc.value("scaling", json::object()).value("efficiency", json(nullptr)));
  const json verdict = doc.value("verdict", json::object());
  Add(out, "verdict", verdict.value("result", json(nullptr)));
  for (const json& t : verdict.value("thresholds", json::array())) {
    Add(out, fmt::format("measured for {}", t.value("threshold", std::string("?"))),
        t.value("measured", json(nullptr)));
  }
  return out;
}

json CompareAcceptance(const json& before, const json& after, const std::string& before_path) {
  const Figures a = HeadlineFigures(before), b = HeadlineFigures(after);
  std::map<std::string, json> old_values(a.begin(), a.end());
  std::vector<std::string> order;
  for (const auto& [name, _] : b) order.push_back(name);
  for (const auto& [name, _] : a) {
    if (std::find(order.begin(), order.end(), name) == order.end()) order.push_back(name);
  }
  std::map<std::string, json> new_values(b.begin(), b.end());
  json rows = json::array();
  int changed = 0;
  for (const std::string& name : order) {
    json x = old_values.count(name) ? old_values[name] : json(nullptr);
    json y = new_values.count(name) ? new_values[name] : json(nullptr);
    std::string change;
    if (x.is_null() || y.is_null()) {
      change = x.is_null() ? "new" : "gone";
    } else if (x.is_number() && y.is_number()) {
      double u = x.get<double>(), v = y.get<double>();
      if (u == v) {
        change = "same";
      } else if (u != 0) {
        change = fmt::format("{:+.1f}%", (v - u) / std::fabs(u) * 100);
      } else {
        change = fmt::format("{:+g}", v - u);
      }
    } else {
      change = x == y ? "same" : "changed";
    }
    if (change != "same") ++changed;
    rows.push_back({{"figure", name}, {"before", x}, {"after", y}, {"change", change}});
  }
  return {{"with", before_path},
          {"before_date", before.value("date", json(nullptr))},
          {"after_date", after.value("date", json(nullptr))},
          {"changed", changed},
          {"rows", rows}};
}

Result<json> ReadAcceptanceJson(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound(fmt::format("cannot open acceptance JSON '{}'", path));
  json doc = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object() || doc.value("kind", "") != "pdserve_acceptance") {
    return InvalidArgument(
        fmt::format("'{}' is not an acceptance JSON (kind pdserve_acceptance)", path));
  }
  return doc;
}

}  // namespace pdserve::bench
