// CostReport: what `pdserve report` computes from a ledger's rows and worker periods and a
// price sheet: per tenant and overall, what was paid, what it bought (accepted tokens), what was
// wasted (idle, failed attempts), cost per 1M tokens on reserved, burst and blended capacity,
// what each external API would have charged for the same tokens, and the reserved utilisation
// at which self-hosting breaks even with each API. Pure computation plus the table, CSV and
// JSON writers (HTML: cost_report_html.h). Called by app/report_command.cc; no state.
//
// Definitions (docs/architecture.md, "Cost model"):
// - a row's costs are its stored parts (AttemptRow::cost, priced once by the gateway): compute
//   per phase, egress and API tokens, and their total as its cost_usd. The report sums them; it
//   never prices a row again. Worker periods' capacity is priced here (ComputeCostUsd of uptime).
// - capacity cost of a period = (end - start) * gpu_count * price_per_gpu_hour / 3600 (reserved
//   and burst alike: a worker costs while it is up). With a time window, periods are clipped to
//   it and busy_seconds prorated by the overlap.
// - idle seconds = (end - start) - busy_seconds; idle_waste_usd = the capacity cost of them.
// - accepted attempts: status ok or cancelled. request_cost_usd = sum of their cost_usd;
//   retry_waste_usd = sum of cost_usd of the others (retried, error).
// - Conservation: request_cost + retry_waste + idle_waste == capacity_cost + egress when the
//   rows' attributed step seconds on each worker sum to its busy_seconds (egress is charged on
//   top of capacity; conservation_residual_usd shows the difference).
// - cost per 1M input tokens on a class = prefill compute cost of accepted rows prefilled on
//   workers of that class / their prompt tokens * 1e6; per 1M output = decode compute cost /
//   completion tokens * 1e6 (decoded on that class). Blended: all classes together.
// - fully loaded = capacity cost / accepted (input + output) tokens * 1e6; split into input and
//   output in proportion to the accepted prefill and decode compute, so waste is spread as the
//   useful work is (fully_loaded_input_usd, fully_loaded_output_usd).
// - per API: api_cost_usd = sum over accepted rows of (prompt_tokens - cached_prompt_tokens) *
//   input_cost_per_token + cached_prompt_tokens * cached_input_cost_per_token +
//   completion_tokens * output_cost_per_token (ApiTokensCostUsd): the tokens our prefix cache
//   served are priced at the API's cached-input price. Break-even reserved utilisation = compute
//   cost of the accepted work on reserved workers / API cost of the same tokens: at utilisation u
//   the reserved cost per token is compute / u, so above that u self-hosting is cheaper. Above 1
//   (or no API cost): never; JSON gives the number and "never_breaks_even".
// - Capacity and idle belong to workers, not tenants. Tenant sections (and tag groups) hold
//   their own request cost, retry waste, tokens and API costs; their capacity_cost_usd and
//   idle_waste_usd are the fleet's allocated in proportion to the tenant's compute (accepted
//   and failed), per capacity class, and say "allocated": true.
// - Rows of class api (attempts the gateway sent to an external upstream) are no worker's: they
//   stay out of every figure above (conservation is of self-hosted capacity) and are summed by
//   upstream in `external` (JSON "external_apis"), at the cost their rows hold.
// - The mix (JSON "mix"): each option that served accepted requests, reserved, burst and each
//   external upstream ("api NAME"): requests (a self-hosted request counts for the class that
//   decoded it), tokens, what it cost (a class's capacity cost, idle and cold starts included;
//   an upstream's accepted and failed rows) and its share of the requests.
// - An upstream's tokens on burst (external_apis' "on_burst_*"): its accepted input and output
//   tokens at burst's rates in the same window: at burst's compute cost per 1M tokens (burst
//   as busy as it could be) and fully loaded (burst's capacity cost per accepted token, cold
//   starts and idle included, as it really ran); null when burst served no tokens of a kind the
//   upstream did.
// - The prompt cache (JSON "prompt_cache"): hit rate and the estimated saving, per section
//   (prompt_cache_figures.h has the definitions).
// - Predictions (JSON "predictions", top level: overall, with "by_tenant"): admission's decisions
//   and its predicted TTFT and queue wait against the measured ones (prediction_figures.h).
//   Refused rows (status refused: never ran) count there only.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "ledger/ledger.h"
#include "ledger/prediction_figures.h"
#include "ledger/price_sheet.h"
#include "ledger/prompt_cache_figures.h"

namespace pdserve::ledger {

struct ReportOptions {
  std::optional<double> from_unix, to_unix;  // the window; unset: all rows and periods
  std::optional<std::string> tenant;         // only this tenant's section (fleet stays whole)
  std::map<std::string, std::string> tags;   // only rows with all these tags in sections
  std::optional<std::string> group_by_tag;   // also a section per value of this tag
  int utilisation_buckets = 24;              // points of the utilisation-over-time series
};

// Money and tokens of one capacity class (reserved, burst, ...) within a section.
struct ClassFigures {
  int64_t requests = 0;                         // accepted, decoded (else prefilled) here
  double prefill_usd = 0, decode_usd = 0;       // accepted rows' compute on this class
  double wasted_usd = 0;                        // failed rows' compute on this class
  int64_t input_tokens = 0, output_tokens = 0;  // accepted tokens prefilled / decoded here
  double capacity_usd = 0, idle_usd = 0;        // the fleet's (or the section's allocated share)
  double uptime_gpu_seconds = 0, busy_gpu_seconds = 0;  // fleet only
};

struct ApiFigures {
  ApiPrice price;
  double api_cost_usd = 0;      // the accepted tokens at the API's prices
  double reserved_api_usd = 0;  // the tokens served on reserved workers at the API's prices
};

// Attempts sent to one external upstream (rows of class api): priced per token by the sheet the
// gateway was given, beside the self-hosted figures and outside their conservation.
struct ExternalFigures {
  int64_t requests = 0, failed_attempts = 0;
  int64_t input_tokens = 0, output_tokens = 0;  // accepted
  int64_t cached_input_tokens = 0;  // of input_tokens, those the API read from its prompt cache
  double cost_usd = 0;              // accepted attempts
  double wasted_usd = 0;            // failed attempts (retried, error)
};

struct ReportSection {
  bool allocated = false;  // capacity and idle are allocated shares (tenant, tag group)
  int64_t requests = 0, attempts = 0, failed_attempts = 0;
  int64_t input_tokens = 0, output_tokens = 0;  // accepted
  double capacity_usd = 0, request_usd = 0, retry_waste_usd = 0, idle_usd = 0, egress_usd = 0;
  std::map<std::string, ClassFigures> classes;  // by capacity class
  std::vector<ApiFigures> apis;
  std::map<std::string, ExternalFigures> external;  // by upstream; not in the figures above
  PromptCacheFigures prompt_cache;  // accepted rows prefilled here (prompt_cache_figures.h)
  PredictionFigures predictions;    // every row, refused ones too (prediction_figures.h)
};

struct WorkerFigures {  // one worker over its periods in the window
  WorkerRef worker;
  double uptime_seconds = 0, busy_seconds = 0;
  double capacity_usd = 0, idle_usd = 0, request_usd = 0, retry_waste_usd = 0;
};

struct UtilisationBucket {
  double start_unix = 0, end_unix = 0;
  double uptime_gpu_seconds = 0, busy_gpu_seconds = 0;  // busy from rows' step time at end_unix
};

struct CostReport {
  ReportOptions options;
  ReportSection overall;                         // every row in the window
  std::map<std::string, ReportSection> tenants;  // by tenant (filtered)
  std::optional<ReportSection> selection;        // rows matching --tenant/--tag, when given
  std::map<std::string, ReportSection> groups;   // by value of options.group_by_tag
  std::vector<WorkerFigures> workers;
  std::vector<UtilisationBucket> utilisation;
  std::vector<ApiPrice> apis;
};

// `rows` and `periods` are the window's (Ledger::Rows with the time filter only, Periods).
CostReport BuildCostReport(const std::vector<AttemptRow>& rows,
                           const std::vector<WorkerPeriod>& periods,
                           const std::vector<ApiPrice>& apis, const ReportOptions& options);

nlohmann::json CostReportJson(const CostReport& report);
// The JSON's "predictions": the overall section's, with "by_tenant" for each tenant section.
nlohmann::json ReportPredictionsJson(const CostReport& report);
// One line per figure: "scope,metric,value" with the JSON's paths flattened.
std::string CostReportCsv(const CostReport& report);
// `s` as one CSV field: quoted (quotes doubled) when it holds a comma, quote or line break.
// Also used by `pdserve ledger export`.
std::string CsvField(const std::string& s);
// Aligned text for a terminal.
std::string CostReportTable(const CostReport& report);

// Derived figures shared by the writers; nullopt when there are no tokens to divide by.
std::optional<double> PerMillion(double usd, int64_t tokens);
struct BreakEven {
  std::optional<double> utilisation;  // nullopt: no API cost to compare with
  bool never = true;                  // utilisation above 1, or none
};
BreakEven ReservedBreakEven(const ReportSection& section, const ApiFigures& api);
// The section's classes summed ("blended").
ClassFigures Blended(const ReportSection& section);

// One option of the section's mix (see "The mix" above).
struct MixEntry {
  std::string option;  // a capacity class, or "api NAME"
  int64_t requests = 0, input_tokens = 0, output_tokens = 0;
  double cost_usd = 0;
  double request_share = 0;  // of the section's accepted requests, self-hosted and external
};
std::vector<MixEntry> Mix(const ReportSection& section);

// What `external`'s accepted tokens would have cost on the section's burst capacity (see "An
// upstream's tokens on burst" above).
struct OnBurst {
  std::optional<double> compute_usd, fully_loaded_usd;
};
OnBurst ExternalOnBurst(const ReportSection& section, const ExternalFigures& external);

}  // namespace pdserve::ledger
