// For the end-to-end tests: what a running gateway and its workers report, read from the
// gateway's /health and /metrics and a worker's own /metrics, and waits on it.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "tests/e2e/curl.h"
#include "tests/e2e/pdserve_process.h"

namespace pdserve::testing {

// The gateway's /health worker_load entries (each worker's latest load report); `key`: the API
// key a gateway with keys needs before it shows them.
inline nlohmann::json WorkerLoad(int port, const std::string& key = "") {
  auto h = key.empty() ? Curl(port, "/health")
                       : RunCurl(
                             "curl -s --max-time 10 -w '\\n%{http_code}' -H 'Authorization: "
                             "Bearer " +
                             key + "' http://127.0.0.1:" + std::to_string(port) + "/health");
  if (h.status != 200) return nlohmann::json::array();
  auto j = nlohmann::json::parse(h.body, nullptr, false);
  if (j.is_discarded() || !j.contains("worker_load")) return nlohmann::json::array();
  return j["worker_load"];
}

// The sum of one field over the workers in /health (e.g. "running"); -1 when there are none.
inline int SumOverWorkers(int port, const std::string& field) {
  auto load = WorkerLoad(port);
  if (load.empty()) return -1;
  int sum = 0;
  for (const auto& w : load) sum += w.value(field, 0);
  return sum;
}

// A gauge or counter's value from the gateway's /metrics ("name" or "name{labels}"); -1 if absent.
inline double MetricValue(int port, const std::string& name) {
  const std::string text = Curl(port, "/metrics").body;
  size_t pos = 0;
  while ((pos = text.find(name + " ", pos)) != std::string::npos) {
    if (pos == 0 || text[pos - 1] == '\n') return std::atof(text.c_str() + pos + name.size() + 1);
    pos += name.size();
  }
  return -1;
}

// The sum of a metric over all its label sets on the gateway's /metrics (e.g. every
// finished_reason of pdserve_request_success_total); 0 if absent.
inline double MetricSum(int port, const std::string& name) {
  const std::string text = Curl(port, "/metrics").body;
  double sum = 0;
  size_t pos = 0;
  while ((pos = text.find(name, pos)) != std::string::npos) {
    const bool line_start = pos == 0 || text[pos - 1] == '\n';
    pos += name.size();
    if (!line_start || pos >= text.size() || (text[pos] != ' ' && text[pos] != '{')) continue;
    const size_t value = text.find(' ', text[pos] == '{' ? text.find('}', pos) : pos);
    if (value != std::string::npos) sum += std::atof(text.c_str() + value + 1);
  }
  return sum;
}

// A metric (gauge or counter) from a worker's own /metrics, the worker started with
// --metrics-port 0 and logging to `log_path` (its port is in its log); -1 when it cannot be read.
inline double WorkerMetric(const std::string& log_path, const std::string& name) {
  const std::string log = ReadLog(log_path);
  const std::string marker = "metrics on http://127.0.0.1:";
  const size_t at = log.find(marker);
  if (at == std::string::npos) return -1;
  const int port = std::atoi(log.c_str() + at + marker.size());
  const std::string text = Curl(port, "/metrics").body;
  for (size_t pos = 0; (pos = text.find(name + "{", pos)) != std::string::npos; ++pos) {
    if (pos != 0 && text[pos - 1] != '\n') continue;
    const size_t value = text.find("} ", pos);
    if (value != std::string::npos) return std::atof(text.c_str() + value + 2);
  }
  return -1;
}

// Waits (up to 10 s) until the worker logging to `log_path` reports no used KV pages on its
// /metrics (its heartbeats refresh the gauge).
inline void ExpectPagesReturnToZero(const std::string& log_path) {
  double used = -1;
  for (int i = 0; i < 100 && used != 0; ++i) {
    used = WorkerMetric(log_path, "pdserve_kv_pages_used");
    if (used != 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(used, 0) << log_path << ":\n" << ReadLog(log_path).substr(0, 3000);
}

// Waits (up to 10 s) until the gateway on `http_port` has committed every ledger row it took:
// a request's rows are queued before its response is sent, so after the responses a test has,
// their rows are in the ledger once this returns.
inline void WaitForLedgerCommitted(int http_port) {
  double buffered = -1;
  for (int i = 0; i < 200 && buffered != 0; ++i) {
    buffered = MetricValue(http_port, "pdserve_ledger_buffered_rows");
    if (buffered != 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(buffered, 0) << "the gateway on port " << http_port
                         << " has not committed its ledger rows in 10 s";
}

// Waits up to `timeout` until `n` workers have registered and sent a load report.
inline bool WaitForWorkerLoad(int http_port, size_t n, std::chrono::seconds timeout,
                              const std::string& key = "") {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    if (WorkerLoad(http_port, key).size() == n) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

}  // namespace pdserve::testing
