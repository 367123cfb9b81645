// PredictionFigures: how admission's predictions compared with what then happened, for a report
// section (cost_report.h): its decisions, and the errors of its predicted TTFT and queue wait
// against the measured ones, overall and by the pool that prefilled each request. Pure values
// and functions, safe from any thread.
//
// Definitions:
// - decisions: requests by AttemptRow::admission, counted on their first attempt's row.
// - an outcome: a request admitted to self-hosted workers with a prediction (> 0) whose first
//   token reached its client: its row with first_token_unix > 0. Measured TTFT = first_token_unix
//   - arrival_unix; measured queue wait = its queue_seconds (the gateway's queue and the prefill
//   worker's). Requests sent to an API, refused or never answered have no outcome to compare.
// - error = predicted - measured (seconds): bias is its mean, median_abs_error and p90_abs_error
//   the quantiles of |error| (nearest rank). Relative: |error| / measured per request (its median
//   and p90), and relative_bias = sum(error) / sum(measured), so that a few tiny measured
//   values cannot swamp it. Positive bias: admission predicted waits longer than they were.
// - pool: the prefill worker's role and capacity class ("prefill/reserved", "both/burst",
//   "decode/reserved" for a request its decode worker prefilled).
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "ledger/ledger.h"

namespace pdserve::ledger {

// Predicted and measured seconds of one kind of prediction.
struct PredictionErrors {
  std::vector<double> predicted, measured;
  void Add(double predicted_seconds, double measured_seconds);
};

struct ErrorSummary {
  int64_t count = 0;
  double median_abs_error = 0, p90_abs_error = 0, bias = 0;  // seconds
  // Relative (see the header); nullopt when no measured value was above 0.
  std::optional<double> median_abs_relative_error, p90_abs_relative_error, relative_bias;
};
// nullopt when there is nothing to summarise.
std::optional<ErrorSummary> Summarise(const PredictionErrors& errors);

struct PredictionFigures {
  std::map<std::string, int64_t> decisions;  // by admission decision; "" not counted
  PredictionErrors ttft, queue_wait;
  std::map<std::string, PredictionErrors> ttft_by_pool;

  // Adds any row of the section (refused and failed ones included); see the definitions.
  void Add(const AttemptRow& row);
};

// The report's JSON "predictions" object: {decisions, ttft, queue_wait, ttft_by_pool}, each
// summary {count, median_abs_error, p90_abs_error, bias, median_abs_relative_error,
// p90_abs_relative_error, relative_bias} (seconds and fractions) or null when empty.
nlohmann::json PredictionsJson(const PredictionFigures& f);
// The decisions as "admitted 4, refused 1" ("-" when none); the text and HTML reports use it.
std::string DecisionsText(const PredictionFigures& f);
// The text report's lines: decisions, then TTFT and queue wait errors ("" when nothing).
std::string PredictionsLines(const PredictionFigures& f);
// One summary as short text: "n=120 median |err| 0.21 s (14%), p90 0.52 s (33%), bias +0.05 s
// (+4%)"; "-" when empty. The HTML report's cells use it too.
std::string ErrorSummaryText(const std::optional<ErrorSummary>& s);

}  // namespace pdserve::ledger
