// The acceptance verdict and comparison on hand-made acceptance JSONs: parsing `--require`
// (unknown metrics and malformed expressions refused, by name), which run of a sweep judges the
// per-run thresholds, unmeasured metrics failing with a reason, KV sizes, and the rows that
// `--compare-with` shows.
#include <gtest/gtest.h>

#include <string>

#include "bench/serve/acceptance_compare.h"
#include "bench/serve/acceptance_kv.h"
#include "bench/serve/acceptance_thresholds.h"

namespace pdserve::bench {
namespace {

using nlohmann::json;

// Two runs: a light one that is fast but slow in throughput, a heavy one with a long tail.
json Doc() {
  return {{"kind", "pdserve_acceptance"},
          {"date", "2026-12-02T06:00:00Z"},
          {"environment", {{"gpu_model", "none"}, {"nccl_version", "not loaded (x)"}}},
          {"kv_bandwidth",
           {{"status", "ok"},
            {"transport", "tcp"},
            {"peer", "10.0.0.2:7000"},
            {"hosts", {"a", "b"}},
            {"results",
             {{{"bytes", 1 << 20},
               {"gbps", 2.5},
               {"baseline_gbps", 3.0},
               {"ratio", 0.8},
               {"ratio_p25", 0.7},
               {"ratio_p75", 0.9},
               {"iterations", {{"kv_us", {400.0, 500.0, 1000.0}}}}},
              {{"bytes", 64 << 20}, {"gbps", 21.0}, {"ratio", 1.1}}}}}},
          {"serve",
           {{"runs",
             {{{"request_rate", 5.0},
               {"request_throughput", 5.0},
               {"request_goodput", 5.0},
               {"p99_ttft_ms", 100.0},
               {"cost", {{"usd_per_1m_output_tokens", 2.0}}}},
              {{"request_rate", "inf"},
               {"request_throughput", 9.0},
               {"request_goodput", 6.0},
               {"p99_ttft_ms", 900.0},
               {"cost", {{"usd_per_1m_output_tokens", 0.5}}}}}}}},
          {"scaling", {{"status", "not_computed"}}}};
}

TEST(AcceptanceThresholds, ParsesAndRefusesByName) {
  auto t = ParseThresholds({"kv_gbps_at_64MiB>=20 ttft_p99_ms<=800", "goodput_rps>5"});
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->size(), 3u);
  EXPECT_EQ((*t)[0].metric, "kv_gbps_at_64MiB");
  EXPECT_EQ((*t)[0].op, ">=");
  EXPECT_EQ((*t)[1].value, 800);
  EXPECT_EQ((*t)[2].op, ">");
  auto unknown = ParseThresholds({"tokens_per_dollar>=3"});
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("unknown metric 'tokens_per_dollar'"),
            std::string::npos);
  for (const char* bad : {"ttft_p99_ms", "ttft_p99_ms=>5", "ttft_p99_ms<=fast", ">=3",
                          "ttft_p99_ms<=", "ttft_p99_ms==3", "ttft_p99_ms<=1e999"}) {
    auto r = ParseThresholds({bad});
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find(bad), std::string::npos) << r.status().message();
  }
  EXPECT_EQ(*ParseByteSize("64MiB"), 64u << 20);
  EXPECT_EQ(*ParseByteSize("65536"), 65536u);
  EXPECT_FALSE(ParseByteSize("64MB").ok());
  EXPECT_EQ(ByteSizeName(64u << 20), "64MiB");
  EXPECT_EQ(ByteSizeName(3000), "3000B");
}

// Per-run thresholds hold together at one operating point: TTFT <= 800 holds only at 5 req/s,
// goodput >= 5.5 only at inf, so the pair fails, though each alone passes on some run.
TEST(AcceptanceThresholds, OneRunMustMeetEveryPerRunThreshold) {
  const json doc = Doc();
  json v = Verdict(doc, *ParseThresholds({"ttft_p99_ms<=800 goodput_rps>=4.5"}));
  EXPECT_EQ(v["result"], "PASS") << v.dump(1);
  EXPECT_EQ(v["run"]["index"], 0);
  EXPECT_EQ(v["thresholds"][0]["measured"], 100.0);

  v = Verdict(doc, *ParseThresholds({"ttft_p99_ms<=800 goodput_rps>=5.5"}));
  EXPECT_EQ(v["result"], "FAIL") << v.dump(1);
  EXPECT_EQ(Verdict(doc, *ParseThresholds({"goodput_rps>=5.5"}))["result"], "PASS");
  EXPECT_EQ(Verdict(doc, *ParseThresholds({"usd_per_1m_output_tokens<=0.9"}))["run"]["index"], 1);

  v = Verdict(doc, *ParseThresholds({"kv_gbps_at_64MiB>=20 kv_ratio_at_1MiB>=0.9"}));
  EXPECT_EQ(v["result"], "FAIL");
  EXPECT_EQ(v["thresholds"][0]["pass"], true);
  EXPECT_EQ(v["thresholds"][0]["measured"], 21.0);
  EXPECT_EQ(v["thresholds"][1]["measured"], 0.8);

  // Not measured: fails and says why.
  v = Verdict(doc, *ParseThresholds({"kv_gbps_at_2MiB>=1 tpot_p99_ms<=60 mfu>=0.1"}));
  EXPECT_EQ(v["result"], "FAIL");
  for (const json& t : v["thresholds"]) {
    EXPECT_EQ(t["pass"], false);
    EXPECT_TRUE(t["measured"].is_null());
  }
  EXPECT_NE(v["thresholds"][0]["note"].get<std::string>().find("1MiB 64MiB"), std::string::npos);
  EXPECT_NE(v["thresholds"][1]["note"].get<std::string>().find("--metric-percentiles"),
            std::string::npos);
  EXPECT_EQ(Verdict(doc, {})["result"], "NONE");
}

TEST(AcceptanceThresholds, KvSectionShowsTheRowsItIsGiven) {
  const json kv = Doc()["kv_bandwidth"];
  GbpsQuartiles q = KvRowQuartiles(kv["results"][0]);
  // 1 MiB in 1000, 500 and 400 us: 1.049, 2.097, 2.621 GB/s.
  EXPECT_NEAR(q.median, 1048576 / 500.0 / 1e3, 1e-9);
  EXPECT_NEAR(q.p25, (1048576 / 1000.0 + 1048576 / 500.0) / 2 / 1e3, 1e-9);
  std::string html = KvSectionHtml(kv);
  EXPECT_NE(html.find("<td>1MiB</td><td>1048576</td><td>2.500</td>"), std::string::npos) << html;
  EXPECT_NE(html.find("<td>64MiB</td><td>67108864</td><td>21.000</td>"), std::string::npos);
  EXPECT_NE(html.find("10.0.0.2:7000"), std::string::npos);
  EXPECT_NE(html.find("<svg"), std::string::npos);
  std::string not_run = KvSectionHtml({{"status", "not_run"}, {"reason", "a <b> reason"}});
  EXPECT_NE(not_run.find("a &lt;b&gt; reason"), std::string::npos) << not_run;
  EXPECT_EQ(not_run.find("<td>"), std::string::npos);
}

TEST(AcceptanceCompare, RowsShowBeforeAfterAndChange) {
  json before = Doc();
  json after = Doc();
  after["kv_bandwidth"]["results"][1]["gbps"] = 10.5;
  after["environment"]["nccl_version"] = "2.21.5";
  after["kv_bandwidth"]["results"].erase(0);
  json cmp = CompareAcceptance(before, after, "old.json");
  EXPECT_EQ(cmp["with"], "old.json");
  std::map<std::string, json> rows;
  for (const json& r : cmp["rows"]) rows[r["figure"]] = r;
  EXPECT_EQ(rows["KV GB/s at 64MiB"]["before"], 21.0);
  EXPECT_EQ(rows["KV GB/s at 64MiB"]["after"], 10.5);
  EXPECT_EQ(rows["KV GB/s at 64MiB"]["change"], "-50.0%");
  EXPECT_EQ(rows["KV GB/s at 1MiB"]["change"], "gone");
  EXPECT_EQ(rows["environment: nccl_version"]["change"], "changed");
  EXPECT_EQ(rows["run at inf: p99_ttft_ms"]["change"], "same");
  EXPECT_EQ(cmp["changed"], 4);  // 64MiB GB/s, NCCL, and the 1MiB GB/s and ratio rows
  EXPECT_FALSE(ReadAcceptanceJson("/nonexistent/acceptance.json").ok());
}

}  // namespace
}  // namespace pdserve::bench
