// WorkerMetrics: a worker's Prometheus endpoint (`/metrics`, served by MetricsHttpServer)
// with the names and meanings of docs/architecture.md, "Metrics": KV pages used, requests running
// and waiting, prompt and generation tokens, KV transfer bytes and seconds, busy (step) seconds,
// preemptions, prefix cache queries and hits (tokens) and cached pages. Every series carries the
// worker's role. Created by the prefill and decode workers at start-up. Thread-safe (prometheus-cpp
// metrics are atomic): any thread may record.
#pragma once

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <cstdint>
#include <memory>
#include <string>

#include "common/status.h"
#include "worker/metrics_http_server.h"

namespace pdserve::worker {

class WorkerMetrics {
 public:
  // Serves on bind_address:port (0: chosen by the OS; read it back with port()).
  static Result<std::unique_ptr<WorkerMetrics>> Start(const std::string& bind_address, int port,
                                                      const std::string& role);
  uint16_t port() const { return port_; }

  void SetLoad(int kv_pages_used, int running, int waiting);
  void AddStep(double seconds, int prompt_tokens, int generation_tokens);
  void AddKvTransfer(int64_t bytes, double seconds);
  void AddPreemptions(int64_t n);
  // The engine's prefix cache counters (totals since it started, in prompt tokens) and its cached
  // pages now. One thread only (the engine's): it keeps the totals last seen.
  void SetPrefixCache(int64_t queries, int64_t hits, int cached_pages);

 private:
  WorkerMetrics() = default;

  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<MetricsHttpServer> server_;
  uint16_t port_ = 0;
  prometheus::Gauge* kv_pages_used_ = nullptr;
  prometheus::Gauge* running_ = nullptr;
  prometheus::Gauge* waiting_ = nullptr;
  prometheus::Counter* prompt_tokens_ = nullptr;
  prometheus::Counter* generation_tokens_ = nullptr;
  prometheus::Counter* busy_seconds_ = nullptr;
  prometheus::Counter* preemptions_ = nullptr;
  prometheus::Counter* kv_bytes_ = nullptr;
  prometheus::Histogram* kv_seconds_ = nullptr;
  prometheus::Counter* prefix_queries_ = nullptr;
  prometheus::Counter* prefix_hits_ = nullptr;
  prometheus::Gauge* cached_pages_ = nullptr;
  int64_t seen_queries_ = 0, seen_hits_ = 0;  // SetPrefixCache's thread
};

}  // namespace pdserve::worker
