// A section's predictions against outcomes; see prediction_figures.h.
#include "ledger/prediction_figures.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace pdserve::ledger {

namespace {

// The nearest-rank quantile q of `values` (not empty), which it sorts.
double Quantile(std::vector<double>& values, double q) {
  std::sort(values.begin(), values.end());
  const size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(values.size())));
  return values[std::clamp<size_t>(rank, 1, values.size()) - 1];
}

nlohmann::json Optional(std::optional<double> v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

nlohmann::json SummaryJson(const PredictionErrors& errors) {
  const std::optional<ErrorSummary> s = Summarise(errors);
  if (!s) return nullptr;
  return {{"count", s->count},
          {"median_abs_error", s->median_abs_error},
          {"p90_abs_error", s->p90_abs_error},
          {"bias", s->bias},
          {"median_abs_relative_error", Optional(s->median_abs_relative_error)},
          {"p90_abs_relative_error", Optional(s->p90_abs_relative_error)},
          {"relative_bias", Optional(s->relative_bias)}};
}

std::string Percent(std::optional<double> v, bool sign) {
  if (!v) return "-";
  return sign ? fmt::format("{:+.0f}%", *v * 100) : fmt::format("{:.0f}%", *v * 100);
}

}  // namespace

void PredictionErrors::Add(double predicted_seconds, double measured_seconds) {
  predicted.push_back(predicted_seconds);
  measured.push_back(measured_seconds);
}

std::optional<ErrorSummary> Summarise(const PredictionErrors& e) {
  const size_t n = std::min(e.predicted.size(), e.measured.size());
  if (n == 0) return std::nullopt;
  ErrorSummary s;
  s.count = static_cast<int64_t>(n);
  std::vector<double> abs_errors, relative;
  double sum_error = 0, sum_measured = 0;
  for (size_t i = 0; i < n; ++i) {
    const double error = e.predicted[i] - e.measured[i];
    abs_errors.push_back(std::abs(error));
    sum_error += error;
    sum_measured += e.measured[i];
    if (e.measured[i] > 0) relative.push_back(std::abs(error) / e.measured[i]);
  }
  s.bias = sum_error / static_cast<double>(n);
  s.median_abs_error = Quantile(abs_errors, 0.5);
  s.p90_abs_error = Quantile(abs_errors, 0.9);
  if (!relative.empty()) {
    s.median_abs_relative_error = Quantile(relative, 0.5);
    s.p90_abs_relative_error = Quantile(relative, 0.9);
  }
  if (sum_measured > 0) s.relative_bias = sum_error / sum_measured;
  return s;
}

void PredictionFigures::Add(const AttemptRow& r) {
  if (r.attempt == 1 && !r.admission.empty()) ++decisions[r.admission];
  if (r.admission != "admitted" || !(r.predicted_ttft_seconds > 0) || !(r.first_token_unix > 0) ||
      r.prefill_worker.id == 0) {
    return;
  }
  const double measured = std::max(0.0, r.first_token_unix - r.arrival_unix);
  ttft.Add(r.predicted_ttft_seconds, measured);
  queue_wait.Add(r.predicted_queue_seconds, std::max(0.0, r.queue_seconds));
  const std::string pool =
      r.prefill_worker.role + "/" + std::string(ToString(r.prefill_worker.capacity_class));
  ttft_by_pool[pool].Add(r.predicted_ttft_seconds, measured);
}

nlohmann::json PredictionsJson(const PredictionFigures& f) {
  nlohmann::json by_pool = nlohmann::json::object();
  for (const auto& [pool, errors] : f.ttft_by_pool) by_pool[pool] = SummaryJson(errors);
  nlohmann::json decisions = nlohmann::json::object();
  for (const auto& [decision, n] : f.decisions) decisions[decision] = n;
  return {{"decisions", decisions},
          {"ttft", SummaryJson(f.ttft)},
          {"queue_wait", SummaryJson(f.queue_wait)},
          {"ttft_by_pool", by_pool}};
}

std::string ErrorSummaryText(const std::optional<ErrorSummary>& s) {
  if (!s) return "-";
  return fmt::format("n={} median |err| {:.3f} s ({}), p90 {:.3f} s ({}), bias {:+.3f} s ({})",
                     s->count, s->median_abs_error, Percent(s->median_abs_relative_error, false),
                     s->p90_abs_error, Percent(s->p90_abs_relative_error, false), s->bias,
                     Percent(s->relative_bias, true));
}

std::string DecisionsText(const PredictionFigures& f) {
  std::string decisions;
  for (const auto& [decision, n] : f.decisions) {
    decisions += fmt::format("{}{} {}", decisions.empty() ? "" : ", ", decision, n);
  }
  return decisions.empty() ? "-" : decisions;
}

std::string PredictionsLines(const PredictionFigures& f) {
  if (f.decisions.empty() && f.ttft.predicted.empty()) return "";
  std::string out = fmt::format("  admission       {}\n", DecisionsText(f));
  out += fmt::format("  predicted TTFT  {}\n", ErrorSummaryText(Summarise(f.ttft)));
  out += fmt::format("  predicted queue {}\n", ErrorSummaryText(Summarise(f.queue_wait)));
  for (const auto& [pool, errors] : f.ttft_by_pool) {
    out += fmt::format("    TTFT {:<10} {}\n", pool, ErrorSummaryText(Summarise(errors)));
  }
  return out;
}

}  // namespace pdserve::ledger
