// Parsing `--require` expressions and judging an acceptance JSON against them.
#include "bench/serve/acceptance_thresholds.h"

#include <cmath>
#include <cstdlib>
#include <regex>
#include <sstream>

#include <fmt/format.h>

namespace pdserve::bench {

using nlohmann::json;

namespace {

// Run metrics read straight from a run's field.
struct FieldMetric {
  const char* metric;
  const char* field;
};
constexpr FieldMetric kRunFields[] = {
    {"goodput_rps", "request_goodput"},
    {"request_rps", "request_throughput"},
    {"output_tokens_per_s", "output_throughput"},
    {"total_tokens_per_s", "total_token_throughput"},
    {"failed_requests", "failed"},
    {"mfu", "mfu"},
};
constexpr const char* kCostMetrics[] = {"usd_per_1m_output_tokens", "usd_per_request"};

const std::regex& LatencyPattern() {
  static const std::regex re(R"(^(ttft|tpot|itl|e2el)_(mean|median|p([0-9]+(\.[0-9]+)?))_ms$)");
  return re;
}
const std::regex& KvPattern() {
  static const std::regex re(R"(^kv_(gbps|ratio)_at_([0-9]+(B|KiB|MiB|GiB)?)$)");
  return re;
}

const char kKnownMetrics[] =
    "ttft|tpot|itl|e2el _ mean|median|pNN _ms, goodput_rps, request_rps, output_tokens_per_s, "
    "total_tokens_per_s, usd_per_1m_output_tokens, usd_per_request, failed_requests, mfu, "
    "kv_gbps_at_SIZE, kv_ratio_at_SIZE (SIZE: 64MiB, 512KiB, 1GiB or bytes), scaling_efficiency";

bool KnownMetric(const std::string& m) {
  if (std::regex_match(m, LatencyPattern()) || std::regex_match(m, KvPattern())) return true;
  if (m == "scaling_efficiency") return true;
  for (const FieldMetric& f : kRunFields) {
    if (m == f.metric) return true;
  }
  for (const char* c : kCostMetrics) {
    if (m == c) return true;
  }
  return false;
}

bool Holds(double measured, const std::string& op, double value) {
  if (op == ">=") return measured >= value;
  if (op == "<=") return measured <= value;
  if (op == ">") return measured > value;
  return measured < value;
}

std::string RateText(const json& run) {
  const json& r = run.value("request_rate", json(nullptr));
  return r.is_number() ? fmt::format("{:g} req/s", r.get<double>()) : "all at once (inf)";
}

}  // namespace

Result<uint64_t> ParseByteSize(std::string_view text) {
  std::string s(text);
  uint64_t scale = 1;
  for (auto [suffix, factor] : {std::pair{"KiB", 1ull << 10}, std::pair{"MiB", 1ull << 20},
                                std::pair{"GiB", 1ull << 30}, std::pair{"B", 1ull}}) {
    std::string_view sv(suffix);
    if (s.size() > sv.size() && s.compare(s.size() - sv.size(), sv.size(), sv) == 0) {
      s.resize(s.size() - sv.size());
      scale = factor;
      break;
    }
  }
  if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos || s.size() > 12) {
    return InvalidArgument(fmt::format("'{}' is not a size (64MiB, 512KiB, 1GiB or bytes)", text));
  }
  return std::strtoull(s.c_str(), nullptr, 10) * scale;
}

std::string ByteSizeName(uint64_t bytes) {
  for (auto [suffix, factor] :
       {std::pair{"GiB", 1ull << 30}, std::pair{"MiB", 1ull << 20}, std::pair{"KiB", 1ull << 10}}) {
    if (bytes >= factor && bytes % factor == 0) return fmt::format("{}{}", bytes / factor, suffix);
  }
  return fmt::format("{}B", bytes);
}

Result<std::vector<Threshold>> ParseThresholds(const std::vector<std::string>& expressions) {
  std::vector<Threshold> out;
  for (const std::string& text : expressions) {
    std::istringstream words(text);
    std::string expr;
    while (words >> expr) {
      size_t at = expr.find_first_of("<>=");
      if (at == std::string::npos || at == 0) {
        return InvalidArgument(
            fmt::format("--require '{}': expected METRIC OP VALUE with OP one of >= <= > <", expr));
      }
      Threshold t;
      t.text = expr;
      t.metric = expr.substr(0, at);
      size_t op_len = at + 1 < expr.size() && expr[at + 1] == '=' ? 2 : 1;
      t.op = expr.substr(at, op_len);
      if (t.op != ">=" && t.op != "<=" && t.op != ">" && t.op != "<") {
        return InvalidArgument(
            fmt::format("--require '{}': unknown operator '{}' (use >= <= > <)", expr, t.op));
      }
      std::string value = expr.substr(at + op_len);
      char* end = nullptr;
      t.value = std::strtod(value.c_str(), &end);
      if (value.empty() || end != value.c_str() + value.size() || !std::isfinite(t.value)) {
        return InvalidArgument(
            fmt::format("--require '{}': '{}' is not a finite number", expr, value));
      }
      if (!KnownMetric(t.metric)) {
        return InvalidArgument(fmt::format("--require '{}': unknown metric '{}' (known: {})", expr,
                                           t.metric, kKnownMetrics));
      }
      out.push_back(std::move(t));
    }
  }
  return out;
}

bool IsRunMetric(const std::string& metric) {
  return metric.rfind("kv_", 0) != 0 && metric != "scaling_efficiency";
}

Result<double> RunMetric(const json& run, const std::string& metric) {
  std::smatch m;
  std::string field;
  if (std::regex_match(metric, m, LatencyPattern())) {
    field = fmt::format("{}_{}_ms", m[2].str(), m[1].str());  // p99_ttft_ms
    if (!run.contains(field)) {
      return NotFound(
          fmt::format("{} was not measured (add {} to --metric-percentiles)", metric, m[3].str()));
    }
  }
  for (const FieldMetric& f : kRunFields) {
    if (metric == f.metric) field = f.field;
  }
  for (const char* c : kCostMetrics) {
    if (metric != c) continue;
    const json& cost = run.value("cost", json(nullptr));
    if (!cost.is_object() || !cost.value(c, json(nullptr)).is_number()) {
      return NotFound(fmt::format("{} was not measured (give --gpu-hour-price)", metric));
    }
    return cost[c].get<double>();
  }
  if (field.empty()) return InvalidArgument(fmt::format("{} is not a per-run metric", metric));
  const json& v = run.value(field, json(nullptr));
  if (!v.is_number()) {
    if (metric == "goodput_rps") return NotFound("goodput_rps was not measured (give --goodput)");
    if (metric == "mfu") return NotFound("mfu is unknown (give --mfu-from)");
    return NotFound(fmt::format("{} was not measured", metric));
  }
  return v.get<double>();
}

Result<double> AcceptanceMetric(const json& acceptance, const std::string& metric) {
  if (metric == "scaling_efficiency") {
    const json& e = acceptance.value("scaling", json::object()).value("efficiency", json());
    if (!e.is_number()) return NotFound("scaling_efficiency was not computed (--scaling-from)");
    return e.get<double>();
  }
  std::smatch m;
  if (!std::regex_match(metric, m, KvPattern())) {
    return InvalidArgument(fmt::format("{} is not a per-acceptance metric", metric));
  }
  PDSERVE_ASSIGN_OR_RETURN(uint64_t bytes, ParseByteSize(m[2].str()));
  const json& kv = acceptance.value("kv_bandwidth", json::object());
  if (kv.value("status", "") != "ok") {
    return NotFound(fmt::format("{}: the KV bandwidth test did not run", metric));
  }
  std::string sizes;
  for (const json& row : kv.value("results", json::array())) {
    if (row.value("bytes", uint64_t{0}) == bytes) {
      return row.value(m[1].str() == "gbps" ? "gbps" : "ratio", 0.0);
    }
    sizes += (sizes.empty() ? "" : " ") + ByteSizeName(row.value("bytes", uint64_t{0}));
  }
  return NotFound(fmt::format("{}: the KV test measured no {} message (it measured {})", metric,
                              ByteSizeName(bytes), sizes.empty() ? "none" : sizes));
}

json Verdict(const json& acceptance, const std::vector<Threshold>& thresholds) {
  json out = {{"rule",
               "per-run thresholds hold when one serving run meets all of them together; the "
               "KV and scaling thresholds hold on their own figures"},
              {"run", nullptr},
              {"thresholds", json::array()}};
  if (thresholds.empty()) {
    out["result"] = "NONE";
    return out;
  }
  // The run that meets the most per-run thresholds; ties go to the higher request throughput.
  const json& serve = acceptance.value("serve", json(nullptr));
  const json runs = serve.is_object() ? serve.value("runs", json::array()) : json::array();
  int best = -1, best_met = -1;
  double best_rps = -1;
  for (size_t i = 0; i < runs.size(); ++i) {
    int met = 0;
    for (const Threshold& t : thresholds) {
      if (!IsRunMetric(t.metric)) continue;
      auto v = RunMetric(runs[i], t.metric);
      if (v.ok() && Holds(*v, t.op, t.value)) ++met;
    }
    double rps = runs[i].value("request_throughput", 0.0);
    if (met > best_met || (met == best_met && rps > best_rps)) {
      best = static_cast<int>(i);
      best_met = met;
      best_rps = rps;
    }
  }
  if (best >= 0) {
    out["run"] = {{"index", best}, {"request_rate", runs[best].value("request_rate", json())}};
  }
  bool all = true;
  for (const Threshold& t : thresholds) {
    Result<double> v = NotFound("no serving run was measured");
    if (!IsRunMetric(t.metric)) {
      v = AcceptanceMetric(acceptance, t.metric);
    } else if (best >= 0) {
      v = RunMetric(runs[best], t.metric);
    }
    bool pass = v.ok() && Holds(*v, t.op, t.value);
    all = all && pass;
    std::string note;
    if (!v.ok()) {
      note = std::string(v.status().message());
    } else if (IsRunMetric(t.metric)) {
      note = fmt::format("run {} of {} ({})", best + 1, runs.size(), RateText(runs[best]));
    } else if (t.metric.rfind("kv_", 0) == 0) {
      const json& kv = acceptance["kv_bandwidth"];
      note = fmt::format("KV test: {}, peer {}", kv.value("transport", std::string("?")),
                         kv.value("peer", std::string("?")));
    } else {
      note = "scaling from the --scaling-from results";
    }
    out["thresholds"].push_back({{"threshold", t.text},
                                 {"metric", t.metric},
                                 {"op", t.op},
                                 {"value", t.value},
                                 {"measured", v.ok() ? json(*v) : json(nullptr)},
                                 {"pass", pass},
                                 {"note", note}});
  }
  out["result"] = all ? "PASS" : "FAIL";
  return out;
}

}  // namespace pdserve::bench
