#include "worker/worker_metrics.h"

#include <algorithm>

namespace pdserve::worker {

Result<std::unique_ptr<WorkerMetrics>> WorkerMetrics::Start(const std::string& bind_address,
                                                            int port, const std::string& role) {
  auto m = std::unique_ptr<WorkerMetrics>(new WorkerMetrics());
  m->registry_ = std::make_shared<prometheus::Registry>();
  const prometheus::Labels labels{{"role", role}};
  auto gauge = [&](const char* name, const char* help) {
    return &prometheus::BuildGauge().Name(name).Help(help).Register(*m->registry_).Add(labels);
  };
  auto counter = [&](const char* name, const char* help) {
    return &prometheus::BuildCounter().Name(name).Help(help).Register(*m->registry_).Add(labels);
  };
  m->kv_pages_used_ = gauge("pdserve_kv_pages_used", "KV cache pages in use.");
  m->running_ = gauge("pdserve_num_requests_running", "Sequences in the running batch.");
  m->waiting_ = gauge("pdserve_num_requests_waiting", "Sequences waiting to be scheduled.");
  m->prompt_tokens_ = counter("pdserve_prompt_tokens_total", "Prompt tokens computed.");
  m->generation_tokens_ = counter("pdserve_generation_tokens_total", "Tokens generated.");
  m->busy_seconds_ = counter("pdserve_busy_seconds_total", "Wall time spent in engine steps.");
  m->preemptions_ =
      counter("pdserve_num_preemptions_total", "Sequences preempted for want of KV pages.");
  m->kv_bytes_ = counter("pdserve_kv_transfer_bytes_total", "KV bytes pushed to decode workers.");
  m->prefix_queries_ =
      counter("pdserve_prefix_cache_queries_total", "Prompt tokens looked up in the prefix cache.");
  m->prefix_hits_ =
      counter("pdserve_prefix_cache_hits_total", "Prompt tokens found in the prefix cache.");
  m->cached_pages_ =
      gauge("pdserve_prefix_cache_pages", "KV pages held by the prefix cache (used or idle).");
  m->kv_seconds_ = &prometheus::BuildHistogram()
                        .Name("pdserve_kv_transfer_seconds")
                        .Help("From a request's first token to its last KV chunk's ack.")
                        .Register(*m->registry_)
                        .Add(labels, prometheus::Histogram::BucketBoundaries{
                                         0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                         1.0, 2.5, 5.0, 10.0});
  PDSERVE_ASSIGN_OR_RETURN(m->server_, MetricsHttpServer::Start(bind_address, port, m->registry_));
  m->port_ = m->server_->port();
  return m;
}

void WorkerMetrics::SetLoad(int kv_pages_used, int running, int waiting) {
  kv_pages_used_->Set(kv_pages_used);
  running_->Set(running);
  waiting_->Set(waiting);
}

void WorkerMetrics::AddStep(double seconds, int prompt_tokens, int generation_tokens) {
  busy_seconds_->Increment(seconds);
  prompt_tokens_->Increment(prompt_tokens);
  generation_tokens_->Increment(generation_tokens);
}

void WorkerMetrics::AddPreemptions(int64_t n) { preemptions_->Increment(static_cast<double>(n)); }

void WorkerMetrics::SetPrefixCache(int64_t queries, int64_t hits, int cached_pages) {
  prefix_queries_->Increment(static_cast<double>(std::max<int64_t>(0, queries - seen_queries_)));
  prefix_hits_->Increment(static_cast<double>(std::max<int64_t>(0, hits - seen_hits_)));
  seen_queries_ = queries;
  seen_hits_ = hits;
  cached_pages_->Set(cached_pages);
}

void WorkerMetrics::AddKvTransfer(int64_t bytes, double seconds) {
  kv_bytes_->Increment(static_cast<double>(bytes));
  kv_seconds_->Observe(seconds);
}

}  // namespace pdserve::worker
