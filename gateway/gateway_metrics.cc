#include "gateway/gateway_metrics.h"

#include <prometheus/text_serializer.h>

#include <map>

#include "router/external_upstream.h"
#include "router/worker_registry.h"

namespace pdserve::gateway {

namespace pm = prometheus;

namespace {
// vLLM's buckets (vllm/engine/metrics.py).
const pm::Histogram::BucketBoundaries kTtftBuckets = {
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25,  0.5,   0.75,
    1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};
const pm::Histogram::BucketBoundaries kItlBuckets = {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,
                                                     0.3,  0.4,   0.5,  0.75,  1.0, 2.5,  5.0,
                                                     7.5,  10.0,  20.0, 40.0,  80.0};
const pm::Histogram::BucketBoundaries kE2eBuckets = {
    0.3,  0.5,  0.8,  1.0,  1.5,   2.0,   2.5,   5.0,   10.0,   15.0,  20.0,
    30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};
// The gateway's own time: 5 us to about 95 ms, each bound 1.25 times the last: fine enough for a
// median and a p99 of what takes tens of microseconds on a quiet gateway, milliseconds on a busy.
const pm::Histogram::BucketBoundaries kOwnBuckets = [] {
  pm::Histogram::BucketBoundaries b;
  for (double bound = 5e-6; bound < 0.1; bound *= 1.25) b.push_back(bound);
  return b;
}();
// Predicted over measured: 1/4 to 4, finer near 1.
const pm::Histogram::BucketBoundaries kPredictionRatioBuckets = {
    0.25, 0.5, 0.67, 0.8, 0.9, 0.95, 1.0, 1.05, 1.1, 1.25, 1.5, 2.0, 4.0};
}  // namespace

GatewayMetrics::GatewayMetrics()
    : registry_(std::make_shared<pm::Registry>()),
      ttft_(pm::BuildHistogram()
                .Name("pdserve_time_to_first_token_seconds")
                .Help("Histogram of time to first token in seconds.")
                .Register(*registry_)
                .Add({}, kTtftBuckets)),
      itl_(pm::BuildHistogram()
               .Name("pdserve_inter_token_latency_seconds")
               .Help("Histogram of inter-token latency in seconds.")
               .Register(*registry_)
               .Add({}, kItlBuckets)),
      e2e_(pm::BuildHistogram()
               .Name("pdserve_e2e_request_latency_seconds")
               .Help("Histogram of end to end request latency in seconds.")
               .Register(*registry_)
               .Add({}, kE2eBuckets)),
      prompt_tokens_(pm::BuildCounter()
                         .Name("pdserve_prompt_tokens_total")
                         .Help("Number of prefill tokens processed.")
                         .Register(*registry_)
                         .Add({})),
      generation_tokens_(pm::BuildCounter()
                             .Name("pdserve_generation_tokens_total")
                             .Help("Number of generation tokens processed.")
                             .Register(*registry_)
                             .Add({})),
      success_(pm::BuildCounter()
                   .Name("pdserve_request_success_total")
                   .Help("Count of successfully processed requests.")
                   .Register(*registry_)),
      failed_(pm::BuildCounter()
                  .Name("pdserve_request_failure_total")
                  .Help("Count of requests that ended in an error after they were accepted.")
                  .Register(*registry_)
                  .Add({})),
      running_(pm::BuildGauge()
                   .Name("pdserve_num_requests_running")
                   .Help("Number of requests the gateway is serving now.")
                   .Register(*registry_)
                   .Add({})),
      workers_(pm::BuildGauge()
                   .Name("pdserve_workers")
                   .Help("Live workers by pool and capacity class.")
                   .Register(*registry_)),
      prefix_index_blocks_(pm::BuildGauge()
                               .Name("pdserve_router_prefix_index_blocks")
                               .Help("KV blocks the router believes the workers hold, summed over "
                                     "workers: by their KV events (source=events) or by where "
                                     "it routed prompts (source=routed).")
                               .Register(*registry_)),
      prefix_index_resyncs_(pm::BuildGauge()
                                .Name("pdserve_router_prefix_index_resyncs")
                                .Help("Full block lists the router asked workers for since it "
                                      "started: one per worker that joined, one per gap in its "
                                      "events.")
                                .Register(*registry_)
                                .Add({})),
      cost_(pm::BuildCounter()
                .Name("pdserve_cost_usd_total")
                .Help("Compute cost of request attempts in USD, by tenant and capacity class.")
                .Register(*registry_)),
      waiting_(pm::BuildGauge()
                   .Name("pdserve_num_requests_waiting")
                   .Help("Number of requests waiting in the admission queue for a worker.")
                   .Register(*registry_)
                   .Add({})),
      queue_time_(pm::BuildHistogram()
                      .Name("pdserve_request_queue_time_seconds")
                      .Help("Histogram of time requests spent in the admission queue in seconds.")
                      .Register(*registry_)
                      .Add({}, kE2eBuckets)),
      ttft_prediction_(pm::BuildHistogram()
                           .Name("pdserve_ttft_predicted_over_measured")
                           .Help("Histogram of admission's predicted time to first token over the "
                                 "measured one, for requests admitted to workers with a "
                                 "prediction (1: exact; above 1: predicted too long).")
                           .Register(*registry_)
                           .Add({}, kPredictionRatioBuckets)),
      upstream_available_(pm::BuildGauge()
                              .Name("pdserve_external_upstream_available")
                              .Help("1 while an external upstream takes requests, 0 while it "
                                    "cools down after failures, by upstream.")
                              .Register(*registry_)),
      own_time_(pm::BuildHistogram()
                    .Name("pdserve_gateway_own_seconds")
                    .Help("Histogram of the gateway's own share of time to first token in "
                          "seconds, by part: request (the request read to its first message to "
                          "a worker, less the admission queue), first_token (the first text read "
                          "from a worker to the client's socket), total (both, a stream's first "
                          "attempt).")
                    .Register(*registry_)),
      own_request_(own_time_.Add({{"part", "request"}}, kOwnBuckets)),
      own_first_token_(own_time_.Add({{"part", "first_token"}}, kOwnBuckets)),
      own_total_(own_time_.Add({{"part", "total"}}, kOwnBuckets)),
      rejected_(
          pm::BuildCounter()
              .Name("pdserve_request_rejected_total")
              .Help("Requests refused without running, by reason: predicted_wait (their "
                    "TTFT objective was out of reach), queue_timeout, rate_limit, kv_capacity (no "
                    "worker could ever hold its KV), no_allowed_route (out of reach, and no "
                    "external upstream it may use could take it).")
              .Register(*registry_)),
      resumed_(pm::BuildCounter()
                   .Name("pdserve_requests_resumed_total")
                   .Help("Streams under way started again on other workers, their tokens so far "
                         "prefilled again, by reason: preempted (the decode worker ran out of KV "
                         "pages) or worker_failed (a worker was lost, froze or failed).")
                   .Register(*registry_)),
      external_(pm::BuildCounter()
                    .Name("pdserve_external_requests_total")
                    .Help("Request attempts sent to an external upstream, by upstream and reason "
                          "(predicted_wait: admission predicted a TTFT objective miss; "
                          "queue_wait: it waited until waiting on would miss it; cheapest: "
                          "cheaper there than on self-hosted workers lately; retry: another "
                          "upstream failed the request first).")
                    .Register(*registry_)),
      external_errors_(pm::BuildCounter()
                           .Name("pdserve_external_request_errors_total")
                           .Help("Request attempts on an external upstream that failed, by "
                                 "upstream.")
                           .Register(*registry_)),
      overflow_deferred_(pm::BuildCounter()
                             .Name("pdserve_overflow_deferred_total")
                             .Help("Requests that could have overflowed to an external upstream "
                                   "for a predicted TTFT miss but waited for a burst worker due "
                                   "within their objective.")
                             .Register(*registry_)
                             .Add({})),
      planner_desired_(pm::BuildGauge()
                           .Name("pdserve_planner_desired_workers")
                           .Help("Workers the planner wants per pool (prefill, decode) and class "
                                 "(reserved: the floor; burst: above it).")
                           .Register(*registry_)),
      planner_decisions_(
          pm::BuildCounter()
              .Name("pdserve_planner_decisions_total")
              .Help("The planner's changes of a pool's desired workers, by "
                    "direction (up, down) and reason (no_worker, ttft, refused, kv_use, "
                    "itl; comfortable, burst_idle).")
              .Register(*registry_)),
      planner_actuations_(pm::BuildCounter()
                              .Name("pdserve_planner_actuations_total")
                              .Help("Act mode's calls to its actuator (Slurm, Kubernetes, a "
                                    "command) to set a pool's burst workers, by result (ok, "
                                    "error).")
                              .Register(*registry_)),
      ledger_buffered_(pm::BuildGauge()
                           .Name("pdserve_ledger_buffered_rows")
                           .Help("Ledger rows (attempts and worker periods) accepted and not "
                                 "yet committed: what kill -9 of the gateway would lose.")
                           .Register(*registry_)
                           .Add({})),
      ledger_rows_(pm::BuildCounter()
                       .Name("pdserve_ledger_rows_total")
                       .Help("Ledger rows by outcome: written, duplicate (already recorded), "
                             "refused (the store refused the row; logged whole).")
                       .Register(*registry_)),
      ledger_full_waits_(pm::BuildCounter()
                             .Name("pdserve_ledger_buffer_full_waits_total")
                             .Help("Rows that waited for room in a full ledger buffer (the "
                                   "gateway slowed to the ledger's rate).")
                             .Register(*registry_)
                             .Add({})),
      ledger_failed_batches_(pm::BuildCounter()
                                 .Name("pdserve_ledger_failed_batches_total")
                                 .Help("Ledger batches that failed and were kept to try again.")
                                 .Register(*registry_)
                                 .Add({})) {}

int64_t GatewayMetrics::Started() const {
  return static_cast<int64_t>(queue_time_.Collect().histogram.sample_count);
}

std::pair<uint64_t, double> GatewayMetrics::TtftPredictions() const {
  const pm::ClientMetric::Histogram h = ttft_prediction_.Collect().histogram;
  return {h.sample_count, h.sample_sum};
}

void GatewayMetrics::RecordCost(const std::string& tenant, const ledger::AttemptRow& row) {
  const std::pair<CapacityClass, double> parts[] = {
      {row.prefill_worker.capacity_class, row.cost.prefill_compute_usd},
      {row.decode_worker.capacity_class, row.cost.decode_compute_usd},
      {CapacityClass::kApi, row.cost.api_tokens_usd}};
  for (const auto& [capacity_class, usd] : parts) {
    if (usd > 0) {
      cost_.Add({{"tenant", tenant}, {"class", std::string(ToString(capacity_class))}})
          .Increment(usd);
    }
  }
}

void GatewayMetrics::RecordInterToken(double seconds) {
  itl_.Observe(seconds);
  std::lock_guard lock(recent_itl_mu_);
  recent_itl_ = recent_itl_ > 0 ? 0.95 * recent_itl_ + 0.05 * seconds : seconds;
  recent_itl_at_ = std::chrono::steady_clock::now();
}

double GatewayMetrics::RecentInterToken() const {
  std::lock_guard lock(recent_itl_mu_);
  if (std::chrono::steady_clock::now() - recent_itl_at_ > std::chrono::seconds(10)) return 0;
  return recent_itl_;
}

void GatewayMetrics::RecordFinished(const std::string& finished_reason, double e2e_seconds,
                                    int prompt_tokens, int generation_tokens) {
  success_.Add({{"finished_reason", finished_reason}}).Increment();
  e2e_.Observe(e2e_seconds);
  prompt_tokens_.Increment(prompt_tokens);
  generation_tokens_.Increment(generation_tokens);
}

std::string GatewayMetrics::Scrape(const router::WorkerRegistry& workers, size_t waiting,
                                   const router::ExternalUpstreams* upstreams,
                                   const ledger::LedgerWriter* ledger) {
  if (ledger) {
    const ledger::LedgerWriterStats s = ledger->stats();
    ledger_buffered_.Set(static_cast<double>(s.buffered + s.buffered_periods));
    const auto catch_up = [](pm::Counter& counter, uint64_t total) {
      if (static_cast<double>(total) > counter.Value()) {
        counter.Increment(static_cast<double>(total) - counter.Value());
      }
    };
    catch_up(ledger_rows_.Add({{"outcome", "written"}}), s.rows_written);
    catch_up(ledger_rows_.Add({{"outcome", "duplicate"}}), s.duplicates);
    catch_up(ledger_rows_.Add({{"outcome", "refused"}}), s.rows_refused);
    catch_up(ledger_full_waits_, s.full_waits);
    catch_up(ledger_failed_batches_, s.failed_batches);
  }
  if (upstreams) {
    for (size_t i = 0; i < upstreams->configs().size(); ++i) {
      upstream_available_.Add({{"upstream", upstreams->configs()[i].name}})
          .Set(upstreams->Available(static_cast<int>(i)) ? 1 : 0);
    }
  }
  waiting_.Set(static_cast<double>(waiting));
  std::map<std::pair<std::string, CapacityClass>, int> counts;
  for (const auto& w : workers.Workers()) ++counts[{w.role, w.capacity_class}];
  for (const std::string pool : {"prefill", "decode", "both"}) {
    for (const CapacityClass cls : {CapacityClass::kReserved, CapacityClass::kBurst}) {
      workers_.Add({{"pool", pool}, {"class", std::string(ToString(cls))}})
          .Set(counts[{pool, cls}]);
    }
  }
  const router::PrefixIndexStats prefixes = workers.PrefixStats();
  prefix_index_blocks_.Add({{"source", "events"}})
      .Set(static_cast<double>(prefixes.published_blocks));
  prefix_index_blocks_.Add({{"source", "routed"}}).Set(static_cast<double>(prefixes.routed_blocks));
  prefix_index_resyncs_.Set(static_cast<double>(prefixes.resyncs));
  return pm::TextSerializer().Serialize(registry_->Collect());
}

}  // namespace pdserve::gateway
