// `pdserve sim`: many simulated workers in one process (model/sim/sim_backend.h), each the real
// prefill or decode worker (its own gateway link, engine, page pool, KV listener and transports)
// on the device "sim:PROFILE", so that a gateway, its router and its admission are driven at
// cluster scale and at a profiled device's speed on one machine. SIGINT or SIGTERM drains every
// worker, as it would drain one real worker; the process exits once all have drained.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <functional>
#include <iostream>
#include <memory>
#include <mutex>
#include <thread>
#include <variant>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "app/commands.h"
#include "common/logging.h"
#include "decode_pool/worker.h"
#include "model/sim/sim_backend.h"
#include "prefill_pool/prefill_worker.h"

namespace pdserve::app {
namespace {

// Set by the SIGINT and SIGTERM handler (on whichever thread the signal landed).
std::atomic<bool> g_stop_signal{false};

using Clock = std::chrono::steady_clock;

struct SimFlags {
  std::string gateway;
  std::string profile;
  std::string model_dir;
  int prefill = 0;
  int decode = 0;
  int colocated = 0;
  double startup_seconds = 0;
  std::string capacity_class = "reserved";
  double price_per_gpu_hour = 0;
  std::string zone = "local";
  std::string cluster_token;
  int page_size = 16;
  int num_pages = 0;
  int max_batch_tokens = 2048;
  int max_running = 256;
  double fail_after = -1;
  double freeze_after = -1;
  double slow_factor = 1.0;
  double gateway_reconnect_seconds = 60;
  bool prefix_cache = true;
};

// One simulated worker: made on its own thread after the start-up delay, then run there until
// it drains or gives up on the gateway.
class SimWorker {
 public:
  using Worker = std::variant<std::unique_ptr<prefill_pool::PrefillWorker>,
                              std::unique_ptr<decode_pool::Worker>>;

  void Start(std::function<Result<Worker>()> make, double startup_seconds) {
    thread_ = std::thread([this, make = std::move(make), startup_seconds] {
      {
        std::unique_lock lock(mu_);
        // A drain during the start-up delay: the worker never starts.
        if (cv_.wait_for(lock, std::chrono::duration<double>(startup_seconds),
                         [&] { return draining_; })) {
          return;
        }
      }
      auto made = make();
      if (!made.ok()) {
        spdlog::error("a simulated worker could not start: {}", made.status().ToString());
        result_ = made.status();
        return;
      }
      {
        std::lock_guard lock(mu_);
        worker_ = std::move(*made);
        if (draining_) DrainLocked();
      }
      result_ = std::visit([](auto& w) { return w->Run(); }, worker_);
    });
  }

  void Drain() {
    std::lock_guard lock(mu_);
    draining_ = true;
    cv_.notify_all();
    DrainLocked();
  }

  // Joins the thread; the worker's end.
  Status Join() {
    if (thread_.joinable()) thread_.join();
    return result_;
  }

 private:
  void DrainLocked() {
    std::visit(
        [](auto& w) {
          if (w) w->Drain();
        },
        worker_);
  }

  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool draining_ = false;  // guarded by mu_
  Worker worker_;          // guarded by mu_ until made
  Status result_;
};

void RunSim(const SimFlags& f) {
  InitLogging("sim", "info");
  if (f.prefill + f.decode + f.colocated == 0) {
    Fail("sim", InvalidArgument("no workers: give --prefill, --decode or --colocated"));
  }
  const std::string model_dir = ModelOrBuiltin("sim", f.model_dir);
  auto profile = model::FindProfile(f.profile);
  if (!profile.ok()) Fail("sim", profile.status());
  worker::GatewayLinkOptions gateway;
  ParseGatewayAddress("sim", f.gateway, &gateway);

  auto faults = std::make_shared<model::SimFaults>();
  const auto start = Clock::now();
  auto at = [&](double seconds) {
    return seconds < 0 ? Clock::time_point::max()
                       : start + std::chrono::duration_cast<Clock::duration>(
                                     std::chrono::duration<double>(seconds));
  };
  faults->fail_at = at(f.fail_after);
  faults->freeze_at = at(f.freeze_after);

  // What every worker shares; each gets its own name.
  auto fill = [&](worker::SharedWorkerOptions& o, const std::string& name) {
    o.gateway.host = gateway.host;
    o.gateway.port = gateway.port;
    o.gateway.more_gateways = gateway.more_gateways;
    if (f.freeze_after >= 0) {
      // A frozen engine thread stops the link's keepalives soon, as a stopped process would.
      o.gateway.stall_timeout = std::chrono::milliseconds(2000);
    }
    o.identity.capacity_class = f.capacity_class;
    o.identity.price_per_gpu_hour = f.price_per_gpu_hour;
    o.identity.zone = f.zone;
    o.identity.cluster_token = f.cluster_token;
    o.identity.name = name;
    o.model_dir = model_dir;
    o.engine.device = "sim:" + f.profile;
    o.engine.page_size = f.page_size;
    o.engine.num_pages = f.num_pages;
    o.engine.max_batch_tokens = f.max_batch_tokens;
    o.engine.max_running = f.max_running;
    o.engine.prefix_cache = f.prefix_cache;
    o.engine.sim_slow_factor = f.slow_factor;
    o.engine.sim_faults = faults;
    o.metrics_port = -1;
    o.gateway_reconnect_seconds = f.gateway_reconnect_seconds;
  };
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  const std::string prefix = fmt::format("{}:{}:sim", host, ::getpid());

  // SIGINT and SIGTERM drain. Threads that libraries started before this point (OpenBLAS's, the
  // sanitizers') do not block them, so a signal may land on any thread: the handler only notes
  // it, and the thread below acts on it. Our own threads block them.
  struct sigaction stop {};
  stop.sa_handler = [](int) { g_stop_signal.store(true); };
  sigemptyset(&stop.sa_mask);
  sigaction(SIGINT, &stop, nullptr);
  sigaction(SIGTERM, &stop, nullptr);
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGINT);
  sigaddset(&mask, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &mask, nullptr);

  std::vector<std::unique_ptr<SimWorker>> workers;
  auto add = [&](std::function<Result<SimWorker::Worker>()> make) {
    workers.push_back(std::make_unique<SimWorker>());
    workers.back()->Start(std::move(make), f.startup_seconds);
  };
  for (int i = 0; i < f.prefill; ++i) {
    prefill_pool::PrefillWorkerOptions o;
    fill(o, fmt::format("{}-prefill-{}", prefix, i));
    add([o]() -> Result<SimWorker::Worker> {
      PDSERVE_ASSIGN_OR_RETURN(auto w, prefill_pool::PrefillWorker::Create(o));
      return SimWorker::Worker(std::move(w));
    });
  }
  for (int i = 0; i < f.decode + f.colocated; ++i) {
    decode_pool::WorkerOptions o;
    const bool colocated = i >= f.decode;
    o.role = colocated ? "both" : "decode";
    fill(o, fmt::format("{}-{}-{}", prefix, colocated ? "both" : "decode", i));
    add([o]() -> Result<SimWorker::Worker> {
      PDSERVE_ASSIGN_OR_RETURN(auto w, decode_pool::Worker::Create(o));
      return SimWorker::Worker(std::move(w));
    });
  }
  std::cout << fmt::format(
                   "pdserve sim: {} prefill, {} decode and {} colocated simulated worker(s) on "
                   "profile '{}' ({}), dialling {}. Ctrl-C drains them.",
                   f.prefill, f.decode, f.colocated, profile->name, profile->device, f.gateway)
            << std::endl;

  // Wait for a signal, or for every worker to have ended by itself.
  std::atomic<bool> all_ended{false};
  std::thread signals([&] {
    while (!all_ended) {
      timespec timeout{0, 100'000'000};
      if (sigtimedwait(&mask, nullptr, &timeout) > 0 || g_stop_signal.load()) {
        spdlog::info("draining {} simulated workers", workers.size());
        for (auto& w : workers) w->Drain();
        // A frozen worker's step returns now, so that it can drain too.
        faults->Release();
        return;
      }
    }
  });
  int failed = 0;
  for (auto& w : workers) {
    if (Status s = w->Join(); !s.ok()) {
      ++failed;
      spdlog::error("a simulated worker ended: {}", s.ToString());
    }
  }
  all_ended = true;
  signals.join();
  if (failed > 0) {
    Fail("sim",
         Unavailable(fmt::format("{} of {} simulated workers failed", failed, workers.size())));
  }
  std::cout << "pdserve sim: every worker drained" << std::endl;
}

}  // namespace

void AddSimCommand(CLI::App& app) {
  auto f = std::make_shared<SimFlags>();
  CLI::App* cmd = app.add_subcommand(
      "sim", "Many simulated workers in one process, timed by a performance profile");
  cmd->add_option("--gateway", f->gateway,
                  "The gateways' control addresses host:port[,host:port...]: each worker "
                  "registers with each")
      ->required();
  cmd->add_option("--profile", f->profile,
                  "Performance profile: a file, a name in profiles/, or 'zero' (no time)")
      ->required();
  cmd->add_option("--model", f->model_dir,
                  "Model directory (config and tokenizer; no weights are read; default: built-in "
                  "tiny)");
  cmd->add_option("--prefill", f->prefill, "Prefill workers")->check(CLI::Range(0, 4096));
  cmd->add_option("--decode", f->decode, "Decode workers")->check(CLI::Range(0, 4096));
  cmd->add_option("--colocated", f->colocated, "Colocated workers (prefill and decode in one)")
      ->check(CLI::Range(0, 4096));
  cmd->add_option("--startup-seconds", f->startup_seconds,
                  "Each worker registers this long after the start (a cold start)")
      ->check(CLI::Range(0.0, 86400.0));
  cmd->add_option("--capacity-class", f->capacity_class, "reserved or burst")
      ->check(CLI::IsMember({"reserved", "burst"}));
  cmd->add_option("--price-per-gpu-hour", f->price_per_gpu_hour, "USD per GPU-hour")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--zone", f->zone, "Zone of every worker");
  cmd->add_option("--cluster-token", f->cluster_token, "Token the gateway expects");
  cmd->add_option("--page-size", f->page_size, "Tokens per KV page")->check(CLI::Range(1, 1024));
  AddPrefixCacheOption(*cmd, f->prefix_cache);
  cmd->add_option("--num-pages", f->num_pages, "KV pages per worker (0: the profile's)")
      ->check(CLI::Range(0, 1 << 26));
  cmd->add_option("--max-batch-tokens", f->max_batch_tokens, "Tokens per engine step")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--max-running", f->max_running, "Sequences in a batch at once")
      ->check(CLI::Range(1, 1 << 16));
  cmd->add_option("--fail-after", f->fail_after,
                  "Fault: from this many seconds on, every step fails (as a GPU error would)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--freeze-after", f->freeze_after,
                  "Fault: from this many seconds on, steps never end and the workers stop "
                  "answering, their connections left open")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--slow-factor", f->slow_factor, "Fault: steps take this many times longer")
      ->check(CLI::Range(0.001, 1e6));
  cmd->add_option("--gateway-reconnect-seconds", f->gateway_reconnect_seconds,
                  "When the gateway is lost, keep dialling it this long (0: give up at once)")
      ->check(CLI::NonNegativeNumber);
  cmd->callback([f] { RunSim(*f); });
}

}  // namespace pdserve::app
