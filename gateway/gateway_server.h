// GatewayServer: the `pdserve gateway` process. An HTTP/1.1 front (Boost.Beast, keep-alive)
// serving the OpenAI API (POST /v1/completions, POST /v1/chat/completions, GET /v1/models,
// GET /health) and the worker control port (WorkerRegistry). Owns the tokenizer and the io
// threads. Start() binds both ports (0: chosen by the OS); Stop() may be called from any thread.
#pragma once

#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/accept_backoff.h"
#include "common/status.h"
#include "gateway/api_keys.h"
#include "gateway/burst_asks.h"
#include "gateway/external_call.h"
#include "gateway/gateway_metrics.h"
#include "gateway/openai_request.h"
#include "gateway/planner_advisor.h"
#include "gateway/prompt_builder.h"
#include "gateway/tenant_quota.h"
#include "gateway/worker_attempts.h"
#include "ledger/ledger.h"
#include "ledger/ledger_writer.h"
#include "router/admission_queue.h"
#include "router/external_upstream.h"
#include "router/routers.h"
#include "router/self_hosted_rates.h"
#include "router/worker_registry.h"
#include "tokenizer/tokenizer.h"

namespace pdserve::gateway {

struct GatewayOptions {
  std::string host = "127.0.0.1";  // the HTTP API's address
  uint16_t http_port = 8000;       // 0: chosen by the OS
  // Where workers dial. An address beyond loopback needs a cluster_token: without one, anything
  // that reaches the port could register as a worker and be sent prompts.
  std::string control_host = "127.0.0.1";
  uint16_t control_port = 0;  // 0: chosen by the OS
  std::string model_dir;      // the tokenizer and the served model id come from here
  std::string model_id;       // empty: the model directory's name
  int max_context = 4096;     // prompt + max_tokens limit (the model's context)
  std::string cluster_token;
  // How attempts pick their workers (router/routers.h, MakeRouter): "cache-aware" (the default:
  // load and the workers' prefix caches) or "round-robin" (a plain balancer, for comparison).
  std::string routing = "cache-aware";
  router::PairRouting pair_routing;  // cache-aware routing only
  std::string api_keys_file;         // empty: no authentication
  // The cost ledger: an SQLite file or a PostgreSQL URI (ledger/ledger.h); empty: none. Its rows
  // go through a buffer of ledger_buffer_rows (ledger/ledger_writer.h).
  std::string ledger_path;
  bool ledger_store_text = false;
  size_t ledger_buffer_rows = 10000;
  double egress_usd_per_gb = 0;  // KV bytes crossing zones; tenants' rate limits come from it too
  size_t max_body_bytes = 8 << 20;
  int io_threads = 2;
  // How long a request may wait in the admission queue for a worker before it gets 503 (a
  // request's x-pdserve-queue-timeout-ms may shorten it).
  std::chrono::milliseconds queue_timeout{30000};
  // The TTFT objective past which a predicted wait is refused at once with 429 (0: none); a
  // tenant's ttft_slo_ms in the keys file, or a request's x-pdserve-ttft-slo-ms, overrides it.
  std::chrono::milliseconds ttft_slo{0};
  // The planner (advise: decide and export; act: and carry out through its actuator): null: off.
  std::shared_ptr<PlannerAdvisorOptions> planner;
  // External OpenAI-compatible upstreams, a pool of class api (router/external_upstream.h),
  // where tenants with overflow=overflow may go; each is priced from `prices_file` (LiteLLM's
  // format) by its model's entry, else its name's, which must exist.
  std::vector<router::UpstreamConfig> external;
  std::string prices_file;       // required with `external`
  std::string external_ca_file;  // PEM CAs for https upstreams; "": the system's
  router::UpstreamHealthOptions external_health;
  // The cold start assumed for a pool's burst workers until one is measured (ask to
  // registration); 0: none, so an overflow request waits for no burst worker before one came.
  std::chrono::duration<double> burst_cold_start{0};
  // Fault injection (Envoy's fault filter's fixed delay): every completion request is held this
  // long before admission, its TTFT counting it. 0: none.
  std::chrono::microseconds fault_delay{0};
};

class GatewayServer {
 public:
  static Result<std::unique_ptr<GatewayServer>> Start(const GatewayOptions& options);
  ~GatewayServer();

  uint16_t http_port() const { return http_port_; }
  uint16_t control_port() const { return registry_->port(); }
  const std::string& model_id() const { return model_id_; }
  router::WorkerRegistry& registry() { return *registry_; }
  void Stop();
  void Wait();  // until Stop

  // Per-request context the HTTP sessions read (immutable after Start).
  struct Shared {
    std::shared_ptr<const tokenizer::Tokenizer> tokenizer;
    std::shared_ptr<router::WorkerRegistry> registry;
    std::shared_ptr<WorkerAttempts> workers;  // attempts on the registry's workers
    std::shared_ptr<const ApiKeys> keys;      // null: no authentication
    std::shared_ptr<TenantQuota> quota;       // null: no tenant has a rate limit
    std::shared_ptr<GatewayMetrics> metrics;
    std::shared_ptr<const PromptBuilder> prompts;  // template, tokens, context, quota
    std::shared_ptr<ledger::LedgerWriter> ledger;  // null: no ledger
    std::shared_ptr<router::AdmissionQueue> admission;
    std::chrono::milliseconds queue_timeout{30000}, ttft_slo{0};
    bool ledger_store_text = false;
    double egress_usd_per_gb = 0;
    std::string model_id;
    int max_context;
    size_t max_body_bytes;
    ParseOptions parse;  // the model's sampling defaults (generation_config.json)
    std::shared_ptr<router::ExternalUpstreams> upstreams;  // null: none configured
    std::shared_ptr<boost::asio::ssl::context> upstream_tls;
    std::shared_ptr<router::SelfHostedRates> rates;  // what `cheapest` compares upstreams with
    std::shared_ptr<BurstAsks> burst_asks;           // null: no planner
    std::chrono::microseconds fault_delay{0};        // GatewayOptions::fault_delay
  };

 private:
  GatewayServer() = default;
  void Accept();
  // Every tick: times out queued requests past their deadline and starts those that fit now
  // (the registry also pumps the queue whenever room may have come).
  void TickAdmission();
  // Every planner interval: the planner decides (advise mode).
  void TickPlanner();

  boost::asio::io_context io_;
  std::unique_ptr<boost::asio::ip::tcp::acceptor> acceptor_;
  std::unique_ptr<AcceptBackoff> accept_backoff_;  // the accept handler's
  std::shared_ptr<router::WorkerRegistry> registry_;
  std::unique_ptr<boost::asio::steady_timer> admission_timer_;
  std::unique_ptr<PlannerAdvisor> planner_;  // null: off
  std::chrono::milliseconds planner_interval_{5000};
  std::unique_ptr<boost::asio::steady_timer> planner_timer_;
  std::shared_ptr<const Shared> shared_;
  std::shared_ptr<ledger::LedgerWriter> ledger_;  // null: none; closed (drained) by Wait
  std::string model_id_;
  uint16_t http_port_ = 0;
  std::vector<std::thread> threads_;
};

}  // namespace pdserve::gateway
