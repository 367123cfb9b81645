#include "gateway/gateway_server.h"

#include <spdlog/spdlog.h>

#include <filesystem>

#include "gateway/http_session.h"
#include "gateway/ledger_rows.h"
#include "ledger/postgres_budgets.h"
#include "ledger/postgres_leadership.h"
#include "ledger/price_sheet.h"
#include "model/model_config.h"
#include "router/routers.h"

namespace pdserve::gateway {

namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

// The external upstreams, priced from the price sheet, and the TLS context they share.
Status StartUpstreams(const GatewayOptions& o, GatewayServer::Shared* shared) {
  if (o.external.empty()) return Status::Ok();
  if (o.prices_file.empty()) {
    return InvalidArgument(
        "--external needs --prices: a price sheet (LiteLLM's format) that "
        "prices each upstream's model");
  }
  PDSERVE_ASSIGN_OR_RETURN(ledger::PriceSheet sheet, ledger::PriceSheet::Load(o.prices_file));
  std::vector<router::UpstreamConfig> configs = o.external;
  for (router::UpstreamConfig& c : configs) {
    auto price = sheet.Select({c.model.empty() ? c.name : c.model});
    if (!price.ok() && !c.model.empty()) price = sheet.Select({c.name});
    if (!price.ok()) {
      return NotFound(
          "upstream '" + c.name + "': " + o.prices_file + " has no entry named " +
          (c.model.empty() ? "'" + c.name + "'" : "'" + c.model + "' or '" + c.name + "'") +
          " (--external-model NAME=MODEL names the sheet's model)");
    }
    c.input_cost_per_token = (*price)[0].input_cost_per_token;
    c.output_cost_per_token = (*price)[0].output_cost_per_token;
    c.cached_input_cost_per_token = (*price)[0].cache_read_cost_per_token;
    spdlog::info("external upstream '{}' at {} (model '{}'): ${}/1M input, ${}/1M output tokens",
                 c.name, c.url, c.model, c.input_cost_per_token * 1e6,
                 c.output_cost_per_token * 1e6);
  }
  PDSERVE_ASSIGN_OR_RETURN(shared->upstream_tls, MakeUpstreamTlsContext(o.external_ca_file));
  shared->upstreams =
      std::make_shared<router::ExternalUpstreams>(std::move(configs), o.external_health);
  shared->rates = std::make_shared<router::SelfHostedRates>();
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<GatewayServer>> GatewayServer::Start(const GatewayOptions& o) {
  auto server = std::unique_ptr<GatewayServer>(new GatewayServer());
  auto shared = std::make_shared<Shared>();
  PDSERVE_ASSIGN_OR_RETURN(shared->tokenizer, tokenizer::Tokenizer::Load(o.model_dir));
  PDSERVE_ASSIGN_OR_RETURN(shared->parse.sampling, LoadSamplingDefaults(o.model_dir));
  shared->parse.vocab_size = shared->tokenizer->vocab_size();
  shared->parse.tool_call_format =
      DetectToolCallFormat(shared->tokenizer->chat_template().source());
  shared->max_context = o.max_context;
  if (auto config = model::ModelConfig::Load(o.model_dir); config.ok()) {
    shared->max_context = config->max_seq_len;
    server->model_id_ = config->model_id;
  }
  if (!o.model_id.empty()) server->model_id_ = o.model_id;
  if (server->model_id_.empty()) {
    server->model_id_ = std::filesystem::path(o.model_dir).lexically_normal().filename().string();
  }
  shared->model_id = server->model_id_;
  shared->max_body_bytes = o.max_body_bytes;
  shared->metrics = std::make_shared<GatewayMetrics>();
  if (!o.api_keys_file.empty()) {
    PDSERVE_ASSIGN_OR_RETURN(shared->keys, ApiKeys::Load(o.api_keys_file));
    if (!shared->keys->limits().empty() || !shared->keys->default_limits().unlimited()) {
      // With a PostgreSQL ledger the gateways sharing it share their tenants' budgets too.
      TenantQuota::Lease lease;
      if (ledger::IsPostgresLocation(o.ledger_path)) {
        PDSERVE_ASSIGN_OR_RETURN(std::shared_ptr<ledger::PostgresBudgets> budgets,
                                 ledger::PostgresBudgets::Open(o.ledger_path));
        lease = [budgets](const std::string& tenant, const std::string& kind, double per_minute,
                          double want) { return budgets->Take(tenant, kind, per_minute, want); };
      }
      shared->quota =
          std::make_shared<TenantQuota>(shared->keys->limits(), shared->keys->default_limits(),
                                        &std::chrono::steady_clock::now, std::move(lease));
      const TenantLimits& d = shared->keys->default_limits();
      spdlog::info("rate limits for {} tenant(s); others: rpm={} tpm={} (0: none){}",
                   shared->keys->limits().size(), d.requests_per_minute, d.tokens_per_minute,
                   ledger::IsPostgresLocation(o.ledger_path)
                       ? "; shared with the gateways on the same PostgreSQL ledger"
                       : "");
    }
  }
  shared->prompts = std::make_shared<PromptBuilder>(shared->tokenizer, shared->max_context,
                                                    shared->quota, shared->metrics);
  router::RegistryOptions registry_options;
  registry_options.cluster_token = o.cluster_token;
  PDSERVE_ASSIGN_OR_RETURN(std::unique_ptr<router::Router> router,
                           router::MakeRouter(o.routing, o.pair_routing));
  registry_options.router = std::move(router);
  // Burst workers the planner asks for are billed from the ask (gateway/burst_asks.h).
  std::shared_ptr<BurstAsks> asks;
  if (o.planner) {
    asks = std::make_shared<BurstAsks>(o.burst_cold_start);
    shared->burst_asks = asks;
    registry_options.billed_from = [asks](const proto::Register& r) {
      auto capacity_class = ParseWorkerCapacityClass(r.capacity_class());
      return capacity_class.ok() ? asks->Claim(r.role(), *capacity_class) : std::nullopt;
    };
  }
  registry_options.model_id = server->model_id_;
  if (!o.ledger_path.empty()) {
    PDSERVE_ASSIGN_OR_RETURN(std::shared_ptr<ledger::Ledger> store,
                             ledger::Ledger::Open({o.ledger_path, o.ledger_store_text}));
    ledger::LedgerWriterOptions writer;
    writer.capacity_rows = o.ledger_buffer_rows;
    shared->ledger = std::make_shared<ledger::LedgerWriter>(std::move(store), writer);
    server->ledger_ = shared->ledger;
    shared->ledger_store_text = o.ledger_store_text;
    shared->egress_usd_per_gb = o.egress_usd_per_gb;
    // This run's worker periods: unique against earlier runs in the same ledger file.
    const std::string run_id =
        std::to_string(std::chrono::duration_cast<std::chrono::nanoseconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count());
    registry_options.on_period = [ledger = shared->ledger,
                                  run_id](const router::WorkerPeriodUpdate& u) {
      ledger->UpsertPeriod(ToWorkerPeriod(run_id, u));
    };
    spdlog::info("recording costs in {}", shared->ledger->ledger().path());
  }
  // The registry pumps the admission queue when room may have come; the queue reads the
  // registry's prompt rate. Each holds the other weakly.
  auto admission = std::make_shared<std::weak_ptr<router::AdmissionQueue>>();
  registry_options.on_capacity = [admission] {
    if (auto queue = admission->lock()) queue->Pump();
  };
  server->registry_ = std::make_shared<router::WorkerRegistry>(server->io_, registry_options);
  shared->registry = server->registry_;
  shared->workers = std::make_shared<WorkerAttempts>(server->registry_);
  shared->admission = std::make_shared<router::AdmissionQueue>(
      [registry = std::weak_ptr<router::WorkerRegistry>(server->registry_)] {
        auto r = registry.lock();
        return r ? r->Prefill() : router::PrefillCapacity{};
      });
  *admission = shared->admission;
  PDSERVE_RETURN_IF_ERROR(StartUpstreams(o, shared.get()));
  shared->queue_timeout = o.queue_timeout;
  shared->fault_delay = o.fault_delay;
  shared->ttft_slo = o.ttft_slo;
  if (o.cluster_token.empty()) {
    boost::system::error_code bad;
    const auto control = asio::ip::make_address(o.control_host, bad);
    if (bad) return InvalidArgument("bad control address '" + o.control_host + "'");
    if (!control.is_loopback()) {
      return InvalidArgument("the control port on " + o.control_host +
                             " is reachable beyond this machine: set --cluster-token, which every "
                             "worker must present to register");
    }
  }
  PDSERVE_RETURN_IF_ERROR(server->registry_->Listen(o.control_host, o.control_port));
  server->shared_ = shared;

  boost::system::error_code ec;
  auto address = asio::ip::make_address(o.host, ec);
  if (ec) return InvalidArgument("bad listen address '" + o.host + "'");
  server->acceptor_ = std::make_unique<tcp::acceptor>(server->io_);
  server->accept_backoff_ =
      std::make_unique<AcceptBackoff>(server->io_.get_executor(), "the HTTP listener");
  tcp::endpoint endpoint(address, o.http_port);
  server->acceptor_->open(endpoint.protocol(), ec);
  if (!ec) server->acceptor_->set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) server->acceptor_->bind(endpoint, ec);
  if (!ec) server->acceptor_->listen(asio::socket_base::max_listen_connections, ec);
  if (ec)
    return Unavailable("cannot listen on " + o.host + ":" + std::to_string(o.http_port) + ": " +
                       ec.message());
  server->http_port_ = server->acceptor_->local_endpoint().port();
  server->Accept();
  server->admission_timer_ = std::make_unique<asio::steady_timer>(server->io_);
  server->TickAdmission();
  if (o.planner) {
    PlannerAdvisorOptions planner = *o.planner;
    // Gateways sharing a PostgreSQL ledger: the one holding its planner lock acts, the others
    // advise.
    if (planner.actuator && !planner.advise && ledger::IsPostgresLocation(o.ledger_path)) {
      auto leadership = std::make_shared<ledger::PostgresLeadership>(o.ledger_path);
      planner.may_act = [leadership] { return leadership->Lead(); };
    }
    server->planner_ = std::make_unique<PlannerAdvisor>(planner, server->registry_,
                                                        shared->admission, shared->metrics, asks);
    server->planner_interval_ = o.planner->interval;
    server->planner_timer_ = std::make_unique<asio::steady_timer>(server->io_);
    server->TickPlanner();
  }
  for (int i = 0; i < std::max(1, o.io_threads); ++i) {
    server->threads_.emplace_back([s = server.get()] { s->io_.run(); });
  }
  spdlog::info("serving model '{}' on http://{}:{} (workers dial port {})", server->model_id_,
               o.host, server->http_port_, server->registry_->port());
  return server;
}

void GatewayServer::Accept() {
  acceptor_->async_accept(asio::make_strand(io_),
                          [this](boost::system::error_code ec, tcp::socket socket) {
                            if (ec == asio::error::operation_aborted || !acceptor_->is_open())
                              return;
                            if (!ec) {
                              // Streams are small writes in a row (the SSE header, then a chunk
                              // a token): with Nagle each waits for the client's delayed ACK.
                              boost::system::error_code ignored;
                              socket.set_option(tcp::no_delay(true), ignored);
                              std::make_shared<HttpSession>(std::move(socket), shared_)->Run();
                            }
                            accept_backoff_->Next(ec, [this] { Accept(); });
                          });
}

void GatewayServer::TickAdmission() {
  shared_->admission->Pump();
  admission_timer_->expires_after(std::chrono::milliseconds(20));
  admission_timer_->async_wait([this](boost::system::error_code ec) {
    if (!ec) TickAdmission();
  });
}

void GatewayServer::TickPlanner() {
  planner_timer_->expires_after(planner_interval_);
  planner_timer_->async_wait([this](boost::system::error_code ec) {
    if (ec) return;
    planner_->Tick(std::chrono::steady_clock::now());
    TickPlanner();
  });
}

void GatewayServer::Stop() {
  asio::post(io_, [this] {
    boost::system::error_code ignored;
    acceptor_->close(ignored);
    admission_timer_->cancel();
    if (planner_timer_) planner_timer_->cancel();
  });
  registry_->Stop();
  io_.stop();
}

void GatewayServer::Wait() {
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
  // The rows of the calls that ended are committed before the process exits.
  if (ledger_) ledger_->Close();
}

GatewayServer::~GatewayServer() {
  io_.stop();
  Wait();
}

}  // namespace pdserve::gateway
