// The cost report on a real ledger file whose rows and periods are chosen so every figure can
// be worked out by hand (below). Prices make the arithmetic easy: the reserved worker R costs
// $0.001 per second, the burst worker B $0.002 per second.
//
//   R reserved, up [0, 1000] s, busy 600 s: capacity $1.0, idle 400 s = $0.4
//   B burst,    up [0, 500] s,  busy 200 s: capacity $1.0, idle 300 s = $0.6
//   row  tenant status     prefill        decode         in    out   cost
//   1    acme   ok         R 100 s $0.1   R 200 s $0.2   1000  500   $0.3
//   2    acme   retried    B  50 s $0.1   -              1000    0   $0.1
//   3    acme   ok (#2)    B  50 s $0.1   R 100 s $0.1   1000  400   $0.2
//   4    beta   cancelled  R 200 s $0.2   B 100 s $0.2   2000 1000   $0.4   env=prod
// The rows' step seconds sum to each worker's busy time, so conservation holds exactly:
// request 0.9 + retry 0.1 + idle 1.0 = capacity 2.0.
//
// The same ledger then goes through `pdserve report` and `pdserve ledger` as a user runs them
// (PDSERVE_BINARY): the JSON they print, and clear errors that leave no --out file behind.
#include "ledger/cost_report.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "ledger/cost_report_html.h"
#include "tests/command_run.h"
#include "tests/model/random_model.h"

namespace pdserve::ledger {
namespace {

using model::testing::TempDir;
using Json = nlohmann::json;

const WorkerRef kR{1, "r1", "both", CapacityClass::kReserved, "", 3.6, 1};
const WorkerRef kB{2, "b1", "both", CapacityClass::kBurst, "", 7.2, 1};
const WorkerRef kNone{};

AttemptRow Row(std::string id, int attempt, std::string tenant, std::string_view status,
               const WorkerRef& p, double p_s, const WorkerRef& d, double d_s, int64_t in,
               int64_t out, double arrival, double first, double end) {
  AttemptRow r;
  r.request_id = std::move(id);
  r.attempt = attempt;
  r.tenant = std::move(tenant);
  r.status = *ParseAttemptStatus(status);
  r.model = "tiny";
  r.endpoint = "chat";
  r.prefill_worker = p;
  r.decode_worker = d;
  r.prefill_step_seconds = p_s;
  r.decode_step_seconds = d_s;
  r.prompt_tokens = in;
  r.completion_tokens = out;
  r.arrival_unix = arrival;
  r.first_token_unix = first;
  r.end_unix = end;
  r.cost = PriceAttempt(r, {});
  return r;
}

std::vector<ApiPrice> Apis() {
  return {{"cheap", "openai", 2e-6, 8e-6}, {"pricey", "anthropic", 2e-4, 1e-3}};
}

class CostReportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto ledger = Ledger::Open({dir_ / "ledger.db", false});
    ASSERT_TRUE(ledger.ok()) << ledger.status().ToString();
    AttemptRow beta =
        Row("chatcmpl-4", 1, "beta", "cancelled", kR, 200, kB, 100, 2000, 1000, 600, 800, 900);
    beta.tags = {{"env", "prod"}};
    for (const AttemptRow& r :
         {Row("chatcmpl-1", 1, "acme", "ok", kR, 100, kR, 200, 1000, 500, 10, 110, 310),
          Row("chatcmpl-2", 1, "acme", "retried", kB, 50, kNone, 0, 1000, 0, 320, 0, 370),
          Row("chatcmpl-2", 2, "acme", "ok", kB, 50, kR, 100, 1000, 400, 380, 430, 530), beta}) {
      ASSERT_TRUE((*ledger)->Append(r).ok());
    }
    ASSERT_TRUE((*ledger)->UpsertPeriod({"g-1", kR, 0, 1000, 600}).ok());
    ASSERT_TRUE((*ledger)->UpsertPeriod({"g-2", kB, 0, 500, 200}).ok());
  }

  Json Report(const ReportOptions& options) {
    auto ledger = Ledger::OpenReadOnly(dir_ / "ledger.db");
    EXPECT_TRUE(ledger.ok()) << ledger.status().ToString();
    LedgerFilter window;
    window.from_unix = options.from_unix;
    window.to_unix = options.to_unix;
    auto rows = (*ledger)->Rows(window);
    auto periods = (*ledger)->Periods(options.from_unix, options.to_unix);
    EXPECT_TRUE(rows.ok() && periods.ok());
    report_ = BuildCostReport(*rows, *periods, Apis(), options);
    return CostReportJson(report_);
  }

  TempDir dir_;
  CostReport report_;
};

void ExpectNear(const Json& actual, double expected, const std::string& what) {
  ASSERT_TRUE(actual.is_number()) << what << " is " << actual.dump();
  EXPECT_NEAR(actual.get<double>(), expected, std::abs(expected) * 1e-9 + 1e-15) << what;
}

TEST_F(CostReportTest, OverallFiguresMatchTheHandComputedOnes) {
  ReportOptions options;
  options.utilisation_buckets = 2;
  const Json j = Report(options);
  const Json& o = j["overall"];
  ExpectNear(o["capacity_cost_usd"], 2.0, "capacity");
  ExpectNear(o["request_cost_usd"], 0.9, "request");
  ExpectNear(o["retry_waste_usd"], 0.1, "retry");
  ExpectNear(o["idle_waste_usd"], 1.0, "idle");
  EXPECT_NEAR(o["conservation_residual_usd"].get<double>(), 0, 1e-12);
  EXPECT_EQ(o["input_tokens"], 4000);
  EXPECT_EQ(o["output_tokens"], 1900);
  EXPECT_EQ(o["requests"], 3);
  EXPECT_EQ(o["attempts"], 4);
  EXPECT_EQ(o["failed_attempts"], 1);

  const Json& m = o["per_1m_tokens"];
  ExpectNear(m["reserved"]["input_usd"], 0.3 / 3000 * 1e6, "reserved in");
  ExpectNear(m["reserved"]["output_usd"], 0.3 / 900 * 1e6, "reserved out");
  ExpectNear(m["reserved"]["fully_loaded_usd"], 1.0 / 3900 * 1e6, "reserved loaded");
  ExpectNear(m["reserved"]["fully_loaded_input_usd"], 0.5 / 3000 * 1e6, "reserved loaded in");
  ExpectNear(m["reserved"]["fully_loaded_output_usd"], 0.5 / 900 * 1e6, "reserved loaded out");
  ExpectNear(m["burst"]["input_usd"], 0.1 / 1000 * 1e6, "burst in");
  ExpectNear(m["burst"]["output_usd"], 0.2 / 1000 * 1e6, "burst out");
  ExpectNear(m["burst"]["fully_loaded_usd"], 1.0 / 2000 * 1e6, "burst loaded");
  ExpectNear(m["blended"]["input_usd"], 0.4 / 4000 * 1e6, "blended in");
  ExpectNear(m["blended"]["output_usd"], 0.5 / 1900 * 1e6, "blended out");
  ExpectNear(m["blended"]["fully_loaded_usd"], 2.0 / 5900 * 1e6, "blended loaded");
  ExpectNear(m["blended"]["fully_loaded_input_usd"], 2.0 * 4 / 9 / 4000 * 1e6, "loaded in");
  ExpectNear(m["blended"]["fully_loaded_output_usd"], 2.0 * 5 / 9 / 1900 * 1e6, "loaded out");
  ExpectNear(o["classes"]["reserved"]["utilisation"], 0.6, "reserved utilisation");
  ExpectNear(o["classes"]["burst"]["idle_waste_usd"], 0.6, "burst idle");
  ExpectNear(o["classes"]["burst"]["retry_compute_usd"], 0.1, "burst retry compute");

  const Json& cheap = o["apis"]["cheap"];
  ExpectNear(cheap["api_cost_usd"], 4000 * 2e-6 + 1900 * 8e-6, "cheap api");
  ExpectNear(cheap["break_even_reserved_utilisation"], 0.6 / (3000 * 2e-6 + 900 * 8e-6),
             "cheap break-even");
  EXPECT_TRUE(cheap["never_breaks_even"].get<bool>());
  const Json& pricey = o["apis"]["pricey"];
  ExpectNear(pricey["api_cost_usd"], 2.7, "pricey api");
  ExpectNear(pricey["break_even_reserved_utilisation"], 0.4, "pricey break-even");
  EXPECT_FALSE(pricey["never_breaks_even"].get<bool>());
  ExpectNear(pricey["input_per_1m_usd"], 200, "pricey in per 1M");

  // Per worker: request + retry + idle == capacity.
  ASSERT_EQ(j["workers"].size(), 2u);
  for (const Json& w : j["workers"]) {
    ExpectNear(w["capacity_cost_usd"], 1.0, "worker capacity");
    EXPECT_NEAR(w["conservation_residual_usd"].get<double>(), 0, 1e-12) << w.dump();
  }
  ExpectNear(j["workers"][0]["request_cost_usd"], 0.6, "R requests");
  ExpectNear(j["workers"][1]["retry_waste_usd"], 0.1, "B retries");

  // Utilisation over [0, 1000] in two buckets: busy 470 then 330 GPU-seconds (steps spread
  // over their phases), uptime 1000 then 500.
  ASSERT_EQ(j["utilisation_over_time"].size(), 2u);
  ExpectNear(j["utilisation_over_time"][0]["busy_gpu_seconds"], 470, "bucket 0 busy");
  ExpectNear(j["utilisation_over_time"][0]["uptime_gpu_seconds"], 1000, "bucket 0 uptime");
  ExpectNear(j["utilisation_over_time"][1]["busy_gpu_seconds"], 330, "bucket 1 busy");
  ExpectNear(j["utilisation_over_time"][1]["utilisation"], 330.0 / 500, "bucket 1");
}

TEST_F(CostReportTest, ExternalRowsAreReportedBesideSelfHostedCapacityNotInIt) {
  const WorkerRef api{0, "openai", "api", CapacityClass::kApi, "", 0, 0};
  auto ledger = Ledger::Open({dir_ / "ledger.db", false});
  ASSERT_TRUE(ledger.ok()) << ledger.status().ToString();
  AttemptRow served = Row("chatcmpl-5", 1, "acme", "ok", api, 0, api, 0, 100, 20, 10, 11, 12);
  served.cost.api_tokens_usd = 100 * 1e-6 + 20 * 4e-6;
  served.cached_prompt_tokens = 64;
  AttemptRow failed = Row("chatcmpl-6", 1, "beta", "retried", api, 0, api, 0, 0, 0, 10, 0, 11);
  failed.cost = {};
  ASSERT_TRUE((*ledger)->Append(served).ok());
  ASSERT_TRUE((*ledger)->Append(failed).ok());
  ledger->reset();
  const Json j = Report({});
  const Json& o = j["overall"];
  // The self-hosted figures are those without the API rows: conservation still holds.
  ExpectNear(o["request_cost_usd"], 0.9, "request");
  ExpectNear(o["retry_waste_usd"], 0.1, "retry");
  EXPECT_NEAR(o["conservation_residual_usd"].get<double>(), 0, 1e-12);
  EXPECT_EQ(o["requests"], 3);
  EXPECT_EQ(o["input_tokens"], 4000);
  EXPECT_FALSE(o["classes"].contains("api"));
  const Json& e = o["external_apis"]["openai"];
  EXPECT_EQ(e["requests"], 1);
  EXPECT_EQ(e["failed_attempts"], 1);
  EXPECT_EQ(e["input_tokens"], 100);
  EXPECT_EQ(e["cached_input_tokens"], 64);
  EXPECT_EQ(e["output_tokens"], 20);
  EXPECT_EQ(e["cost_usd"].get<double>(), served.cost.total());
  EXPECT_EQ(j["tenants"]["acme"]["external_apis"]["openai"]["requests"], 1);
  EXPECT_NE(CostReportTable(report_).find("External APIs"), std::string::npos);

  // The same tokens on burst: B's compute was $0.1 for 1000 input tokens (row 3) and $0.2 for
  // 1000 output tokens (row 4); its capacity $1.0 splits 1/3 to input, 2/3 to output.
  ExpectNear(e["on_burst_compute_usd"], 100 * 0.1 / 1000 + 20 * 0.2 / 1000, "on burst compute");
  ExpectNear(e["on_burst_fully_loaded_usd"], 100 * (1.0 / 3) / 1000 + 20 * (2.0 / 3) / 1000,
             "on burst loaded");
  // acme's burst decoded nothing: its upstream's output tokens have no burst rate.
  EXPECT_TRUE(j["tenants"]["acme"]["external_apis"]["openai"]["on_burst_compute_usd"].is_null());

  // The mix: rows 1 and 3 decoded on R, row 4 on B, one served by the API; the failed API
  // attempt is in the API's cost but is no request.
  const Json& mix = o["mix"];
  ASSERT_EQ(mix.size(), 3u) << mix.dump();
  EXPECT_EQ(mix["reserved"]["requests"], 2);
  EXPECT_EQ(mix["reserved"]["input_tokens"], 3000);
  EXPECT_EQ(mix["reserved"]["output_tokens"], 900);
  ExpectNear(mix["reserved"]["cost_usd"], 1.0, "reserved capacity");
  ExpectNear(mix["reserved"]["request_share"], 0.5, "reserved share");
  EXPECT_EQ(mix["burst"]["requests"], 1);
  ExpectNear(mix["burst"]["request_share"], 0.25, "burst share");
  EXPECT_EQ(mix["api openai"]["requests"], 1);
  EXPECT_EQ(mix["api openai"]["cost_usd"].get<double>(), served.cost.total());
  ExpectNear(mix["api openai"]["request_share"], 0.25, "api share");
  const std::string table = CostReportTable(report_);
  EXPECT_NE(table.find("Mix (accepted requests)"), std::string::npos) << table;
  EXPECT_NE(table.find("api openai"), std::string::npos) << table;
  const std::string html = CostReportHtml(report_);
  EXPECT_NE(html.find("<h3>Mix</h3>"), std::string::npos);
  EXPECT_NE(html.find("against burst"), std::string::npos);
}

TEST_F(CostReportTest, RowsAreSummedAtTheirStoredPartsNeverRepriced) {
  // 10 s each way on R would price at $0.01 a phase; the row holds other parts, and the report
  // must use those (as the gateway priced them), not its own arithmetic.
  AttemptRow planted = Row("chatcmpl-7", 1, "gamma", "ok", kR, 10, kR, 10, 100, 50, 20, 21, 22);
  planted.cost = {0.5, 0.25, 0.125, 0};
  auto ledger = Ledger::Open({dir_ / "ledger.db", false});
  ASSERT_TRUE(ledger.ok()) << ledger.status().ToString();
  ASSERT_TRUE((*ledger)->Append(planted).ok());
  ledger->reset();
  const Json j = Report({});
  const Json& gamma = j["tenants"]["gamma"];
  EXPECT_EQ(gamma["request_cost_usd"].get<double>(), 0.875);
  EXPECT_EQ(gamma["egress_cost_usd"].get<double>(), 0.125);
  EXPECT_EQ(gamma["classes"]["reserved"]["prefill_compute_usd"].get<double>(), 0.5);
  EXPECT_EQ(gamma["classes"]["reserved"]["decode_compute_usd"].get<double>(), 0.25);
  ExpectNear(j["overall"]["request_cost_usd"], 0.9 + 0.875, "request");
  ExpectNear(j["overall"]["classes"]["reserved"]["prefill_compute_usd"], 0.3 + 0.5, "R prefill");
  ExpectNear(j["workers"][0]["request_cost_usd"], 0.6 + 0.75, "R requests");
}

TEST_F(CostReportTest, TenantsGetTheirOwnCostsAndAnAllocatedShareOfCapacity) {
  const Json j = Report({});
  const Json& acme = j["tenants"]["acme"];
  EXPECT_TRUE(acme["allocated"].get<bool>());
  ExpectNear(acme["request_cost_usd"], 0.5, "acme request");
  ExpectNear(acme["retry_waste_usd"], 0.1, "acme retry");
  EXPECT_EQ(acme["input_tokens"], 2000);
  EXPECT_EQ(acme["output_tokens"], 900);
  // acme used 0.4 of reserved's 0.6 compute and 0.2 of burst's 0.4.
  ExpectNear(acme["capacity_cost_usd"], 1.0 * 2 / 3 + 1.0 * 0.5, "acme capacity");
  ExpectNear(acme["idle_waste_usd"], 0.4 * 2 / 3 + 0.6 * 0.5, "acme idle");
  const Json& beta = j["tenants"]["beta"];
  ExpectNear(beta["request_cost_usd"], 0.4, "beta request");
  EXPECT_EQ(beta["retry_waste_usd"], 0.0);
  ExpectNear(beta["capacity_cost_usd"], 1.0 / 3 + 0.5, "beta capacity");
  ExpectNear(beta["apis"]["pricey"]["api_cost_usd"], 1.4, "beta api");
  ExpectNear(beta["apis"]["pricey"]["break_even_reserved_utilisation"], 0.2 / 0.4, "beta b-e");
  // Tenants' shares add up to the fleet, and each one conserves.
  for (const char* key : {"capacity_cost_usd", "idle_waste_usd", "request_cost_usd"}) {
    ExpectNear(Json(acme[key].get<double>() + beta[key].get<double>()),
               j["overall"][key].get<double>(), key);
  }
  for (const Json* t : {&acme, &beta}) {
    ExpectNear((*t)["capacity_cost_usd"],
               (*t)["request_cost_usd"].get<double>() + (*t)["retry_waste_usd"].get<double>() +
                   (*t)["idle_waste_usd"].get<double>(),
               "tenant conservation");
  }
}

TEST_F(CostReportTest, FiltersNarrowTheSectionsNotTheFleet) {
  ReportOptions options;
  options.tags = {{"env", "prod"}};
  options.group_by_tag = "env";
  const Json j = Report(options);
  ExpectNear(j["overall"]["capacity_cost_usd"], 2.0, "fleet capacity");
  ExpectNear(j["overall"]["request_cost_usd"], 0.9, "fleet requests");
  ASSERT_EQ(j["tenants"].size(), 1u);
  ExpectNear(j["tenants"]["beta"]["request_cost_usd"], 0.4, "beta");
  ExpectNear(j["selection"]["request_cost_usd"], 0.4, "selection");
  ASSERT_EQ(j["groups"].size(), 1u);
  EXPECT_EQ(j["groups"]["prod"]["output_tokens"], 1000);

  ReportOptions acme;
  acme.tenant = "acme";
  const Json a = Report(acme);
  ASSERT_EQ(a["tenants"].size(), 1u);
  ExpectNear(a["selection"]["retry_waste_usd"], 0.1, "acme selection");
}

TEST_F(CostReportTest, AWindowClipsPeriodsAndKeepsRowsThatEndedInIt) {
  ReportOptions options;
  options.from_unix = 0;
  options.to_unix = 500;
  const Json j = Report(options);
  // Rows 1 and 2 ended before 500. R's period is cut to half: busy prorated to 300 s.
  EXPECT_EQ(j["overall"]["attempts"], 2);
  ExpectNear(j["overall"]["capacity_cost_usd"], 0.5 + 1.0, "clipped capacity");
  ExpectNear(j["overall"]["idle_waste_usd"], 0.2 + 0.6, "clipped idle");
  EXPECT_EQ(j["window"]["to"], "1970-01-01T00:08:20Z");
}

TEST_F(CostReportTest, CsvTableAndHtmlCarryTheFigures) {
  const Json j = Report({});
  const std::string csv = CostReportCsv(report_);
  EXPECT_EQ(csv.rfind("metric,value\n", 0), 0u);
  EXPECT_NE(csv.find("overall.capacity_cost_usd,2"), std::string::npos) << csv.substr(0, 400);
  EXPECT_NE(csv.find("tenants.acme.request_cost_usd,0.5"), std::string::npos);

  const std::string table = CostReportTable(report_);
  EXPECT_NE(table.find("capacity cost"), std::string::npos);
  EXPECT_NE(table.find("$2.000000"), std::string::npos) << table;
  EXPECT_NE(table.find("Tenant acme"), std::string::npos);
  EXPECT_NE(table.find("never"), std::string::npos);
  EXPECT_NE(table.find("40.0%"), std::string::npos);  // pricey's break-even

  const std::string html = CostReportHtml(report_);
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  size_t svgs = 0;
  for (size_t at = html.find("<svg"); at != std::string::npos; at = html.find("<svg", at + 1)) {
    ++svgs;
  }
  EXPECT_EQ(svgs, 3u);
  EXPECT_NE(html.find("api pricey"), std::string::npos);
  EXPECT_NE(html.find("retry waste"), std::string::npos);
  // Self-contained: nothing loaded from anywhere.
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("src="), std::string::npos);
  EXPECT_EQ(html.find("href="), std::string::npos);
  EXPECT_EQ(html.find("@import"), std::string::npos);
}

TEST(CostReportEmptyTest, NoRowsNoPeriodsGivesZerosAndNulls) {
  CostReport r = BuildCostReport({}, {}, Apis(), {});
  const Json j = CostReportJson(r);
  EXPECT_EQ(j["overall"]["capacity_cost_usd"], 0.0);
  EXPECT_TRUE(j["overall"]["per_1m_tokens"]["blended"]["input_usd"].is_null());
  EXPECT_TRUE(j["overall"]["apis"]["cheap"]["never_breaks_even"].get<bool>());
  EXPECT_NE(CostReportHtml(r).find("No worker periods"), std::string::npos);
  EXPECT_FALSE(CostReportTable(r).empty());
}

// The prompt cache, worked by hand (R costs $0.001 per second):
//   row  tenant  prompt  cached  prefill      out
//   A    acme    1000    600     R 100 $0.1   100
//   B    acme    1000    0       R 300 $0.3   200
//   C    beta    500     500     R   1 $0.001 10
//   D    acme    400     100     api           50   (class api: not our cache)
// acme: hit rate 600/2000 = 0.3; $0.4 of prefill over 1400 uncached tokens, so the 600 cached
// ones saved ~600 * 0.4 / 1400. beta: hit rate 1, no uncached token to measure a rate: no
// estimate. The API "cachey" (input $2/M, cached $0.5/M, output $8/M) would charge acme
// 400*2e-6 + 600*5e-7 + 100*8e-6 (A) + 1000*2e-6 + 200*8e-6 (B) = $0.0055; "flat", whose sheet
// has no cached price, 2000*2e-6 + 300*8e-6 = $0.0064.
TEST(CostReportPromptCacheTest, HitRateSavingAndCachedApiPriceMatchTheHandComputedOnes) {
  auto row = [](std::string id, std::string tenant, const WorkerRef& w, double prefill_s,
                int64_t in, int64_t cached, int64_t out) {
    AttemptRow r =
        Row(std::move(id), 1, std::move(tenant), "ok", w, prefill_s, w, 1, in, out, 0, 1, 2);
    r.cached_prompt_tokens = cached;
    return r;
  };
  const WorkerRef api{0, "openai", "api", CapacityClass::kApi, "", 0, 0};
  ApiPrice cachey{"cachey", "openai", 2e-6, 8e-6};
  cachey.cache_read_cost_per_token = 5e-7;
  const ApiPrice flat{"flat", "openai", 2e-6, 8e-6};
  const CostReport report = BuildCostReport(
      {row("A", "acme", kR, 100, 1000, 600, 100), row("B", "acme", kR, 300, 1000, 0, 200),
       row("C", "beta", kR, 1, 500, 500, 10), row("D", "acme", api, 0, 400, 100, 50)},
      {}, {cachey, flat}, {});
  const Json j = CostReportJson(report);
  const Json& acme = j["tenants"]["acme"];
  EXPECT_EQ(acme["prompt_cache"]["prompt_tokens"], 2000);
  EXPECT_EQ(acme["prompt_cache"]["cached_prompt_tokens"], 600);
  ExpectNear(acme["prompt_cache"]["hit_rate"], 0.3, "acme hit rate");
  ExpectNear(acme["prompt_cache"]["saved_usd"], 600 * 0.4 / 1400, "acme saved");
  const Json& beta = j["tenants"]["beta"];
  ExpectNear(beta["prompt_cache"]["hit_rate"], 1.0, "beta hit rate");
  EXPECT_TRUE(beta["prompt_cache"]["saved_usd"].is_null());
  ExpectNear(j["overall"]["prompt_cache"]["hit_rate"], 1100.0 / 2500, "overall hit rate");
  ExpectNear(acme["apis"]["cachey"]["api_cost_usd"], 0.0055, "cachey on acme");
  ExpectNear(acme["apis"]["flat"]["api_cost_usd"], 0.0064, "flat on acme");
  ExpectNear(acme["apis"]["flat"]["cached_input_per_1m_usd"], 2.0, "flat's cached price");
  const std::string table = CostReportTable(report);
  EXPECT_NE(table.find("hit rate 30.0% (600 of 2000 prompt tokens)"), std::string::npos) << table;
  EXPECT_NE(table.find("estimate"), std::string::npos);
  EXPECT_NE(CostReportCsv(report).find("tenants.acme.prompt_cache.hit_rate,0.3"),
            std::string::npos);
  EXPECT_NE(CostReportHtml(report).find("30.0%"), std::string::npos);
}

using pdserve::testing::CommandRun;
using pdserve::testing::ReadFile;
CommandRun Pdserve(const std::string& args) { return pdserve::testing::Pdserve(args, 60); }

constexpr char kSheet[] = R"({
  "sample_spec": {"input_cost_per_token": 0.0, "output_cost_per_token": 0.0,
                  "litellm_provider": "one of https://docs.litellm.ai/docs/providers"},
  "cheap": {"input_cost_per_token": 2e-6, "output_cost_per_token": 8e-6,
            "litellm_provider": "openai", "mode": "chat"},
  "pricey": {"input_cost_per_token": 2e-4, "output_cost_per_token": 1e-3,
             "litellm_provider": "anthropic", "mode": "chat"},
  "image-model": {"output_cost_per_image": 0.04, "litellm_provider": "openai"}
})";

class ReportCommandTest : public CostReportTest {
 protected:
  void SetUp() override {
    CostReportTest::SetUp();
    std::ofstream(dir_ / "prices.json") << kSheet;
    ledger_ = dir_ / "ledger.db";
    prices_ = dir_ / "prices.json";
  }
  std::string ledger_, prices_;
};

TEST_F(ReportCommandTest, JsonReportMatchesTheHandComputedFigures) {
  const std::string out = dir_ / "report.json";
  CommandRun run = Pdserve("report --ledger " + ledger_ + " --prices " + prices_ +
                           " --format json --out " + out);
  ASSERT_EQ(run.exit_code, 0) << run.out;
  const Json j = Json::parse(ReadFile(out));
  ExpectNear(j["overall"]["capacity_cost_usd"], 2.0, "capacity");
  ExpectNear(j["overall"]["request_cost_usd"], 0.9, "request");
  ExpectNear(j["overall"]["retry_waste_usd"], 0.1, "retry");
  ExpectNear(j["overall"]["idle_waste_usd"], 1.0, "idle");
  EXPECT_EQ(j["overall"]["input_tokens"], 4000);
  EXPECT_EQ(j["overall"]["output_tokens"], 1900);
  ExpectNear(j["overall"]["apis"]["pricey"]["api_cost_usd"], 2.7, "pricey");
  ExpectNear(j["tenants"]["acme"]["request_cost_usd"], 0.5, "acme");
  ExpectNear(j["tenants"]["beta"]["apis"]["cheap"]["api_cost_usd"], 2000 * 2e-6 + 1000 * 8e-6,
             "beta cheap");
  EXPECT_EQ(j["apis"].size(), 2u);  // sample_spec and the unpriced image model are skipped

  CommandRun one = Pdserve("report --ledger " + ledger_ + " --prices " + prices_ +
                           " --format json --api pricey --from 1970-01-01T00:00:00Z --to 500");
  ASSERT_EQ(one.exit_code, 0) << one.out;
  const Json k = Json::parse(one.out);
  EXPECT_EQ(k["apis"].size(), 1u);
  EXPECT_EQ(k["overall"]["attempts"], 2);
  ExpectNear(k["overall"]["capacity_cost_usd"], 1.5, "windowed capacity");
}

TEST_F(ReportCommandTest, TableCsvAndHtmlFormats) {
  CommandRun table = Pdserve("report --ledger " + ledger_ + " --prices " + prices_);
  ASSERT_EQ(table.exit_code, 0) << table.out;
  EXPECT_NE(table.out.find("idle waste"), std::string::npos) << table.out;
  CommandRun csv = Pdserve("report --ledger " + ledger_ + " --prices " + prices_ +
                           " --format csv --tenant beta --group-by-tag env");
  ASSERT_EQ(csv.exit_code, 0) << csv.out;
  EXPECT_NE(csv.out.find("selection.request_cost_usd,0.4"), std::string::npos) << csv.out;
  EXPECT_NE(csv.out.find("groups.prod."), std::string::npos);
  const std::string html = dir_ / "report.html";
  CommandRun page = Pdserve("report --ledger " + ledger_ + " --prices " + prices_ +
                            " --format html --out " + html);
  ASSERT_EQ(page.exit_code, 0) << page.out;
  EXPECT_EQ(ReadFile(html).rfind("<!DOCTYPE html>", 0), 0u);
}

TEST_F(ReportCommandTest, BadInputsAreClearErrorsAndWriteNothing) {
  std::ofstream(dir_ / "broken.json") << "{\"cheap\": {\"input_cost_per_token\": ";
  std::ofstream(dir_ / "negative.json")
      << R"({"cheap": {"input_cost_per_token": -1, "output_cost_per_token": 1e-6}})";
  std::ofstream(dir_ / "text.db") << "not a database at all, only words and more words\n";
  const std::string out = dir_ / "out.json";
  struct Case {
    std::string args, says;
  };
  for (const Case& c : std::vector<Case>{
           {"--ledger " + ledger_ + " --prices " + (dir_ / "broken.json"), "broken.json"},
           {"--ledger " + ledger_ + " --prices " + (dir_ / "negative.json"), "\"cheap\""},
           {"--ledger " + ledger_ + " --prices " + (dir_ / "none.json"), "none.json"},
           {"--ledger " + (dir_ / "none.db") + " --prices " + prices_, "none.db"},
           {"--ledger " + (dir_ / "text.db") + " --prices " + prices_, "not a pdserve ledger"},
           {"--ledger " + ledger_ + " --prices " + prices_ + " --api nope", "nope"},
           {"--ledger " + ledger_ + " --prices " + prices_ + " --from yesterday", "ISO-8601"},
       }) {
    CommandRun run = Pdserve("report " + c.args + " --format json --out " + out);
    EXPECT_EQ(run.exit_code, 1) << c.args << "\n" << run.out;
    EXPECT_NE(run.out.find(c.says), std::string::npos) << c.args << "\n" << run.out;
    EXPECT_FALSE(std::filesystem::exists(out)) << c.args;
  }
  EXPECT_FALSE(std::filesystem::exists(dir_ / "none.db"));  // not created by a failed report
}

TEST_F(ReportCommandTest, LedgerExportFiltersAndForgetDeletesATenant) {
  CommandRun acme = Pdserve("ledger export --ledger " + ledger_ + " --format json --tenant acme");
  ASSERT_EQ(acme.exit_code, 0) << acme.out;
  const Json rows = Json::parse(acme.out);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0]["request_id"], "chatcmpl-1");
  EXPECT_EQ(rows[1]["status"], "retried");
  EXPECT_EQ(rows[0]["prefill_worker"]["capacity_class"], "reserved");

  const std::string csv_path = dir_ / "prod.csv";
  CommandRun prod =
      Pdserve("ledger export --ledger " + ledger_ + " --tag env=prod --out " + csv_path);
  ASSERT_EQ(prod.exit_code, 0) << prod.out;
  const std::string csv = ReadFile(csv_path);
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 2) << csv;  // header and one row
  EXPECT_NE(csv.find("chatcmpl-4"), std::string::npos);
  EXPECT_NE(csv.find("env=prod"), std::string::npos);
  EXPECT_NE(csv.find("prefill_worker.capacity_class"), std::string::npos);

  CommandRun early = Pdserve("ledger export --ledger " + ledger_ +
                             " --format json --from 0 --to 1970-01-01T00:06:00Z");
  ASSERT_EQ(early.exit_code, 0) << early.out;
  EXPECT_EQ(Json::parse(early.out).size(), 1u);

  CommandRun forget = Pdserve("ledger forget --ledger " + ledger_ + " --tenant acme");
  ASSERT_EQ(forget.exit_code, 0) << forget.out;
  EXPECT_NE(forget.out.find("deleted 3 rows"), std::string::npos) << forget.out;
  CommandRun left = Pdserve("ledger export --ledger " + ledger_ + " --format json");
  ASSERT_EQ(left.exit_code, 0) << left.out;
  ASSERT_EQ(Json::parse(left.out).size(), 1u);
  EXPECT_EQ(Json::parse(left.out)[0]["tenant"], "beta");

  CommandRun missing = Pdserve("ledger forget --ledger " + (dir_ / "none.db") + " --tenant x");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_FALSE(std::filesystem::exists(dir_ / "none.db"));
  std::ofstream(dir_ / "empty.db").flush();  // a 0-byte file stays one
  CommandRun empty = Pdserve("ledger forget --ledger " + (dir_ / "empty.db") + " --tenant x");
  EXPECT_EQ(empty.exit_code, 1);
  EXPECT_NE(empty.out.find("not a pdserve ledger"), std::string::npos) << empty.out;
  EXPECT_EQ(std::filesystem::file_size(dir_ / "empty.db"), 0u);
  // An SQLite database of something else: refused, and left as it was.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir_ / "other.db").c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "CREATE TABLE t(x)", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  const auto before = ReadFile(dir_ / "other.db");
  CommandRun other = Pdserve("ledger forget --ledger " + (dir_ / "other.db") + " --tenant x");
  EXPECT_EQ(other.exit_code, 1) << other.out;
  EXPECT_NE(other.out.find("not a pdserve ledger"), std::string::npos) << other.out;
  EXPECT_EQ(ReadFile(dir_ / "other.db"), before);
}

}  // namespace
}  // namespace pdserve::ledger
