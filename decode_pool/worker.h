// Worker: the `pdserve decode` process (--role decode, or --role both for a colocated worker).
// Loads one engine, dials the gateway (GatewayLink), registers and serves:
// - role both: Generate requests end to end, prefill and decode in this process;
// - role decode: Reserve (KV pages for the prompt plus a lookahead, from the engine's pool,
//   through a KvReceiver and its TCP listener, the KV endpoint it registers; the prompt's leading
//   blocks its prefix cache holds are pinned instead and not sent: Reserved.cached_blocks), then
//   KvDone, which
//   joins the sequence, now holding the prompt's KV pushed by a prefill worker, to the running
//   batch. Its pages grow as it decodes; a sequence preempted when the pool runs out goes back to
//   the gateway (RequestError.preempted), which resumes it elsewhere. It also takes Generate:
//   the gateway's conditional disaggregation has it prefill a prompt itself (no KV transfer).
// It streams TokenBatch messages, reports every step's wall time and its requests (StepReport,
// before the step's tokens) and its load every heartbeat. Drain() (SIGTERM) stops taking work,
// finishes what runs, then Run returns. When the gateway is lost, the worker drops what it was
// serving for it (the gateway retries or ends those requests) and registers again once the
// gateway answers, within gateway_reconnect_seconds.
//
// Threads: Run() drives the engine on the calling thread; the gateway link and the KV listener
// have their own. Drain() may be called from any thread (a signal handler thread).
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "kv_transfer/kv_receiver.h"
#include "kv_transfer/tcp_transport.h"
#include "model/engine.h"
#include "worker/gateway_link.h"
#include "worker/kv_event_publisher.h"
#include "worker/serve_loop.h"
#include "worker/worker_metrics.h"
#include "worker/worker_options.h"

namespace pdserve::decode_pool {

struct WorkerOptions : worker::SharedWorkerOptions {
  std::string role = "both";  // "both" or "decode"
  // Role decode: where prefill workers push KV. The advertised host is what peers dial.
  std::string kv_bind_address = "127.0.0.1";
  std::string kv_advertise_host = "127.0.0.1";
  uint16_t kv_port = 0;  // 0: chosen by the OS
  // TCP congestion control of accepted KV connections (kv_transfer/tcp_congestion.h).
  std::string kv_tcp_congestion = "auto";
  // TCP KV: payload CRCs checked on a worker pool beside the listener's I/O thread
  // (TcpKvListenerOptions::offload_tcp_checksums).
  bool kv_offload_checksums = false;
};

class Worker {
 public:
  static Result<std::unique_ptr<Worker>> Create(const WorkerOptions& options);
  ~Worker();

  // Connects, registers, serves until drained, or until the gateway is lost and does not answer
  // again within gateway_reconnect_seconds. OK after a drain; Internal after a failed engine
  // step (the device is unusable), once the worker has failed its requests as retryable and
  // drained, so that its supervisor starts a fresh one.
  Status Run();
  void Drain();
  // The metrics port (after Create), 0 when off.
  uint16_t metrics_port() const { return metrics_ ? metrics_->port() : 0; }

 private:
  Worker(const WorkerOptions& options, std::unique_ptr<model::Engine> engine);
  Status StartKvListener();
  // Serves on the current connection until drained (OK) or the gateway is lost (why).
  Status Serve();
  // The gateway was lost: ends every request it sent here without a word to it (the next
  // gateway does not know them), returning their pages.
  void AbandonRequests();
  // A reservation that will not be joined to the batch: its pages go back, `why` failing its
  // transfer if it is still arriving. The caller removes it from reserved_.
  struct Reservation;
  void ReleaseReservation(uint64_t request_id, Reservation& reservation, const char* why);
  void Handle(proto::Envelope& message);
  void HandleGenerate(const proto::Generate& g);
  void HandleReserve(const proto::Reserve& r);
  void HandleKvDone(const proto::KvDone& d);
  void HandleCancel(uint64_t request_id);
  void RunStep();
  void SendError(uint64_t request_id, const std::string& message, bool retryable);
  void SendLoad();
  void DropFailedReservations();
  bool Idle() const;

  WorkerOptions options_;
  std::unique_ptr<model::Engine> engine_;
  std::unique_ptr<worker::GatewayLink> link_;
  std::unique_ptr<worker::WorkerMetrics> metrics_;
  std::unique_ptr<model::StepLog> step_log_;  // null without --step-log
  std::string gpu_uuid_;                      // its GPU's ("" on the cpu): in each Reserved
  // Role decode only. The receiver writes into the engine's KV pool and must outlive the listener.
  std::unique_ptr<kv_transfer::KvReceiver> receiver_;
  std::unique_ptr<kv_transfer::TcpKvListener> listener_;
  std::optional<kv_transfer::KvLayout> layout_;
  std::atomic<bool> draining_{false};
  worker::StepFailure step_failure_;  // Run() returns it

  // Engine thread only.
  struct Reservation {  // role decode: pages reserved, KV arriving
    std::vector<int32_t> prompt;
    model::SamplingParams params;
    std::chrono::steady_clock::time_point arrival;
    // The prompt's leading pages pinned from the prefix cache (Reserved.cached_blocks), freed
    // unless the sequence joins the batch.
    std::vector<int32_t> held;
  };
  std::unordered_map<uint64_t, Reservation> reserved_;     // by request id
  std::unordered_map<uint64_t, uint64_t> request_of_seq_;  // engine sequence -> request
  std::unordered_map<uint64_t, uint64_t> seq_of_request_;
  struct FirstTokenTiming {  // role both: for the batch that carries the first token
    std::chrono::steady_clock::time_point arrival, first_step;
  };
  std::unordered_map<uint64_t, FirstTokenTiming> timing_;  // by sequence
  double busy_seconds_ = 0;
  int64_t reported_preemptions_ = 0;
  int sent_free_pages_ = -1;  // in the last Load sent
  worker::KvEventPublisher kv_events_;
};

}  // namespace pdserve::decode_pool
