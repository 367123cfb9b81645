// `pdserve decode` (--role both: a colocated worker) and `pdserve prefill`: the worker processes.
// Each dials its gateway, registers, serves until SIGINT or SIGTERM drains it (or it loses its
// gateway), then exits.
#include <boost/asio/signal_set.hpp>
#include <chrono>
#include <cmath>
#include <thread>

#include <spdlog/spdlog.h>

#include "app/commands.h"
#include "common/logging.h"
#include "decode_pool/worker.h"
#include "prefill_pool/prefill_worker.h"

namespace pdserve::app {

namespace {

constexpr const char* kKvCongestionHelp =
    "TCP congestion control of KV connections: auto (the host's, but cubic or reno where the host "
    "runs bbr, which paces bursty KV transfers well below the link), default (the host's), or a "
    "name";

// Runs a worker (decode_pool::Worker or prefill_pool::PrefillWorker) until it drains (SIGINT,
// SIGTERM) or loses its gateway.
template <typename W, typename Options>
void RunWorker(const char* command, Options o) {
  InitLogging(command, "info");
  o.model_dir = ModelOrBuiltin(command, o.model_dir);
  auto worker = W::Create(o);
  if (!worker.ok()) Fail(command, worker.status());
  if ((*worker)->metrics_port()) {
    spdlog::info("metrics on http://{}:{}/metrics", o.metrics_address, (*worker)->metrics_port());
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

}  // namespace

void AddPrefixCacheOption(CLI::App& cmd, bool& prefix_cache) {
  cmd.add_option_function<std::string>(
         "--prefix-cache", [&prefix_cache](const std::string& v) { prefix_cache = v == "on"; },
         "on (default): keep computed prompt KV as cached blocks, reuse them for prompts that "
         "start alike and publish them to the gateway for routing; off: compute every prompt")
      ->check(CLI::IsMember({"on", "off"}));
}

void AddWorkerCommands(CLI::App& app) {
  // Flags every worker kind shares.
  auto common_flags = [](CLI::App* cmd, auto* o, std::string* gateway_address) {
    cmd->add_option("--model", o->model_dir, "Model directory (default: built-in tiny)");
    cmd->add_option("--gateway", *gateway_address,
                    "The gateways' control addresses host:port[,host:port...]: the worker "
                    "registers with each and serves them all")
        ->required();
    cmd->add_flag("--every-gateway-address", o->gateway.every_address,
                  "Register with every address a --gateway name resolves to, each a gateway (a "
                  "headless Service's name: one per gateway pod)");
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
    AddPrefixCacheOption(*cmd, o->engine.prefix_cache);
    cmd->add_option("--metrics-port", o->metrics_port,
                    "Prometheus /metrics port (0: any free port, -1: off)");
    cmd->add_option("--metrics-address", o->metrics_address,
                    "Address /metrics binds (0.0.0.0: every interface, for a Prometheus on "
                    "another host or pod)")
        ->capture_default_str();
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
    ParseGatewayAddress("decode", *decode_gateway, &w->gateway);
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
    ParseGatewayAddress("prefill", *prefill_gateway, &pw->gateway);
    RunWorker<prefill_pool::PrefillWorker>("prefill", *pw);
  });
}

}  // namespace pdserve::app
