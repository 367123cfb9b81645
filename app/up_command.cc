// `pdserve up`: a gateway and workers as child processes of this one, on localhost. It starts
// again a worker that exits, and stops when its gateway does or on SIGINT or SIGTERM. With
// --autoscale the gateway's planner starts and drains burst workers itself, as its own children
// (`--actuator local`, planner/local_actuator.h); `up` supervises the fixed ones.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "app/commands.h"
#include "common/http_client.h"
#include "planner/local_processes.h"

namespace pdserve::app {

namespace {

// "2.00": a price to print.
std::string Dollars(double usd) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f", usd);
  return text;
}

// Whether the gateway on this host's `port` answers GET /ready with 200 (within a second).
bool GatewayReady(int port) {
  const auto r = HttpGet("127.0.0.1", std::to_string(port), "/ready", std::chrono::seconds(1));
  return r.ok() && r->status == 200;
}

// Sample prices (a rented H100 by the hour, committed and on demand), so that the ledger's costs
// are not zero out of the box; `up` says so at start.
constexpr double kSamplePricePerGpuHour = 2.0, kSampleBurstPricePerGpuHour = 3.0;

struct UpFlags {
  std::string model_dir;
  uint16_t port = 8000;
  std::string prefill = "1";  // N, or MIN:MAX with --autoscale
  std::string decode = "1";
  int colocated = 0;
  int threads = 0;             // per worker; 0: the machine's cores shared among the workers
  std::string dtype = "auto";  // every worker's, so prefill and decode compute alike
  std::string ledger = "pdserve-ledger.sqlite";
  // Passed to the workers.
  double price_per_gpu_hour = kSamplePricePerGpuHour;
  bool no_auth = true;
  bool autoscale = false;
  double burst_price_per_gpu_hour = kSampleBurstPricePerGpuHour;
  int kv_pages = 0;  // decode and colocated workers' pools (0: their default)
  int up_cooldown_s = 30, down_hold_s = 120;
  int burst_idle_s = 0;
  int64_t planner_ttft_slo_ms = 2000;
  bool prefix_cache = true;               // passed to every worker
  std::string disaggregation = "always";  // passed to the gateway
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
  // What the ledger's costs rest on, said before anything is priced at it.
  std::cout << "pdserve up: workers are priced at $" << Dollars(f.price_per_gpu_hour)
            << " a GPU-hour"
            << (f.autoscale ? ", burst ones $" + Dollars(f.burst_price_per_gpu_hour)
                            : std::string())
            << ", one GPU each"
            << (f.price_per_gpu_hour == kSamplePricePerGpuHour &&
                        f.burst_price_per_gpu_hour == kSampleBurstPricePerGpuHour
                    ? " (sample prices; set yours with --price-per-gpu-hour"
                      " and --burst-price-per-gpu-hour)"
                    : "")
            << std::endl;
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
  const int workers = prefill.min + decode.min + f.colocated;
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const std::string threads =
      std::to_string(f.threads > 0 ? f.threads : std::max(1, cores / std::max(1, workers)));
  // A worker's flags but its model, gateway and class: every worker gets the same (the same
  // dtype, so prefill and decode compute alike) but its price.
  auto worker_flags = [&](const std::string& pool, const std::string& capacity_class) {
    std::vector<std::string> args;
    if (pool != "prefill")
      args.insert(args.end(), {"--role", pool == "decode" ? "decode" : "both"});
    if (pool != "prefill" && f.kv_pages > 0) {
      args.insert(args.end(), {"--kv-pages", std::to_string(f.kv_pages)});
    }
    const double price =
        capacity_class == "burst" ? f.burst_price_per_gpu_hour : f.price_per_gpu_hour;
    args.insert(args.end(),
                {"--threads", threads, "--dtype", f.dtype, "--price-per-gpu-hour",
                 std::to_string(price), "--prefix-cache", f.prefix_cache ? "on" : "off"});
    return args;
  };
  auto joined = [](const std::vector<std::string>& words) {
    std::string text;
    for (const auto& w : words) text += (text.empty() ? "" : " ") + w;
    return text;
  };
  std::vector<std::string> gateway{"pdserve",      "gateway", "--model",
                                   model_dir,      "--port",  std::to_string(f.port),
                                   "--ready-file", ready};
  if (!f.ledger.empty()) gateway.insert(gateway.end(), {"--ledger", f.ledger});
  gateway.insert(gateway.end(), {"--disaggregation", f.disaggregation});
  if (f.autoscale) {
    gateway.insert(gateway.end(), {"--planner-ttft-slo-ms", std::to_string(f.planner_ttft_slo_ms)});
    // The gateway's planner starts and drains the burst workers as its own children.
    gateway.insert(gateway.end(), {"--planner",
                                   "advise",
                                   "--actuator",
                                   "local",
                                   "--local-prefill-args",
                                   joined(worker_flags("prefill", "burst")),
                                   "--local-decode-args",
                                   joined(worker_flags("decode", "burst")),
                                   "--planner-interval",
                                   "1",
                                   "--planner-prefill",
                                   std::to_string(prefill.min) + ":" + std::to_string(prefill.max),
                                   "--planner-decode",
                                   std::to_string(decode.min) + ":" + std::to_string(decode.max),
                                   "--planner-up-cooldown",
                                   std::to_string(f.up_cooldown_s),
                                   "--planner-down-hold",
                                   std::to_string(f.down_hold_s),
                                   "--burst-idle-seconds",
                                   std::to_string(f.burst_idle_s)});
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
  // A reserved worker's command line.
  auto worker_args = [&](const std::string& pool) {
    std::vector<std::string> args = {"pdserve", pool == "prefill" ? "prefill" : "decode"};
    const auto flags = worker_flags(pool, "reserved");
    args.insert(args.end(), flags.begin(), flags.end());
    args.insert(args.end(),
                {"--model", model_dir, "--gateway", control, "--capacity-class", "reserved"});
    return args;
  };
  // Workers are supervised: one that exits is started again (with backoff), the gateway and the
  // other workers going on meanwhile.
  auto start_workers = [&](const std::string& pool, int count) {
    for (int i = 0; i < count; ++i) {
      start(pool + "-" + std::to_string(i + 1), worker_args(pool), true);
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
      << (f.ledger.empty()
              ? std::string()
              : "  costs go to " + f.ledger + ": pdserve report --ledger " + f.ledger +
                    " (add --prices prices/litellm-sample.json to compare with APIs)\n")
      << "  curl http://127.0.0.1:" << http
      << "/v1/chat/completions -H 'Content-Type: application/json' -d '{\"model\": \"" << model
      << "\", \"messages\": [{\"role\": \"user\", \"content\": \"Hello\"}], \"max_tokens\": 16}'\n"
      << std::flush;
  // Supervise until a signal: a worker that exits is started again; the gateway exiting ends
  // `up` (its workers would have nowhere to register).
  while (true) {
    std::vector<std::string> restarted;
    for (const auto& e : children.Poll(planner::LocalProcesses::Clock::now(), &restarted)) {
      if (!e.will_restart) {  // the gateway: only the workers are supervised
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

void AddUpCommand(CLI::App& app) {
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
                 "USD per GPU-hour of burst workers, for the ledger (a sample price by default)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  up->add_option("--planner-ttft-slo-ms", u->planner_ttft_slo_ms,
                 "With --autoscale: the planner adds prefill workers when the predicted time to "
                 "first token exceeds this")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
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
  AddPrefixCacheOption(*up, u->prefix_cache);
  up->add_option("--disaggregation", u->disaggregation,
                 "Whether a decode worker may prefill a prompt itself: always (a prefill worker "
                 "every time), conditional (per request, when sooner) or never")
      ->check(CLI::IsMember({"conditional", "always", "never"}));
  up->add_option("--ledger", u->ledger,
                 "Cost ledger (an SQLite file or a postgresql:// URI); empty: none");
  up->add_flag("--no-auth", u->no_auth, "Serve without API keys (always so for up)");
  up->add_option("--price-per-gpu-hour", u->price_per_gpu_hour,
                 "USD per GPU-hour of every reserved worker, for the ledger (a sample price by "
                 "default; 0: costs not counted)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  up->callback([u] { RunUp(*u); });
}

}  // namespace pdserve::app
