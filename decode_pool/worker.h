// Worker: the `pdserve decode` / `pdserve worker --role both` process. Loads one engine, dials
// the gateway, registers, and serves Generate requests end to end (prefill and decode in this
// process: the colocated worker of ARCHITECTURE.md), streaming TokenBatch messages back with
// each request's share of step time. Sends its load every heartbeat. Drain() (SIGTERM) stops
// taking work, finishes what runs, then Run returns.
//
// Threads: Run() drives the engine on the calling thread and the network on one more thread.
// Drain() may be called from any thread (a signal handler thread).
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "common/framed_connection.h"
#include "common/status.h"
#include "model/engine.h"

namespace pdserve::decode_pool {

struct WorkerOptions {
  std::string gateway_host = "127.0.0.1";
  uint16_t gateway_port = 0;                // the gateway's control port; required
  std::string role = "both";                // only "both" is served by this class today
  std::string capacity_class = "reserved";  // or "burst"
  double price_per_gpu_hour = 0.0;
  int gpu_count = 1;
  std::string zone = "local";
  std::string cluster_token;
  std::string model_dir;
  model::EngineOptions engine;
  double heartbeat_seconds = 0.5;
  double connect_timeout_seconds = 30;
};

class Worker {
 public:
  static Result<std::unique_ptr<Worker>> Create(const WorkerOptions& options);
  ~Worker();

  // Connects, registers, serves until drained or the gateway is lost. OK after a drain.
  Status Run();
  void Drain();

 private:
  explicit Worker(const WorkerOptions& options, std::unique_ptr<model::Engine> engine);
  void OnMessage(proto::Envelope&& message);
  void EngineLoop();
  void SendLoad();

  WorkerOptions options_;
  std::unique_ptr<model::Engine> engine_;
  boost::asio::io_context io_;
  std::shared_ptr<FramedConnection> gateway_;

  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<proto::Envelope> inbox_;  // guarded by mu_
  bool connection_lost_ = false;       // guarded by mu_
  Status lost_status_;                 // guarded by mu_
  std::atomic<bool> draining_{false};
  std::atomic<bool> registered_{false};

  // Engine thread only: request id <-> engine sequence id, and compute shares.
  struct Active {
    uint64_t request_id;
    double prefill_seconds = 0;
    double decode_seconds = 0;
    int prompt_len = 0;
  };
  std::unordered_map<uint64_t, Active> by_seq_;
  std::unordered_map<uint64_t, uint64_t> seq_of_request_;
};

}  // namespace pdserve::decode_pool
