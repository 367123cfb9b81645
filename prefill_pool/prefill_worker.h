// PrefillWorker: the `pdserve prefill` process (docs/architecture.md, "A request's life", steps
// 3-5). Loads one engine, dials the gateway (GatewayLink) and serves Prefill requests: it batches
// prompts up to the engine's token budget (chunked prefill), pushes each layer's KV to the
// decode worker's reserved pages as soon as that layer's KV is written (the engine's layer
// hook; not the prompt's first Reserved.cached_blocks pages, which the decode worker holds in its
// prefix cache), samples the first token, and once every KV chunk was acknowledged answers the
// gateway with a TokenBatch holding that token (or a RequestError), then frees its pages. One
// Transport (TCP, with its TCP, NCCL or CUDA-IPC payload path) per decode worker, made on first
// contact and shared by its requests. When the
// gateway is lost, the worker drops the prompts it was serving for it and registers again once
// the gateway answers, within gateway_reconnect_seconds.
//
// Threads: Run() drives the engine on the calling thread; a finisher thread waits for transfers
// and answers the gateway; the link and each transport have their own I/O thread. Drain() may
// be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "kv_transfer/kv_layout.h"
#include "kv_transfer/tcp_transport.h"
#include "model/engine.h"
#include "prefill_pool/endpoint_backoff.h"
#include "worker/gateway_link.h"
#include "worker/kv_event_publisher.h"
#include "worker/serve_loop.h"
#include "worker/worker_metrics.h"
#include "worker/worker_options.h"

namespace pdserve::prefill_pool {

struct PrefillWorkerOptions : worker::SharedWorkerOptions {
  // How KV bytes reach decode workers: "tcp" (host pools), "nccl" (GPU to GPU) or "ipc" (CUDA
  // IPC, both workers on one GPU); "auto" is tcp on the cpu, and on a GPU ipc to a decode worker
  // on the same GPU and machine (its Reserved says), nccl to others.
  std::string kv_path = "auto";
  // TCP congestion control of KV connections (kv_transfer/tcp_congestion.h).
  std::string kv_tcp_congestion = "auto";
  // TCP: layer pushes of at least this many bytes go into the socket by reference
  // (TcpTransportOptions::splice_min_layer_bytes); 0: all of them.
  size_t kv_splice_min_bytes = kv_transfer::TcpTransportOptions{}.splice_min_layer_bytes;
  // ... and at most this many (TcpTransportOptions::splice_max_layer_bytes).
  size_t kv_splice_max_bytes = kv_transfer::TcpTransportOptions{}.splice_max_layer_bytes;
  // TCP: chunk CRCs on worker threads beside the writing one (TcpTransportOptions::
  // offload_checksums).
  bool kv_offload_checksums = false;
  // Makes the transport to one decode worker: TcpTransport::Connect when empty; a test may hand
  // out fakes (tests/fakes/fake_transport.h).
  std::function<Result<std::unique_ptr<kv_transfer::Transport>>(
      const kv_transfer::KvLayout& layout, std::vector<const void*> layer_bases, int num_pages,
      const kv_transfer::TcpTransportOptions& options)>
      dial_transport;
  // Fault injection for tests: sleep this long after pushing each layer, so a test can kill the
  // worker while a transfer is in flight. 0 in production.
  int debug_layer_delay_ms = 0;
};

class PrefillWorker {
 public:
  static Result<std::unique_ptr<PrefillWorker>> Create(const PrefillWorkerOptions& options);
  ~PrefillWorker();

  // As decode_pool::Worker::Run: OK after a drain; Internal after a failed engine step, once
  // its prompts have failed as retryable and it has drained.
  Status Run();
  void Drain();
  uint16_t metrics_port() const { return metrics_ ? metrics_->port() : 0; }

 private:
  using Clock = std::chrono::steady_clock;
  // A prompt in the engine, from Prefill to its first token.
  struct Pending {
    uint64_t request_id = 0;
    proto::Reserved destination;
    int max_tokens = 0;  // the request's, not the engine's 1
    int prompt_len = 0;
    Clock::time_point arrival, first_step, deadline;
    std::shared_ptr<kv_transfer::Transport> transport;
    Status failed;  // a transfer error while its layers were pushed
    bool opened = false;
  };
  // A first token whose KV is still being acknowledged.
  struct Finishing {
    Pending pending;
    int32_t token = -1;
    bool is_stop = false;
    model::TokenEvent event;     // the first token's: its end (a stop token, or a whole
                                 // response format) and its logprobs, where asked
    int cached_tokens = 0;       // prompt tokens the engine found in its prefix cache
    std::vector<int32_t> pages;  // this worker's, freed once the transfer ended
    Clock::time_point sampled;
  };

  PrefillWorker(const PrefillWorkerOptions& options, std::unique_ptr<model::Engine> engine,
                kv_transfer::KvLayout layout);
  // Serves on the current connection until drained (OK) or the gateway is lost (why).
  Status Serve();
  // The gateway was lost: ends every prompt it sent here, its transfer cancelled, and returns
  // once the finisher has let go of them all, so that nothing about them reaches the next one.
  void AbandonRequests();
  // A prompt leaving before its first token: its transfer, if opened, is cancelled with `why`
  // and forgotten here and by the transport. Engine thread; takes finish_mu_.
  void DropTransfer(Pending& p, const char* why);
  void HandlePrefill(const proto::Prefill& p);
  void HandleCancel(uint64_t request_id);
  Result<std::shared_ptr<kv_transfer::Transport>> TransportTo(const proto::Reserved& dst);
  void OnLayer(int layer, std::span<const model::PromptDone> done);
  void RunStep();
  void FinishLoop();
  // The finisher is done with the item it took: wakes whoever waits for that.
  void FinishedOne();
  void SendError(uint64_t request_id, const std::string& message, bool retryable,
                 bool peer_failed = false);
  void SendLoad();
  int64_t QueuedPromptTokens() const;
  // One KV page of one layer in the served model: a simulated backend's small pages count as
  // the real model's (model::SimulatedKv), for its paced link and the bytes the ledger charges
  // egress on.
  double PageLayerBytes() const;
  // The KV bytes a prompt's pages hold in the served model, less the first `cached_blocks` pages
  // (the decode worker holds them: not sent).
  int64_t KvBytes(int prompt_len, int cached_blocks) const;

  PrefillWorkerOptions options_;
  std::unique_ptr<model::Engine> engine_;
  const kv_transfer::KvLayout layout_;
  kv_transfer::PayloadPath kv_path_ = kv_transfer::PayloadPath::kTcp;  // set by Create
  int kv_device_ = 0;     // CUDA device of the KV pool (GPU paths)
  std::string gpu_uuid_;  // its GPU's ("" on the cpu): the same GPU as a decode worker's or not
  std::unique_ptr<worker::GatewayLink> link_;
  std::unique_ptr<worker::WorkerMetrics> metrics_;
  std::unique_ptr<model::StepLog> step_log_;  // null without --step-log
  std::atomic<bool> draining_{false};
  worker::StepFailure step_failure_;    // Run() returns it
  double busy_seconds_ = 0;             // engine thread
  worker::KvEventPublisher kv_events_;  // engine thread

  // Engine thread only.
  std::map<std::string, std::shared_ptr<kv_transfer::Transport>> transports_;  // by endpoint
  EndpointBackoff unreachable_;                    // endpoints whose last dial failed, for a while
  std::unordered_map<uint64_t, Pending> pending_;  // by engine sequence
  std::unordered_map<uint64_t, uint64_t> seq_of_request_;  // request -> sequence

  // Handed from the engine thread to the finisher.
  std::mutex finish_mu_;
  std::condition_variable finish_cv_;
  std::deque<Finishing> finishing_;  // guarded by finish_mu_
  std::map<uint64_t, std::shared_ptr<kv_transfer::Transport>> in_transfer_;  // same
  bool stop_finisher_ = false;  // guarded by finish_mu_
  bool finisher_busy_ = false;  // guarded by finish_mu_: an item taken off finishing_, unfinished
  std::thread finisher_;
};

}  // namespace pdserve::prefill_pool
