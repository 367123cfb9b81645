// `pdserve gateway`: the OpenAI-compatible front, the worker registry and, with --planner, the
// planner that decides each pool's workers (and with --actuator starts and drains burst ones).
#include <atomic>
#include <boost/asio/signal_set.hpp>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "app/actuator_flags.h"
#include "app/commands.h"
#include "common/logging.h"
#include "gateway/gateway_server.h"
#include "router/routers.h"

namespace pdserve::app {

namespace {

struct PlannerFlags {
  std::string mode = "off";
  std::string prefill = "1:4", decode = "1:4";  // MIN:MAX workers
  double interval_s = 5;
  int budget = 0;
  int64_t itl_slo_ms = 100;
  int64_t ttft_slo_ms = 0;  // 0: admission's --ttft-slo-ms where set, else 2000
  int up_cooldown_s = 30, down_hold_s = 120;
  int burst_idle_s = 0;
  double burst_cold_start_s = 0;
  ActuatorFlags actuator;
};

// "MIN:MAX" workers as the planner's limits: MIN reserved, up to MAX - MIN burst.
planner::PoolLimits ParsePoolLimits(const std::string& flag, const std::string& text) {
  int min = -1, max = -1;
  if (ScanWorkerRange(text, &min, &max) != 2 || min < 0 || max < min || max > 4096) {
    Fail("gateway", InvalidArgument(flag + " must be MIN:MAX workers with 0 <= MIN <= MAX, got '" +
                                    text + "'"));
  }
  return {min, max - min};
}

// The planner's options from its flags; `local` is what --actuator local needs of this gateway.
std::shared_ptr<gateway::PlannerAdvisorOptions> PlannerOptionsFrom(const PlannerFlags& f,
                                                                   int64_t ttft_slo_ms,
                                                                   const LocalGateway& local) {
  auto o = std::make_shared<gateway::PlannerAdvisorOptions>();
  o->prefill = ParsePoolLimits("--planner-prefill", f.prefill);
  o->decode = ParsePoolLimits("--planner-decode", f.decode);
  o->interval = std::chrono::milliseconds(std::llround(f.interval_s * 1000));
  o->planner.worker_budget = f.budget;
  // The planner's target is its own: an operator may scale at a tighter TTFT than admission
  // refuses at.
  const int64_t planner_ttft_ms = f.ttft_slo_ms > 0 ? f.ttft_slo_ms : ttft_slo_ms;
  o->planner.ttft_slo_s = planner_ttft_ms > 0 ? planner_ttft_ms / 1000.0 : 2.0;
  o->planner.itl_slo_s = f.itl_slo_ms / 1000.0;
  o->planner.up_cooldown = std::chrono::seconds(f.up_cooldown_s);
  o->planner.down_hold = std::chrono::seconds(f.down_hold_s);
  o->planner.burst_idle = std::chrono::seconds(f.burst_idle_s);
  // advise: decide and export; act: and carry out through the actuator. The local actuator
  // follows advice too: it is how `pdserve up --autoscale` has the advice carried out.
  o->advise = f.mode == "advise";
  if (f.mode == "act" || f.actuator.kind == "local") {
    auto actuator = MakeActuator(f.actuator, local);
    if (!actuator.ok()) Fail("gateway", actuator.status());
    o->actuator = *actuator;
  }
  return o;
}

// `pdserve gateway`'s external upstreams (router/external_upstream.h).
struct ExternalFlags {
  std::vector<std::string> externals, models, key_envs;
  double cooldown_s = 30;
};

void AddExternalFlags(CLI::App* gw, ExternalFlags* f, gateway::GatewayOptions* g) {
  gw->add_option("--external", f->externals,
                 "NAME=URL: an OpenAI-compatible upstream (https://..., or http:// for tests) "
                 "where tenants with overflow=overflow in the keys file may go (repeatable)");
  gw->add_option("--external-model", f->models,
                 "NAME=MODEL: the model upstream NAME is asked for (default: the served model "
                 "name)");
  gw->add_option("--external-key-env", f->key_envs,
                 "NAME=VAR: upstream NAME's API key is in environment variable VAR");
  gw->add_option("--prices", g->prices_file,
                 "Price sheet in LiteLLM's format that prices each --external upstream's model");
  gw->add_option("--external-ca-file", g->external_ca_file,
                 "CA certificates (PEM) for https upstreams (default: the system's)");
  gw->add_option("--external-cooldown", f->cooldown_s,
                 "Seconds an upstream that failed more than half its requests in a minute is "
                 "left alone")
      ->check(CLI::Range(1.0, 86400.0))
      ->capture_default_str();
}

void ApplyExternalFlags(const ExternalFlags& f, gateway::GatewayOptions* g) {
  auto configs = router::UpstreamsFromFlags(f.externals, f.models, f.key_envs,
                                            [](const char* name) { return std::getenv(name); });
  if (!configs.ok()) Fail("gateway", configs.status());
  g->external = std::move(configs).value();
  g->external_health.cooldown = std::chrono::seconds(std::llround(f.cooldown_s));
}

// Serves until SIGINT or SIGTERM; `listening` is called once the gateway listens.
void RunGateway(const gateway::GatewayOptions& o, const std::string& ready_file,
                const std::function<void(const gateway::GatewayServer&)>& listening) {
  auto server = gateway::GatewayServer::Start(o);
  if (!server.ok()) Fail("gateway", server.status());
  listening(**server);
  if (!ready_file.empty()) {
    // Written whole then renamed, so a reader never sees half of it.
    const std::string tmp = ready_file + ".tmp";
    std::ofstream(tmp) << nlohmann::json{{"http_port", (*server)->http_port()},
                                         {"control_port", (*server)->control_port()},
                                         {"model", (*server)->model_id()}}
                              .dump();
    std::filesystem::rename(tmp, ready_file);
  }
  boost::asio::io_context signals_io;
  boost::asio::signal_set signals(signals_io, SIGINT, SIGTERM);
  signals.async_wait([&](auto, int) { (*server)->Stop(); });
  std::thread t([&] { signals_io.run(); });
  (*server)->Wait();
  signals_io.stop();
  t.join();
}

}  // namespace

void AddGatewayCommand(CLI::App& app) {
  auto g = std::make_shared<gateway::GatewayOptions>();
  auto ready = std::make_shared<std::string>();
  auto no_auth = std::make_shared<bool>(false);
  CLI::App* gw = app.add_subcommand("gateway", "The OpenAI-compatible front and worker registry");
  gw->add_option("--model", g->model_dir,
                 "Model directory (tokenizer, model id; default: built-in tiny)");
  gw->add_option("--served-model-name", g->model_id,
                 "Model id clients use (default: the directory name)");
  gw->add_option("--host", g->host, "Address the HTTP API listens on");
  gw->add_option("--control-host", g->control_host,
                 "Address workers dial (beyond loopback only with --cluster-token)");
  gw->add_option("--port", g->http_port, "HTTP port (0: any free port)");
  gw->add_option("--control-port", g->control_port, "Port workers dial (0: any free port)");
  gw->add_option("--cluster-token", g->cluster_token, "Workers must present this token");
  gw->add_option("--routing", g->routing,
                 "How requests pick workers: cache-aware (load and prefix caches) or round-robin")
      ->check(CLI::IsMember({"cache-aware", "round-robin"}));
  gw->add_option("--cache-affinity-weight", g->pair_routing.affinity.work_weight,
                 "Cache-aware routing: what a prompt token a prefill worker must compute weighs "
                 "beyond its own first token, against that worker's queue (0: soonest first "
                 "token wins)")
      ->check(CLI::Range(0.0, 1e6));
  gw->add_option("--cache-affinity-queue-steps", g->pair_routing.affinity.queue_steps,
                 "Cache-aware routing: a prefill worker past its step budget still takes a "
                 "prompt for a longer cached prefix within this many steps of queued work (0: "
                 "never)")
      ->check(CLI::Range(0, 1000000));
  auto disaggregation = std::make_shared<std::string>("always");
  gw->add_option("--disaggregation", *disaggregation,
                 "Cache-aware routing with decode workers: always (a prefill worker every time), "
                 "conditional (per request, a decode worker prefills a prompt itself when that "
                 "predicts the sooner first token) or never (decode workers prefill)")
      ->check(CLI::IsMember({"conditional", "always", "never"}));
  gw->add_option("--local-prefill-tokens", g->pair_routing.placement.short_uncached_tokens,
                 "Conditional disaggregation: a prompt of at most this many tokens its decode "
                 "worker lacks is prefilled there")
      ->check(CLI::Range(0, 1 << 30));
  gw->add_option("--api-keys", g->api_keys_file, "API keys file (sha256:HEX tenant per line)");
  gw->add_flag("--no-auth", *no_auth,
               "Serve without API keys (the default when --api-keys is not given)");
  gw->add_option("--io-threads", g->io_threads, "Network threads")->check(CLI::Range(1, 64));
  gw->add_option("--ledger", g->ledger_path,
                 "Record every request attempt's cost in this SQLite file, or in the PostgreSQL "
                 "database of this URI (postgresql://user:password@host:port/db), which several "
                 "gateways may share");
  gw->add_option("--ledger-buffer-rows", g->ledger_buffer_rows,
                 "Rows the ledger buffers before the gateway's calls wait for its writes (what "
                 "kill -9 of the gateway can lose at most)")
      ->check(CLI::Range(1, 10000000));
  gw->add_flag("--ledger-store-text", g->ledger_store_text,
               "Also keep prompt and completion text in the ledger");
  gw->add_option("--egress-usd-per-gb", g->egress_usd_per_gb,
                 "Price of KV bytes moved between zones")
      ->check(CLI::NonNegativeNumber);
  auto queue_timeout = std::make_shared<double>(30);
  auto ttft_slo_ms = std::make_shared<int64_t>(0);
  gw->add_option("--queue-timeout", *queue_timeout,
                 "Seconds a request may wait for a worker before it gets 503 (a request's "
                 "x-pdserve-queue-timeout-ms may shorten it)")
      ->check(CLI::Range(0.001, 86400.0))
      ->capture_default_str();
  gw->add_option("--ttft-slo-ms", *ttft_slo_ms,
                 "Refuse at once (429) a request whose predicted wait exceeds this time to first "
                 "token (0: never; a tenant's ttft_slo_ms or x-pdserve-ttft-slo-ms overrides it)")
      ->check(CLI::NonNegativeNumber);
  auto fault_delay_ms = std::make_shared<double>(0);
  gw->add_option("--fault-delay-ms", *fault_delay_ms,
                 "Fault injection: hold every completion request this long before admission, "
                 "as Envoy's fault filter's fixed delay does (to test clients' timeouts, and "
                 "that scripts/gateway-overhead catches a slow gateway); 0: none")
      ->check(CLI::Range(0.0, 60000.0));
  gw->add_option("--ready-file", *ready, "Write the bound ports here as JSON once listening");
  auto planner = std::make_shared<PlannerFlags>();
  gw->add_option("--planner", planner->mode,
                 "off; advise: decide each pool's workers every interval, log why and export "
                 "pdserve_planner_desired_workers for something else to act on (KEDA, or "
                 "--actuator local: this gateway's own burst workers, as pdserve up --autoscale "
                 "runs it); act: and start and stop burst workers through --actuator")
      ->check(CLI::IsMember({"off", "advise", "act"}))
      ->capture_default_str();
  gw->add_option("--planner-prefill", planner->prefill,
                 "MIN:MAX prefill workers: MIN reserved (the floor), up to MAX with burst ones")
      ->capture_default_str();
  gw->add_option("--planner-decode", planner->decode, "MIN:MAX decode workers, likewise")
      ->capture_default_str();
  gw->add_option("--planner-interval", planner->interval_s, "Seconds between decisions")
      ->check(CLI::Range(0.01, 3600.0))
      ->capture_default_str();
  gw->add_option("--planner-worker-budget", planner->budget,
                 "Workers of both pools together at most (0: none)")
      ->check(CLI::NonNegativeNumber);
  gw->add_option("--planner-up-cooldown", planner->up_cooldown_s,
                 "Seconds after a step up (or down) before a pool steps up again")
      ->check(CLI::Range(0, 86400))
      ->capture_default_str();
  gw->add_option("--planner-down-hold", planner->down_hold_s,
                 "Seconds a pool must be comfortable before one burst worker goes")
      ->check(CLI::Range(1, 86400))
      ->capture_default_str();
  gw->add_option("--planner-ttft-slo-ms", planner->ttft_slo_ms,
                 "The planner adds prefill workers when the predicted time to first token "
                 "exceeds this (default: --ttft-slo-ms where set, else 2000)")
      ->check(CLI::NonNegativeNumber);
  gw->add_option("--itl-slo-ms", planner->itl_slo_ms,
                 "The planner adds decode workers when inter-token latency exceeds this")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  gw->add_option("--burst-idle-seconds", planner->burst_idle_s,
                 "A burst worker that has had no request this long is let go at once (0: never; "
                 "else only after --planner-down-hold of comfort)")
      ->check(CLI::Range(0, 86400));
  gw->add_option("--burst-cold-start-seconds", planner->burst_cold_start_s,
                 "A burst worker's cold start until one is measured: an overflow request waits "
                 "for one due within its TTFT objective (0: none until measured)")
      ->check(CLI::Range(0.0, 86400.0));
  AddActuatorFlags(gw, &planner->actuator);
  auto external = std::make_shared<ExternalFlags>();
  AddExternalFlags(gw, external.get(), g.get());
  gw->callback([g, ready, no_auth, queue_timeout, ttft_slo_ms, fault_delay_ms, planner, external,
                disaggregation] {
    g->fault_delay = std::chrono::microseconds(static_cast<int64_t>(*fault_delay_ms * 1000));
    InitLogging("gateway", "info");
    g->pair_routing.disaggregation = router::ParseDisaggregation(*disaggregation).value();
    ApplyExternalFlags(*external, g.get());
    if (*no_auth) g->api_keys_file.clear();
    g->queue_timeout = std::chrono::milliseconds(static_cast<int64_t>(*queue_timeout * 1000));
    g->ttft_slo = std::chrono::milliseconds(*ttft_slo_ms);
    const std::string& actuator = planner->actuator.kind;
    if (planner->mode == "off" && !actuator.empty()) {
      Fail("gateway", InvalidArgument("--actuator acts only with --planner act (or advise for "
                                      "local)"));
    }
    if (planner->mode == "advise" && !actuator.empty() && actuator != "local") {
      Fail("gateway", InvalidArgument("--actuator " + actuator + " acts only with --planner act"));
    }
    g->model_dir = ModelOrBuiltin("gateway", g->model_dir);
    // Local burst workers dial the control port, known once the gateway listens.
    auto control_port = std::make_shared<std::atomic<int>>(0);
    LocalGateway local;
    local.model_dir = g->model_dir;
    local.cluster_token = g->cluster_token;
    local.control_address = [control_port,
                             host = g->control_host == "0.0.0.0" || g->control_host == "::"
                                        ? std::string("127.0.0.1")
                                        : g->control_host] {
      const int port = control_port->load();
      return port > 0 ? host + ":" + std::to_string(port) : std::string();
    };
    if (planner->mode != "off") g->planner = PlannerOptionsFrom(*planner, *ttft_slo_ms, local);
    g->burst_cold_start = std::chrono::duration<double>(planner->burst_cold_start_s);
    RunGateway(*g, *ready, [&](const gateway::GatewayServer& server) {
      control_port->store(server.control_port());
    });
    // The last hold on the actuator: local burst workers stop now, not when the process ends.
    g->planner.reset();
  });
}

}  // namespace pdserve::app
