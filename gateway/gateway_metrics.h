// GatewayMetrics: the gateway's Prometheus metrics, with vLLM's names (prefixed pdserve_),
// meanings and bucket choices (docs/architecture.md, "Metrics"), served as text at GET /metrics.
// prometheus-cpp's metrics are thread-safe: record from any thread.
#pragma once

#include <atomic>

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "ledger/ledger.h"
#include "ledger/ledger_writer.h"

namespace pdserve::router {
class ExternalUpstreams;
class WorkerRegistry;
}  // namespace pdserve::router

namespace pdserve::gateway {

class GatewayMetrics {
 public:
  GatewayMetrics();

  void RecordFirstToken(double seconds) { ttft_.Observe(seconds); }
  // pdserve_gateway_own_seconds{part}: the gateway's own share of a request's time to first
  // token, apart from its workers' and the admission queue's. part "request": from the request's
  // last byte read to its first message sent to a worker, less its wait in the admission queue;
  // "first_token": from the frame with a stream's first text read from its worker to that text
  // handed to the client's socket; "total": both, for a stream whose first attempt gave it.
  void RecordOwnRequest(double seconds) { own_request_.Observe(seconds); }
  // A stream's first text relayed in `relay_seconds`, after `request_seconds` (< 0: not known).
  void RecordOwnRelay(double relay_seconds, double request_seconds) {
    own_first_token_.Observe(relay_seconds);
    if (request_seconds >= 0) own_total_.Observe(request_seconds + relay_seconds);
  }
  void RecordInterToken(double seconds);
  // An exponentially weighted mean of the inter-token latencies recorded lately (each weighs 5%),
  // for the planner; 0 when none came for 10 s (no traffic is no latency).
  double RecentInterToken() const;
  void RecordFinished(const std::string& finished_reason, double e2e_seconds, int prompt_tokens,
                      int generation_tokens);
  void RecordFailed() { failed_.Increment(); }
  // pdserve_cost_usd_total{tenant,class}: an attempt's cost as its row holds it, each part on
  // the class that incurred it: prefill compute on its prefill worker's class, decode compute on
  // its decode worker's, API tokens on api. (Egress is no class's and not counted here.)
  void RecordCost(const std::string& tenant, const ledger::AttemptRow& row);
  prometheus::Gauge& running() { return running_; }
  // A request of `prompt_tokens` left the admission queue for its workers, after `seconds` in it.
  void RecordQueueTime(double seconds, int64_t prompt_tokens) {
    queue_time_.Observe(seconds);
    started_prompt_tokens_.fetch_add(prompt_tokens, std::memory_order_relaxed);
  }
  // Requests that left the admission queue for their workers so far (the queue-time histogram's
  // count), and their prompt tokens: the planner's counts.
  int64_t Started() const;
  int64_t StartedPromptTokens() const {
    return started_prompt_tokens_.load(std::memory_order_relaxed);
  }
  // pdserve_ttft_predicted_over_measured: admission's predicted TTFT of a request admitted to
  // workers over its measured TTFT (1: exact; above 1: predicted too long).
  void RecordTtftPrediction(double predicted_seconds, double measured_seconds) {
    if (predicted_seconds > 0 && measured_seconds > 0) {
      ttft_prediction_.Observe(predicted_seconds / measured_seconds);
    }
  }
  // How many that histogram holds, and their sum.
  std::pair<uint64_t, double> TtftPredictions() const;
  // pdserve_request_rejected_total{reason}: a request refused without running.
  void RecordRejected(const std::string& reason) {
    rejected_.Add({{"reason", reason}}).Increment();
  }
  // How many were refused for `reason` so far (the planner counts admission's refusals).
  double Rejected(const std::string& reason) { return rejected_.Add({{"reason", reason}}).Value(); }
  // pdserve_requests_resumed_total{reason}: a stream under way started again on other workers
  // (reason preempted or worker_failed).
  void RecordResumed(const std::string& reason) { resumed_.Add({{"reason", reason}}).Increment(); }
  // pdserve_external_requests_total{upstream,reason}: attempts sent to an external upstream
  // (reason predicted_wait: admission predicted a TTFT objective miss; queue_wait: it waited in
  // the queue until it would miss its objective by waiting on; cheapest: the upstream's
  // price was below the self-hosted workers' recent cost for its tokens; retry: another upstream
  // failed the request first); pdserve_external_request_errors_total{upstream}: those that failed.
  void RecordExternal(const std::string& upstream, const std::string& reason) {
    external_.Add({{"upstream", upstream}, {"reason", reason}}).Increment();
    if (reason == "predicted_wait" || reason == "queue_wait") {
      overflowed_.fetch_add(1, std::memory_order_relaxed);
    }
  }
  // Requests that overflowed to an upstream for a predicted or imminent miss so far: demand
  // the self-hosted workers refused, which the planner counts with admission's refusals.
  int64_t Overflowed() const { return overflowed_.load(std::memory_order_relaxed); }
  void RecordExternalError(const std::string& upstream) {
    external_errors_.Add({{"upstream", upstream}}).Increment();
  }
  // pdserve_overflow_deferred_total: requests that could have overflowed for a predicted miss
  // but waited for a burst worker due within their TTFT objective instead.
  void RecordOverflowDeferred() { overflow_deferred_.Increment(); }
  // pdserve_planner_desired_workers{pool,class} and pdserve_planner_decisions_total{pool,
  // direction,reason}: what the planner wants and how often it changed its mind, by the rule
  // (planner::Decision::cause); pdserve_planner_actuations_total{pool,result}: act mode's calls
  // to its actuator (result ok or error).
  void SetPlannerDesired(const std::string& pool, CapacityClass capacity_class, int n) {
    planner_desired_.Add({{"pool", pool}, {"class", std::string(ToString(capacity_class))}}).Set(n);
  }
  void RecordPlannerDecision(const std::string& pool, const std::string& direction,
                             const std::string& reason) {
    planner_decisions_.Add({{"pool", pool}, {"direction", direction}, {"reason", reason}})
        .Increment();
  }
  void RecordPlannerActuation(const std::string& pool, bool ok) {
    planner_actuations_.Add({{"pool", pool}, {"result", ok ? "ok" : "error"}}).Increment();
  }

  // The exposition text, with the worker gauges refreshed from `workers` and the waiting gauge
  // set to `waiting` (requests in the admission queue).
  // `upstreams` (null: none configured) sets pdserve_external_upstream_available; `ledger` (null:
  // none) the ledger writer's pdserve_ledger_* figures (ledger/ledger_writer.h).
  std::string Scrape(const router::WorkerRegistry& workers, size_t waiting,
                     const router::ExternalUpstreams* upstreams = nullptr,
                     const ledger::LedgerWriter* ledger = nullptr);

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Histogram& ttft_;
  prometheus::Histogram& itl_;
  prometheus::Histogram& e2e_;
  prometheus::Counter& prompt_tokens_;
  prometheus::Counter& generation_tokens_;
  prometheus::Family<prometheus::Counter>& success_;
  prometheus::Counter& failed_;
  prometheus::Gauge& running_;
  prometheus::Family<prometheus::Gauge>& workers_;
  prometheus::Family<prometheus::Gauge>& prefix_index_blocks_;
  prometheus::Gauge& prefix_index_resyncs_;
  prometheus::Family<prometheus::Counter>& cost_;
  prometheus::Gauge& waiting_;
  prometheus::Histogram& queue_time_;
  prometheus::Histogram& ttft_prediction_;
  prometheus::Family<prometheus::Gauge>& upstream_available_;
  prometheus::Family<prometheus::Histogram>& own_time_;
  prometheus::Histogram& own_request_;
  prometheus::Histogram& own_first_token_;
  prometheus::Histogram& own_total_;
  prometheus::Family<prometheus::Counter>& rejected_;
  prometheus::Family<prometheus::Counter>& resumed_;
  prometheus::Family<prometheus::Counter>& external_;
  prometheus::Family<prometheus::Counter>& external_errors_;
  prometheus::Counter& overflow_deferred_;
  prometheus::Family<prometheus::Gauge>& planner_desired_;
  prometheus::Family<prometheus::Counter>& planner_decisions_;
  prometheus::Family<prometheus::Counter>& planner_actuations_;
  prometheus::Gauge& ledger_buffered_;
  prometheus::Family<prometheus::Counter>& ledger_rows_;
  prometheus::Counter& ledger_full_waits_;
  prometheus::Counter& ledger_failed_batches_;
  std::atomic<int64_t> started_prompt_tokens_{0};
  std::atomic<int64_t> overflowed_{0};
  mutable std::mutex recent_itl_mu_;
  double recent_itl_ = 0;                                // guarded by recent_itl_mu_
  std::chrono::steady_clock::time_point recent_itl_at_;  // guarded by recent_itl_mu_
};

}  // namespace pdserve::gateway
