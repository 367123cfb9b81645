// `pdserve gateway`, `pdserve prefill`, `pdserve decode` (--role both: colocated) and
// `pdserve up`: the serving processes. `up` runs a gateway and workers as child processes of its
// own on localhost and starts again a worker that exits.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/signal_set.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include <spdlog/spdlog.h>

#include "app/actuator_flags.h"
#include "app/commands.h"
#include "common/logging.h"
#include "decode_pool/worker.h"
#include "gateway/gateway_server.h"
#include "model/model_maker.h"
#include "planner/local_processes.h"
#include "prefill_pool/prefill_worker.h"

namespace pdserve::app {

std::string ModelOrBuiltin(const char* command, const std::string& dir) {
  if (!dir.empty()) return dir;
  auto builtin = model::EnsureBuiltinModel();
  if (!builtin.ok()) Fail(command, builtin.status());
  return *builtin;
}

void ParseGatewayAddress(const char* command, const std::string& address, std::string* host,
                         uint16_t* port) {
  const auto colon = address.rfind(':');
  const int p = colon == std::string::npos ? 0 : std::atoi(address.c_str() + colon + 1);
  if (p <= 0 || p > 65535) Fail(command, InvalidArgument("--gateway must be host:port"));
  *host = address.substr(0, colon);
  *port = static_cast<uint16_t>(p);
}

namespace {

// GET `path` from this host's `port` within a second: the body of a 200 answer, or nullopt.
std::optional<std::string> HttpGet(int port, const std::string& path) {
  namespace beast = boost::beast;
  namespace http = beast::http;
  try {
    boost::asio::io_context io;
    beast::tcp_stream stream(io);
    stream.expires_after(std::chrono::seconds(1));
    stream.connect(boost::asio::ip::tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"),
                                                  static_cast<uint16_t>(port)));
    http::request<http::empty_body> request(http::verb::get, path, 11);
    request.set(http::field::host, "127.0.0.1");
    http::write(stream, request);
    beast::flat_buffer buffer;
    http::response<http::string_body> response;
    http::read(stream, buffer, response);
    if (response.result() != http::status::ok) return std::nullopt;
    return response.body();
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// Whether the gateway on this host's `port` answers GET /ready with 200 (within a second).
bool GatewayReady(int port) { return HttpGet(port, "/ready").has_value(); }

// The burst workers the gateway's planner wants for `pool`, from its /metrics text; -1 if absent.
int DesiredBurst(const std::string& metrics, const std::string& pool) {
  const std::string series =
      "pdserve_planner_desired_workers{class=\"burst\",pool=\"" + pool + "\"} ";
  const size_t at = metrics.find(series);
  return at == std::string::npos ? -1 : std::atoi(metrics.c_str() + at + series.size());
}

constexpr const char* kKvCongestionHelp =
    "TCP congestion control of KV connections: auto (the host's, but cubic or reno where the host "
    "runs bbr, which paces bursty KV transfers well below the link), default (the host's), or a "
    "name";

struct PlannerFlags {
  std::string mode = "off";
  std::string prefill = "1:4", decode = "1:4";  // MIN:MAX workers
  double interval_s = 5;
  int budget = 0;
  int64_t itl_slo_ms = 100;
  int up_cooldown_s = 30, down_hold_s = 120;
  int burst_idle_s = 0;
  double burst_cold_start_s = 0;
  ActuatorFlags actuator;
};

// "MIN:MAX" workers as the planner's limits: MIN reserved, up to MAX - MIN burst.
// "N" or "MIN:MAX" workers: how many numbers it held (0: neither form); *max = *min for "N".
int ScanWorkerRange(const std::string& text, int* min, int* max) {
  char tail = 0;
  const int n = std::sscanf(text.c_str(), "%d:%d%c", min, max, &tail);
  if (n == 1) *max = *min;
  return n == 1 || n == 2 ? n : 0;
}

planner::PoolLimits ParsePoolLimits(const std::string& flag, const std::string& text) {
  int min = -1, max = -1;
  if (ScanWorkerRange(text, &min, &max) != 2 || min < 0 || max < min || max > 4096) {
    Fail("gateway", InvalidArgument(flag + " must be MIN:MAX workers with 0 <= MIN <= MAX, got '" +
                                    text + "'"));
  }
  return {min, max - min};
}

std::shared_ptr<gateway::PlannerAdvisorOptions> PlannerOptionsFrom(const PlannerFlags& f,
                                                                   int64_t ttft_slo_ms) {
  auto o = std::make_shared<gateway::PlannerAdvisorOptions>();
  o->prefill = ParsePoolLimits("--planner-prefill", f.prefill);
  o->decode = ParsePoolLimits("--planner-decode", f.decode);
  o->interval = std::chrono::milliseconds(std::llround(f.interval_s * 1000));
  o->planner.worker_budget = f.budget;
  o->planner.ttft_slo_s = ttft_slo_ms > 0 ? ttft_slo_ms / 1000.0 : 2.0;
  o->planner.itl_slo_s = f.itl_slo_ms / 1000.0;
  o->planner.up_cooldown = std::chrono::seconds(f.up_cooldown_s);
  o->planner.down_hold = std::chrono::seconds(f.down_hold_s);
  o->planner.burst_idle = std::chrono::seconds(f.burst_idle_s);
  if (f.mode == "act") {
    auto actuator = MakeActuator(f.actuator);
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

void RunGateway(gateway::GatewayOptions o, const std::string& ready_file) {
  InitLogging("gateway", "info");
  o.model_dir = ModelOrBuiltin("gateway", o.model_dir);
  auto server = gateway::GatewayServer::Start(o);
  if (!server.ok()) Fail("gateway", server.status());
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

// Runs a worker (decode_pool::Worker or prefill_pool::PrefillWorker) until it drains (SIGINT,
// SIGTERM) or loses its gateway.
template <typename W, typename Options>
void RunWorker(const char* command, Options o) {
  InitLogging(command, "info");
  o.model_dir = ModelOrBuiltin(command, o.model_dir);
  auto worker = W::Create(o);
  if (!worker.ok()) Fail(command, worker.status());
  if ((*worker)->metrics_port()) {
    spdlog::info("metrics on http://127.0.0.1:{}/metrics", (*worker)->metrics_port());
  }
  boost::asio::io_context signals_io;
  boost::asio::signal_set signals(signals_io, SIGINT, SIGTERM);
  signals.async_wait([&](auto, int) { (*worker)->Drain(); });
  std::thread t([&] { signals_io.run(); });
  Status s = (*worker)->Run();
  signals_io.stop();
  t.join();
  if (!s.ok()) Fail(command, s);
}

struct UpFlags {
  std::string model_dir;
  uint16_t port = 8000;
  std::string prefill = "1";  // N, or MIN:MAX with --autoscale
  std::string decode = "1";
  int colocated = 0;
  int threads = 0;             // per worker; 0: the machine's cores shared among the workers
  std::string dtype = "auto";  // every worker's, so prefill and decode compute alike
  std::string ledger = "pdserve-ledger.sqlite";
  double price_per_gpu_hour = 0;  // passed to every worker
  bool no_auth = true;
  bool autoscale = false;
  double burst_price_per_gpu_hour = 0;
  int kv_pages = 0;  // decode and colocated workers' pools (0: their default)
  int up_cooldown_s = 30, down_hold_s = 120;
  int burst_idle_s = 0;
};

// A pool's size for `up`: "N" workers, or with --autoscale "MIN:MAX" (MIN reserved, at least 1).
struct PoolSize {
  int min = 0, max = 0;
};
PoolSize ParsePoolSize(const char* flag, const std::string& text, bool autoscale) {
  int min = -1, max = -1;
  const int n = ScanWorkerRange(text, &min, &max);
  if (n == 1 && min >= 0 && min <= 64) return {min, min};
  if (n == 2 && autoscale && min >= 0 && max >= 1 && max >= min && max <= 64) return {min, max};
  Fail("up",
       InvalidArgument(std::string(flag) +
                       (autoscale ? " must be N or MIN:MAX workers with 0 <= MIN <= MAX, 1 <= MAX "
                                    "<= 64"
                                  : " must be a number of workers (MIN:MAX needs --autoscale)") +
                       ", got '" + text + "'"));
  return {};
}

void RunUp(const UpFlags& f) {
  const PoolSize prefill = ParsePoolSize("--prefill", f.prefill, f.autoscale);
  const PoolSize decode = ParsePoolSize("--decode", f.decode, f.autoscale);
  if (f.colocated == 0 && !f.autoscale && (prefill.min == 0 || decode.min == 0)) {
    Fail("up", InvalidArgument("need --prefill and --decode of at least 1, or --colocated"));
  }
  // With a floor of 0 a pool starts empty: its planner starts burst workers when requests wait.
  const bool from_zero = f.colocated == 0 && (prefill.min == 0 || decode.min == 0);
  const std::string model_dir = ModelOrBuiltin("up", f.model_dir);
  const std::string ready = std::filesystem::temp_directory_path() /
                            ("pdserve-up-" + std::to_string(::getpid()) + ".json");
  std::filesystem::remove(ready);
  // SIGINT and SIGTERM are waited for (sigtimedwait), not handled; children start with them
  // unblocked (planner::LocalProcesses).
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGINT);
  sigaddset(&mask, SIGTERM);
  sigprocmask(SIG_BLOCK, &mask, nullptr);
  planner::LocalProcesses children;
  auto stop_all = [&](int code) {
    children.StopAll();
    std::filesystem::remove(ready);
    if (code) throw CLI::RuntimeError(code);
  };
  auto start = [&](const std::string& name, const std::vector<std::string>& args, bool supervised) {
    if (auto pid = children.Start(name, args, supervised); !pid.ok()) {
      std::cerr << "pdserve up: could not start " << name << ": " << pid.status().ToString()
                << "\n";
      stop_all(1);
    }
  };
  std::vector<std::string> gateway{"pdserve",      "gateway", "--model",
                                   model_dir,      "--port",  std::to_string(f.port),
                                   "--ready-file", ready};
  if (!f.ledger.empty()) gateway.insert(gateway.end(), {"--ledger", f.ledger});
  if (f.autoscale) {
    gateway.insert(
        gateway.end(),
        {"--planner", "advise", "--planner-interval", "1", "--planner-prefill",
         std::to_string(prefill.min) + ":" + std::to_string(prefill.max), "--planner-decode",
         std::to_string(decode.min) + ":" + std::to_string(decode.max), "--planner-up-cooldown",
         std::to_string(f.up_cooldown_s), "--planner-down-hold", std::to_string(f.down_hold_s),
         "--burst-idle-seconds", std::to_string(f.burst_idle_s)});
  }
  start("gateway", gateway, /*supervised=*/false);
  nlohmann::json ports;
  for (int i = 0; i < 600 && ports.is_null(); ++i) {
    if (!children.Poll().empty()) {
      std::filesystem::remove(ready);
      Fail("up", Unavailable("the gateway exited during start-up"));
    }
    std::ifstream in(ready);
    if (in) ports = nlohmann::json::parse(in, nullptr, false);
    if (ports.is_discarded()) ports = nullptr;
    if (ports.is_null()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (ports.is_null()) {
    std::cerr << "pdserve up: the gateway did not start within 30 s\n";
    stop_all(1);
  }
  const std::string control = "127.0.0.1:" + std::to_string(ports["control_port"].get<int>());
  const int workers = prefill.min + decode.min + f.colocated;
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const std::string threads =
      std::to_string(f.threads > 0 ? f.threads : std::max(1, cores / std::max(1, workers)));
  // A worker's command line: every worker gets the same flags (the same dtype, so prefill and
  // decode compute alike) but its class and price.
  auto worker_args = [&](const std::string& pool, const std::string& capacity_class) {
    std::vector<std::string> args = {"pdserve", pool == "prefill" ? "prefill" : "decode"};
    if (pool != "prefill")
      args.insert(args.end(), {"--role", pool == "decode" ? "decode" : "both"});
    if (pool != "prefill" && f.kv_pages > 0) {
      args.insert(args.end(), {"--kv-pages", std::to_string(f.kv_pages)});
    }
    const double price =
        capacity_class == "burst" ? f.burst_price_per_gpu_hour : f.price_per_gpu_hour;
    args.insert(args.end(), {"--model", model_dir, "--gateway", control, "--threads", threads,
                             "--dtype", f.dtype, "--capacity-class", capacity_class,
                             "--price-per-gpu-hour", std::to_string(price)});
    return args;
  };
  // Workers are supervised: one that exits is started again (with backoff), the gateway and the
  // other workers going on meanwhile.
  auto start_workers = [&](const std::string& pool, int count) {
    for (int i = 0; i < count; ++i) {
      start(pool + "-" + std::to_string(i + 1), worker_args(pool, "reserved"), true);
    }
  };
  start_workers("prefill", prefill.min);
  start_workers("decode", decode.min);
  start_workers("colocated", f.colocated);
  const int http = ports["http_port"].get<int>();
  const std::string model = ports["model"].get<std::string>();
  // "Up" means a request sent now is served: wait until the workers registered (the gateway's
  // queue holds requests sent before that, so nothing sent early is lost either). A child that
  // exits before then is a start-up failure (a bad flag, a model that does not load): stop.
  if (from_zero) {
    std::cout << "pdserve up: the gateway listens on http://127.0.0.1:" << http
              << "; a pool starts with no worker, so requests wait for the burst workers its "
                 "planner starts for them"
              << std::endl;
  } else {
    std::cout << "pdserve up: the gateway listens on http://127.0.0.1:" << http << "; waiting for "
              << workers << " worker(s) to load '" << model
              << "' and register (requests sent meanwhile wait for them)" << std::endl;
  }
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::minutes(10);
  while (!from_zero && !GatewayReady(http)) {
    for (const auto& e : children.Poll()) {
      std::cerr << "pdserve up: " << e.name << " (pid " << e.pid << ") "
                << planner::DescribeExit(e.wait_status) << " during start-up; stopping\n";
      stop_all(1);
    }
    if (std::chrono::steady_clock::now() > give_up) {
      std::cerr << "pdserve up: the workers did not register within 10 minutes; stopping\n";
      stop_all(1);
    }
    timespec pause{0, 100'000'000};
    if (sigtimedwait(&mask, nullptr, &pause) > 0) {
      std::cout << "pdserve up: stopping\n";
      return stop_all(0);
    }
  }
  std::cout
      << "pdserve is up: http://127.0.0.1:" << http << "/v1 serving '" << model << "' with "
      << prefill.min << " prefill, " << decode.min << " decode and " << f.colocated
      << " colocated worker(s)"
      << (f.autoscale ? ", up to " + std::to_string(prefill.max) + " and " +
                            std::to_string(decode.max) + " with burst workers as the planner asks"
                      : std::string())
      << ". Ctrl-C stops it.\n"
      << (f.ledger.empty() ? std::string()
                           : "  costs go to " + f.ledger + ": pdserve report --ledger " + f.ledger +
                                 " --prices PRICES.json\n")
      << "  curl http://127.0.0.1:" << http
      << "/v1/chat/completions -H 'Content-Type: application/json' -d '{\"model\": \"" << model
      << "\", \"messages\": [{\"role\": \"user\", \"content\": \"Hello\"}], \"max_tokens\": 16}'\n"
      << std::flush;
  // With --autoscale, the burst workers the gateway's planner wants: started as it asks for
  // them, drained (SIGTERM) the newest first as it lets them go.
  std::map<std::string, std::vector<std::string>> burst;  // by pool, oldest first
  int burst_started = 0;
  auto reconcile = [&] {
    const auto metrics = HttpGet(http, "/metrics");
    if (!metrics) return;
    for (const std::string pool : {"prefill", "decode"}) {
      const int want = DesiredBurst(*metrics, pool);
      if (want < 0) continue;
      std::vector<std::string>& running = burst[pool];
      if (static_cast<int>(running.size()) < want) {
        const std::string name = pool + "-burst-" + std::to_string(++burst_started);
        std::cerr << "pdserve up: the planner wants " << want << " burst " << pool
                  << " worker(s): starting " << name << "\n";
        start(name, worker_args(pool, "burst"), true);
        running.push_back(name);
      } else if (static_cast<int>(running.size()) > want) {
        std::cerr << "pdserve up: the planner wants " << want << " burst " << pool
                  << " worker(s): draining " << running.back() << "\n";
        children.Stop(running.back());
        running.pop_back();
      }
    }
  };
  // Supervise until a signal: a worker that exits is started again; the gateway exiting ends
  // `up` (its workers would have nowhere to register).
  for (int turn = 0;; ++turn) {
    if (f.autoscale && turn % 5 == 0) reconcile();  // every second
    std::vector<std::string> restarted;
    for (const auto& e : children.Poll(planner::LocalProcesses::Clock::now(), &restarted)) {
      if (e.name != "gateway" && !e.will_restart) {  // a burst worker drained as asked
        std::cerr << "pdserve up: " << e.name << " (pid " << e.pid << ") "
                  << planner::DescribeExit(e.wait_status) << "\n";
        continue;
      }
      if (!e.will_restart) {
        std::cerr << "pdserve up: the " << e.name << " (pid " << e.pid << ") "
                  << planner::DescribeExit(e.wait_status) << "; stopping\n";
        stop_all(1);
      }
      std::cerr << "pdserve up: " << e.name << " (pid " << e.pid << ") "
                << planner::DescribeExit(e.wait_status) << "; starting it again in "
                << e.backoff.count() << " ms\n";
    }
    for (const auto& name : restarted) {
      std::cerr << "pdserve up: started " << name << " again (pid " << children.PidOf(name)
                << ")\n";
    }
    timespec timeout{0, 200'000'000};
    if (sigtimedwait(&mask, nullptr, &timeout) > 0) break;
  }
  std::cout << "pdserve up: stopping\n";
  stop_all(0);
}

}  // namespace

void AddServeCommands(CLI::App& app) {
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
  gw->add_option("--api-keys", g->api_keys_file, "API keys file (sha256:HEX tenant per line)");
  gw->add_flag("--no-auth", *no_auth,
               "Serve without API keys (the default when --api-keys is not given)");
  gw->add_option("--io-threads", g->io_threads, "Network threads")->check(CLI::Range(1, 64));
  gw->add_option("--ledger", g->ledger_path,
                 "Record every request attempt's cost in this SQLite file");
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
  gw->add_option("--ready-file", *ready, "Write the bound ports here as JSON once listening");
  auto planner = std::make_shared<PlannerFlags>();
  gw->add_option("--planner", planner->mode,
                 "off; advise: decide each pool's workers every interval, log why and export "
                 "pdserve_planner_desired_workers for something else to act on (pdserve up, "
                 "KEDA); act: and start and stop burst workers through --actuator")
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
  gw->callback([g, ready, no_auth, queue_timeout, ttft_slo_ms, planner, external] {
    ApplyExternalFlags(*external, g.get());
    if (*no_auth) g->api_keys_file.clear();
    g->queue_timeout = std::chrono::milliseconds(static_cast<int64_t>(*queue_timeout * 1000));
    g->ttft_slo = std::chrono::milliseconds(*ttft_slo_ms);
    if (planner->mode != "act" && !planner->actuator.kind.empty()) {
      Fail("gateway", InvalidArgument("--actuator acts only with --planner act"));
    }
    if (planner->mode != "off") g->planner = PlannerOptionsFrom(*planner, *ttft_slo_ms);
    g->burst_cold_start = std::chrono::duration<double>(planner->burst_cold_start_s);
    RunGateway(*g, *ready);
  });

  // Flags every worker kind shares.
  auto common_flags = [](CLI::App* cmd, auto* o, std::string* gateway_address) {
    cmd->add_option("--model", o->model_dir, "Model directory (default: built-in tiny)");
    cmd->add_option("--gateway", *gateway_address, "The gateway's control address host:port")
        ->required();
    cmd->add_option("--capacity-class", o->identity.capacity_class, "reserved or burst")
        ->check(CLI::IsMember({"reserved", "burst"}));
    cmd->add_option("--price-per-gpu-hour", o->identity.price_per_gpu_hour, "USD per GPU-hour")
        ->check(CLI::NonNegativeNumber);
    cmd->add_option("--gpus", o->identity.gpu_count, "GPUs this worker counts as")
        ->check(CLI::PositiveNumber);
    cmd->add_option("--zone", o->identity.zone, "Zone (KV crossing zones is charged egress)");
    cmd->add_option("--cluster-token", o->identity.cluster_token, "Token the gateway expects");
    cmd->add_option("--device", o->engine.device,
                    "cpu, cuda:N for GPU N (builds with CUDA), or sim:PROFILE (simulated: a "
                    "performance profile's step times, no arithmetic)");
    cmd->add_option("--threads", o->engine.threads, "CPU threads (0: all)");
    AddDtypeOption(*cmd, o->engine.dtype);
    cmd->add_option("--page-size", o->engine.page_size, "Tokens per KV page")
        ->check(CLI::Range(1, 1024));
    cmd->add_option("--kv-memory-mb", o->engine.kv_memory_mb, "KV pool size");
    cmd->add_option("--kv-pages", o->engine.num_pages,
                    "KV pool size in pages (0: as many as --kv-memory-mb holds)")
        ->check(CLI::NonNegativeNumber);
    cmd->add_option("--max-batch-tokens", o->engine.max_batch_tokens, "Tokens per engine step")
        ->check(CLI::Range(1, 1 << 20));
    cmd->add_option("--kv-lookahead-tokens", o->engine.kv_lookahead_tokens,
                    "A request starts with KV pages for its prompt plus this many tokens and "
                    "grows as it decodes, preempting the newest requests when the pool runs "
                    "out (0: pages for prompt plus max_tokens up front, never preempted)")
        ->check(CLI::Range(0, 1 << 20));
    cmd->add_option("--max-running", o->engine.max_running, "Sequences in a batch at once")
        ->check(CLI::Range(1, 1 << 16));
    cmd->add_option("--metrics-port", o->metrics_port,
                    "Prometheus /metrics port (0: any free port, -1: off)");
    cmd->add_option("--step-log", o->step_log,
                    "Append each engine step's work and wall time to FILE, a JSON line each "
                    "(for pdserve profile calibrate)");
    cmd->add_option("--gateway-reconnect-seconds", o->gateway_reconnect_seconds,
                    "When the gateway is lost, keep dialling it this long, then exit (0: exit "
                    "at once); the requests it had sent are dropped, and the worker registers "
                    "anew")
        ->check(CLI::NonNegativeNumber);
    cmd->add_option_function<double>(
           "--gateway-silence-seconds",
           [o](double seconds) {
             o->gateway.silence_timeout = std::chrono::milliseconds(std::llround(seconds * 1000));
           },
           "Treat the gateway as lost when nothing arrives from it for this long (it sends a "
           "heartbeat every second; default 10; 0: never)")
        ->check(CLI::Range(0.0, 86400.0));
  };

  auto w = std::make_shared<decode_pool::WorkerOptions>();
  w->role = "decode";
  auto decode_gateway = std::make_shared<std::string>();
  CLI::App* dec = app.add_subcommand(
      "decode", "A decode worker (or, with --role both, a colocated one) that dials the gateway");
  common_flags(dec, w.get(), decode_gateway.get());
  dec->add_option("--role", w->role, "decode, or both (prefill and decode in this process)")
      ->check(CLI::IsMember({"decode", "both"}));
  dec->add_option("--kv-bind", w->kv_bind_address, "Address the KV listener binds");
  dec->add_option("--kv-host", w->kv_advertise_host, "Address prefill workers dial for KV");
  dec->add_option("--kv-port", w->kv_port, "KV listener port (0: any free port)");
  dec->add_option("--kv-tcp-congestion", w->kv_tcp_congestion, kKvCongestionHelp);
  dec->add_flag("--kv-offload-checksums", w->kv_offload_checksums,
                "TCP KV: check payload CRCs on worker threads beside the listener's I/O thread "
                "(where this process may run on two CPUs or more)");
  dec->callback([w, decode_gateway] {
    ParseGatewayAddress("decode", *decode_gateway, &w->gateway.host, &w->gateway.port);
    RunWorker<decode_pool::Worker>("decode", *w);
  });

  auto pw = std::make_shared<prefill_pool::PrefillWorkerOptions>();
  auto prefill_gateway = std::make_shared<std::string>();
  CLI::App* pre = app.add_subcommand(
      "prefill", "A prefill worker: prompts in, KV pushed to decode workers, first token out");
  common_flags(pre, pw.get(), prefill_gateway.get());
  pre->add_option("--kv-path", pw->kv_path,
                  "How KV reaches decode workers: tcp (cpu), nccl (GPU to GPU), ipc (both on one "
                  "GPU); auto: tcp on the cpu, and on a GPU ipc to a decode worker on the same GPU "
                  "and machine, nccl to others")
      ->check(CLI::IsMember({"auto", "tcp", "nccl", "ipc"}));
  pre->add_option("--kv-tcp-congestion", pw->kv_tcp_congestion, kKvCongestionHelp);
  pre->add_option("--kv-splice-min-bytes", pw->kv_splice_min_bytes,
                  "TCP: layer pushes of at least this many bytes go into the socket by reference "
                  "(vmsplice), smaller ones by copy; 0: all by reference");
  pre->add_option("--kv-splice-max-bytes", pw->kv_splice_max_bytes,
                  "TCP: ... and of at most this many; larger ones by copy");
  pre->add_flag("--kv-offload-checksums", pw->kv_offload_checksums,
                "TCP KV: compute chunk CRCs on worker threads beside the writing one (where "
                "this process may run on two CPUs or more)");
  pre->add_option("--debug-layer-delay-ms", pw->debug_layer_delay_ms,
                  "Tests only: pause after pushing each layer's KV")
      ->group("");  // hidden
  pre->callback([pw, prefill_gateway] {
    ParseGatewayAddress("prefill", *prefill_gateway, &pw->gateway.host, &pw->gateway.port);
    RunWorker<prefill_pool::PrefillWorker>("prefill", *pw);
  });

  auto u = std::make_shared<UpFlags>();
  CLI::App* up = app.add_subcommand(
      "up", "A gateway, prefill and decode workers on localhost, in one command");
  up->add_option("--model", u->model_dir,
                 "Model directory (default: built-in tiny, made if absent)");
  up->add_option("--port", u->port, "HTTP port");
  up->add_option("--prefill", u->prefill,
                 "Prefill workers: N, or MIN:MAX with --autoscale (MIN reserved, the rest burst)")
      ->capture_default_str();
  up->add_option("--decode", u->decode, "Decode workers: N, or MIN:MAX with --autoscale")
      ->capture_default_str();
  up->add_flag("--autoscale", u->autoscale,
               "Run the planner in the gateway and start and drain burst workers as it asks");
  up->add_option("--burst-price-per-gpu-hour", u->burst_price_per_gpu_hour,
                 "USD per GPU-hour of burst workers, for the ledger")
      ->check(CLI::NonNegativeNumber);
  up->add_option("--kv-pages", u->kv_pages,
                 "KV pages of each decode or colocated worker (0: default)")
      ->check(CLI::NonNegativeNumber);
  up->add_option("--planner-up-cooldown", u->up_cooldown_s,
                 "With --autoscale: seconds between a pool's steps up")
      ->check(CLI::Range(0, 86400));
  up->add_option("--planner-down-hold", u->down_hold_s,
                 "With --autoscale: seconds a pool must be comfortable before a burst worker goes")
      ->check(CLI::Range(1, 86400));
  up->add_option("--burst-idle-seconds", u->burst_idle_s,
                 "With --autoscale: a burst worker with no request this long goes at once (0: "
                 "never)")
      ->check(CLI::Range(0, 86400));
  up->add_option("--colocated", u->colocated, "Colocated workers (prefill and decode in one)")
      ->check(CLI::Range(0, 64));
  up->add_option("--threads", u->threads, "CPU threads per worker (0: the cores shared out)");
  AddDtypeOption(*up, u->dtype);  // passed to every worker
  up->add_option("--ledger", u->ledger, "Cost ledger (SQLite); empty: none");
  up->add_flag("--no-auth", u->no_auth, "Serve without API keys (always so for up)");
  up->add_option("--price-per-gpu-hour", u->price_per_gpu_hour,
                 "USD per GPU-hour of every worker, for the ledger")
      ->check(CLI::NonNegativeNumber);
  up->callback([u] { RunUp(*u); });
}

}  // namespace pdserve::app
