// SharedWorkerOptions: the options every worker kind takes (the `pdserve prefill` and `pdserve
// decode` flags they share), as a plain struct each worker's options extend. Built once from the
// command line, then read-only.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"
#include "model/engine.h"
#include "model/step_log.h"
#include "worker/gateway_link.h"
#include "worker/registration.h"
#include "worker/worker_metrics.h"

namespace pdserve::worker {

struct SharedWorkerOptions {
  GatewayLinkOptions gateway;  // the gateway's control address; port required
  WorkerIdentity identity;
  std::string model_dir;
  model::EngineOptions engine;
  double heartbeat_seconds = 0.5;  // a Load this often while idle
  int metrics_port = -1;           // Prometheus /metrics: -1 off, 0 chosen by the OS
  // The address /metrics binds: loopback by default; 0.0.0.0 (or the pod's address) where
  // Prometheus scrapes from another host or pod.
  std::string metrics_address = "127.0.0.1";
  // How long to keep dialling a lost gateway (a restart) before Run gives up; 0: give up at once.
  double gateway_reconnect_seconds = 60;
  // Where to append a line per engine step (model/step_log.h); empty: nowhere.
  std::string step_log;
  // engine.prefix_cache (--prefix-cache): with it on, the worker publishes its cached blocks
  // (Register.kv_events, worker/kv_event_publisher.h).

  // Says which option is wrong (the identity's fields, a missing control port).
  Status Validate() const;
};

// The worker's engine, as model::Engine::Load makes it, with its prefix cache's salt
// (EngineOptions::cache_salt) set to `salt_of` the loaded backend's model and KV pool: the KV
// layout hash the worker registers, so that the gateway computes the same block keys.
Result<std::unique_ptr<model::Engine>> LoadWorkerEngine(
    const std::string& model_dir, model::EngineOptions options,
    const std::function<Result<uint64_t>(const model::ModelConfig&, const model::KvCacheShape&)>&
        salt_of);

// The worker's step log (SharedWorkerOptions::step_log), or null when it has none.
Result<std::unique_ptr<model::StepLog>> OpenStepLog(const SharedWorkerOptions& options);

// The worker's /metrics on metrics_address (series labelled with `role`), or null when
// metrics_port is -1.
Result<std::unique_ptr<WorkerMetrics>> StartWorkerMetrics(const SharedWorkerOptions& options,
                                                          const std::string& role);

// The UUID of the GPU a worker's `device` ("cuda:N", as the backend names it) is ("GPU-..."), which
// a decode worker tells prefill workers so that they pick CUDA IPC for the same GPU only; "" for
// the cpu and simulated devices.
Result<std::string> GpuUuidOf(std::string_view device);

}  // namespace pdserve::worker
