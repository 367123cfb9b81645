// The ledger's columns as both stores name, write and read them (ledger/sqlite_ledger.cc and
// ledger/postgres_ledger.cc only): one list, one binding order and one decoding of a row, so the
// two stores hold and give back the same rows. A Binder has Bind(string_view | double | int64_t)
// and BindNull(); a Reader has Text, Int, Real and IsNull by column.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "ledger/ledger.h"

namespace pdserve::ledger::columns {

// The attempt columns in the order BindAttempt binds them and ReadAttempt reads them: the
// first version's, then version 2's cost parts, 3's cached tokens, 4's placement and 5's
// admission (sqlite_ledger.h, "Schema versions"). "user" is quoted: PostgreSQL reserves it.
constexpr char kAttemptV1[] =
    "request_id, attempt, tenant, model, endpoint, status, finish_reason, arrival_unix, "
    "first_token_unix, end_unix, queue_seconds, prefill_seconds, transfer_seconds, "
    "decode_seconds, prompt_tokens, completion_tokens, prefill_worker_id, prefill_worker_name, "
    "prefill_worker_role, prefill_capacity_class, prefill_zone, prefill_price_per_gpu_hour, "
    "prefill_gpu_count, decode_worker_id, decode_worker_name, decode_worker_role, "
    "decode_capacity_class, decode_zone, decode_price_per_gpu_hour, decode_gpu_count, "
    "prefill_step_seconds, decode_step_seconds, kv_bytes, egress_cost_usd, cost_usd, \"user\", "
    "prompt_text, completion_text";
constexpr char kCostParts[] = "prefill_compute_usd, decode_compute_usd, api_tokens_usd";
constexpr char kCached[] = "cached_prompt_tokens";
constexpr char kPlacement[] = "placement, placement_reason";
constexpr char kAdmission[] = "admission, predicted_queue_seconds, predicted_ttft_seconds";
constexpr int kAttemptCount = 47;  // the five lists

inline std::string AllAttemptColumns() {
  return std::string(kAttemptV1) + ", " + kCostParts + ", " + kCached + ", " + kPlacement + ", " +
         kAdmission;
}

constexpr char kPeriod[] =
    "period_id, worker_id, worker_name, worker_role, capacity_class, zone, price_per_gpu_hour, "
    "gpu_count, start_unix, end_unix, busy_seconds";
constexpr int kPeriodCount = 11;

template <class Binder>
void BindWorker(Binder& b, const WorkerRef& w) {
  b.Bind(static_cast<int64_t>(w.id));
  b.Bind(std::string_view(w.name));
  b.Bind(std::string_view(w.role));
  b.Bind(std::string_view(ToString(w.capacity_class)));
  b.Bind(std::string_view(w.zone));
  b.Bind(w.price_per_gpu_hour);
  b.Bind(static_cast<int64_t>(w.gpu_count));
}

// The row's kAttemptCount values; its text only when `store_text` (NULL otherwise).
template <class Binder>
void BindAttempt(Binder& b, const AttemptRow& r, bool store_text) {
  b.Bind(std::string_view(r.request_id));
  b.Bind(static_cast<int64_t>(r.attempt));
  for (const std::string* v : {&r.tenant, &r.model, &r.endpoint}) b.Bind(std::string_view(*v));
  b.Bind(std::string_view(ToString(r.status)));
  b.Bind(std::string_view(r.finish_reason));
  for (double v : {r.arrival_unix, r.first_token_unix, r.end_unix, r.queue_seconds,
                   r.prefill_seconds, r.transfer_seconds, r.decode_seconds}) {
    b.Bind(v);
  }
  b.Bind(r.prompt_tokens);
  b.Bind(r.completion_tokens);
  BindWorker(b, r.prefill_worker);
  BindWorker(b, r.decode_worker);
  b.Bind(r.prefill_step_seconds);
  b.Bind(r.decode_step_seconds);
  b.Bind(r.kv_bytes);
  b.Bind(r.cost.egress_usd);
  b.Bind(r.cost.total());
  b.Bind(std::string_view(r.user));
  for (const std::string* text : {&r.prompt_text, &r.completion_text}) {
    if (store_text) {
      b.Bind(std::string_view(*text));
    } else {
      b.BindNull();
    }
  }
  b.Bind(r.cost.prefill_compute_usd);
  b.Bind(r.cost.decode_compute_usd);
  b.Bind(r.cost.api_tokens_usd);
  b.Bind(r.cached_prompt_tokens);
  b.Bind(std::string_view(r.placement));
  b.Bind(std::string_view(r.placement_reason));
  b.Bind(std::string_view(r.admission));
  b.Bind(r.predicted_queue_seconds);
  b.Bind(r.predicted_ttft_seconds);
}

template <class Reader>
Result<WorkerRef> ReadWorker(const Reader& rd, int col) {
  WorkerRef w;
  w.id = static_cast<uint64_t>(rd.Int(col));
  w.name = rd.Text(col + 1);
  w.role = rd.Text(col + 2);
  PDSERVE_ASSIGN_OR_RETURN(w.capacity_class, ParseCapacityClass(rd.Text(col + 3)));
  w.zone = rd.Text(col + 4);
  w.price_per_gpu_hour = rd.Real(col + 5);
  w.gpu_count = static_cast<int>(rd.Int(col + 6));
  return w;
}

// The parts of a row written before version 2 (see sqlite_ledger.h, "Schema versions").
inline AttemptCost CostOfUnsplitRow(const AttemptRow& row, double egress_cost_usd,
                                    double cost_usd) {
  AttemptCost c = PriceAttempt(row, {});
  c.egress_usd = egress_cost_usd;
  if (row.decode_worker.capacity_class == CapacityClass::kApi) c.api_tokens_usd = cost_usd;
  return c;
}

// Tags stored as a JSON object of strings ("" or NULL: none).
inline std::map<std::string, std::string> ParseTags(const std::string& json) {
  std::map<std::string, std::string> tags;
  if (json.empty()) return tags;
  auto j = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return tags;
  for (const auto& [key, value] : j.items()) {
    if (value.is_string()) tags[key] = value.get<std::string>();
  }
  return tags;
}

// A row from kAttemptCount columns and, after them, its tags as a JSON object (or NULL).
template <class Reader>
Result<AttemptRow> ReadAttempt(const Reader& rd) {
  AttemptRow r;
  int c = 0;
  r.request_id = rd.Text(c++);
  r.attempt = static_cast<int>(rd.Int(c++));
  const auto row_error = [&](const Status& s) {
    return s.WithContext("row " + r.request_id + "#" + std::to_string(r.attempt));
  };
  for (std::string* v : {&r.tenant, &r.model, &r.endpoint}) *v = rd.Text(c++);
  auto status = ParseAttemptStatus(rd.Text(c++));
  if (!status.ok()) return row_error(status.status());
  r.status = *status;
  r.finish_reason = rd.Text(c++);
  for (double* v : {&r.arrival_unix, &r.first_token_unix, &r.end_unix, &r.queue_seconds,
                    &r.prefill_seconds, &r.transfer_seconds, &r.decode_seconds}) {
    *v = rd.Real(c++);
  }
  r.prompt_tokens = rd.Int(c++);
  r.completion_tokens = rd.Int(c++);
  for (WorkerRef* w : {&r.prefill_worker, &r.decode_worker}) {
    auto worker = ReadWorker(rd, c);
    if (!worker.ok()) return row_error(worker.status());
    *w = std::move(worker).value();
    c += 7;
  }
  r.prefill_step_seconds = rd.Real(c++);
  r.decode_step_seconds = rd.Real(c++);
  r.kv_bytes = rd.Int(c++);
  const double egress_cost_usd = rd.Real(c++), cost_usd = rd.Real(c++);
  r.user = rd.Text(c++);
  r.prompt_text = rd.Text(c++);
  r.completion_text = rd.Text(c++);
  if (!rd.IsNull(c)) {
    r.cost = {rd.Real(c), rd.Real(c + 1), egress_cost_usd, rd.Real(c + 2)};
  } else {
    r.cost = CostOfUnsplitRow(r, egress_cost_usd, cost_usd);
  }
  c += 3;
  r.cached_prompt_tokens = rd.Int(c++);
  r.placement = rd.Text(c++);
  r.placement_reason = rd.Text(c++);
  r.admission = rd.Text(c++);
  r.predicted_queue_seconds = rd.Real(c++);
  r.predicted_ttft_seconds = rd.Real(c++);
  r.tags = ParseTags(rd.Text(c++));
  return r;
}

// A period from kPeriodCount columns.
template <class Reader>
Result<WorkerPeriod> ReadPeriod(const Reader& rd) {
  WorkerPeriod p;
  p.period_id = rd.Text(0);
  auto worker = ReadWorker(rd, 1);
  if (!worker.ok()) return worker.status().WithContext("period " + p.period_id);
  p.worker = std::move(worker).value();
  p.start_unix = rd.Real(8);
  p.end_unix = rd.Real(9);
  p.busy_seconds = rd.Real(10);
  return p;
}

}  // namespace pdserve::ledger::columns
