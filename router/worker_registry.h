// WorkerRegistry: the gateway's side of the control plane: worker membership and the wire
// protocol. It accepts worker connections, checks each Register (cluster token, model, role, KV
// layout), asks its Router (router.h; by default a P/D pair, else a colocated worker) which
// workers take each request attempt, and relays the attempt's messages:
// - disaggregated: Reserve to the decode worker D, then on Reserved, Prefill to the prefill
//   worker P naming D's pages; P's first token goes to the sink and, as KvDone, to D, whose
//   tokens follow;
// - colocated: Generate to a worker of role both.
// The workers' load the router and admission read is its LoadView (load_view.h), which it tells
// what the protocol did; each StepReport is charged to the attempts in the step and to the
// worker's billing period (step_cost.h). Once every worker of an attempt is done with it
// (finished, cancelled, failed or lost), it tells the sink what the attempt cost
// (OnAttemptClosed). Nothing a worker says of itself is trusted past what it registered: its
// free pages are capped by its pool, its Reserved pages must lie in that pool, and every phase
// of an attempt has a deadline (RegistryOptions). A worker that disconnects or sends nothing
// for the heartbeat timeout (every message counts) leaves the registry; its attempts fail over
// to their sinks (retryable before the first token). Time in which the gateway itself did not
// run (a SIGSTOP, a VM pause: its sweep firing late) is not held against its workers, whose
// messages from that time are still unread. It sends each registered worker a Heartbeat every
// heartbeat_interval, so that workers notice a gateway that went silent.
//
// Threads: all methods may be called from any thread (one mutex guards the tables). Sinks and
// observers are called from the io_context's threads, never while the mutex is held.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/accept_backoff.h"
#include "common/framed_connection.h"
#include "common/status.h"
#include "router/attempt.h"
#include "router/kv_index.h"
#include "router/load_view.h"
#include "router/routed_prefixes.h"
#include "router/router.h"
#include "router/step_cost.h"

namespace pdserve::router {

struct RegistryOptions {
  std::string cluster_token;  // empty: any worker may join (local use)
  std::string model_id;       // workers must serve this model
  std::chrono::milliseconds heartbeat_timeout{3000};
  std::chrono::milliseconds heartbeat_interval{1000};  // gateway to worker
  // Before a connection registered, its frames may hold this much (a Register is a few hundred
  // bytes): a peer that has not shown its token cannot make the gateway allocate more.
  size_t unregistered_frame_bytes = 4096;
  size_t registered_frame_bytes = 64 << 20;
  // Connections from one address that have not registered yet; more are closed at once.
  int max_unregistered_per_address = 16;
  // Deadlines of an attempt's phases, past which it fails over (retryable before its first
  // token) to its sink: a decode worker must answer Reserve within reserve_timeout (one that does
  // not is dropped: it is not serving, whatever its heartbeats say); a prefill worker must
  // answer within the KV deadline plus prefill_grace; a running attempt that sends no tokens
  // for token_stall_timeout has stalled.
  std::chrono::milliseconds reserve_timeout{10000};
  std::chrono::milliseconds prefill_grace{5000};
  std::chrono::milliseconds token_stall_timeout{60000};
  double kv_deadline_seconds = 30;  // a reservation's KV must arrive within this
  std::chrono::seconds abandon_after{60};
  // Called on register, at most once a second while a worker runs, and when it leaves.
  std::function<void(const WorkerPeriodUpdate&)> on_period;
  // Called when a worker registers, under the registry's lock (it must not call the registry):
  // since when the worker has been paid for, if before now. A burst worker the planner asked for
  // is billed from the ask, its cold start included (docs/architecture.md, "Cost model").
  std::function<std::optional<std::chrono::system_clock::time_point>(const proto::Register&)>
      billed_from;
  // Picks each attempt's workers; null: router::MakeDefaultRouter().
  std::shared_ptr<const router::Router> router;
  // Called, without the registry's lock, after something that may have made room for a request:
  // a worker joined, a Load came, a worker finished its part of an attempt. The admission queue
  // tries its waiting requests then.
  std::function<void()> on_capacity;
};

// Whether a worker's Register may join: FailedPrecondition for a wrong token or model,
// InvalidArgument for an unknown role or class, or figures no worker can have (no KV pages, a
// price that is no number). The message is what the refused worker is told.
Status CheckRegister(const proto::Register& r, const RegistryOptions& options);

using Attempt = router::Route;

// What the registry knows of the workers' prefix caches, for /metrics.
struct PrefixIndexStats {
  size_t published_blocks = 0;  // blocks the workers that publish KV events hold (KvIndex)
  size_t routed_blocks = 0;     // blocks recorded for workers that publish nothing
  uint64_t resyncs = 0;         // full lists asked: one per worker that joined, one per gap
  uint64_t gaps = 0;            // KV events out of order
};

class WorkerRegistry : public std::enable_shared_from_this<WorkerRegistry> {
 public:
  WorkerRegistry(boost::asio::io_context& io, RegistryOptions options);

  // Binds the control port (0: chosen by the OS) and starts accepting workers.
  Status Listen(const std::string& host, uint16_t port);
  uint16_t port() const { return port_; }
  void Stop();

  // Starts attempt `attempt_id` (unique per attempt) on workers not in `exclude` and, when
  // `zones` names any, registered in one of them. Unavailable when no worker (or pair) can take
  // it.
  Result<Attempt> Dispatch(uint64_t attempt_id, const std::vector<int32_t>& prompt,
                           const proto::Sampling& sampling, std::shared_ptr<RequestSink> sink,
                           const std::set<uint64_t>& exclude = {},
                           const std::set<std::string>& zones = {});
  // Asks the attempt's workers to stop; its sink gets no more tokens or failures, only
  // OnAttemptClosed once they confirmed.
  void Cancel(uint64_t attempt_id);

  std::vector<WorkerSummary> Workers() const;
  // What the router sees: every registered worker's load now, by id, with how long each has
  // been idle (the planner's; not computed for the router's own picks).
  std::vector<router::WorkerLoad> LoadSnapshot() const;
  // Whether the router finds a route among the registered workers, room aside (readiness).
  bool HasRoute() const;
  // The most KV, in tokens, any registered decode or colocated worker can hold for one request
  // (its pool, capped by its context); 0 with none registered.
  int64_t LargestKvTokens() const;
  // The live prefill and colocated workers' prompt rate and backlog (admission's prediction).
  router::PrefillCapacity Prefill() const;
  // The longest leading part of `prompt`, in tokens, that a live prefill or colocated worker's
  // prefix cache is believed to hold (whole blocks; 0: none): what admission does not count as
  // the prompt's work.
  int64_t CachedPromptTokens(const std::vector<int32_t>& prompt) const;
  PrefixIndexStats PrefixStats() const;

 private:
  struct Worker {
    uint64_t id = 0;
    proto::Register info;
    std::shared_ptr<FramedConnection> conn;
    std::chrono::steady_clock::time_point last_seen;
    std::string address;  // the peer's IP address
    bool registered = false;
    std::optional<WorkerBillingPeriod> period;  // from its registration
  };
  enum class Phase { kGenerating, kReserving, kPrefilling, kDecoding };
  struct InFlight {
    std::shared_ptr<RequestSink> sink;
    bool sink_active = true;  // false once cancelled, failed or finished
    std::chrono::steady_clock::time_point inactive_since;
    void Deactivate() {
      if (sink_active) inactive_since = std::chrono::steady_clock::now();
      sink_active = false;
    }
    Phase phase = Phase::kGenerating;
    // When the phase began, or (decoding) its last tokens came: its deadline counts from here.
    std::chrono::steady_clock::time_point phase_since = std::chrono::steady_clock::now();
    std::set<uint64_t> open;  // workers still holding a part of it
    AttemptUsage cost;
    std::vector<int32_t> prompt;  // until Prefill is sent
    proto::Sampling sampling;
    int open_choices = 1;  // choices (Sampling.n) whose last batch has not come
  };
  // What to do once the mutex is released.
  struct Actions {
    std::vector<std::pair<std::shared_ptr<FramedConnection>, proto::Envelope>> sends;
    std::vector<std::function<void()>> calls;
    std::vector<WorkerPeriodUpdate> periods;  // for options_.on_period
    bool released = false;                    // a worker finished its part of an attempt
    void Run();                               // calls (posts to the sinks' strands), then sends
  };

  void Accept();
  // Takes a new control connection, unless its address holds too many unregistered ones.
  void Admit(boost::asio::ip::tcp::socket socket);
  void OnMessage(uint64_t conn_id, proto::Envelope&& message);
  void OnClose(uint64_t conn_id, const Status& why);
  void SweepHeartbeats();
  // Fails attempts past their phase's deadline; drops decode workers that did not answer
  // Reserve in time.
  void EnforcePhaseDeadlines(std::chrono::steady_clock::time_point now);
  // Closes attempts whose workers did not confirm their end within abandon_after of the cancel
  // or failure (a worker bug: its part is forgotten, and its cost is what was reported so far).
  void CloseAbandonedAttempts(std::chrono::steady_clock::time_point now);
  // Each requires mu_.
  void HandleStepLocked(Worker& w, const proto::StepReport& step);
  void HandleReservedLocked(Worker& w, const proto::Reserved& reserved, Actions& actions);
  void HandleTokensLocked(Worker& w, const proto::TokenBatch& batch, Actions& actions);
  void HandleErrorLocked(Worker& w, const proto::RequestError& error, Actions& actions);
  // The attempt's sink gets nothing more but OnAttemptClosed.
  void DeactivateLocked(uint64_t attempt_id, InFlight& f);
  // The worker is done with its part of the attempt; closes the attempt when no part is left.
  void ReleaseLocked(uint64_t attempt_id, InFlight& f, Worker* w, Actions& actions);
  // Fails the attempt to its sink (once) and cancels it on its open workers but `except_worker`
  // (the one that failed).
  void FailLocked(uint64_t attempt_id, InFlight& f, AttemptFailure failure, uint64_t except_worker,
                  Actions& actions);
  void SendLocked(uint64_t worker_id, proto::Envelope m, Actions& actions);
  // The prefix cache's side (worker_registry_prefixes.cc), each requiring mu_: a worker that
  // joined is indexed by its events (asked for its full list) or by where prompts were routed.
  void JoinPrefixIndexLocked(const Worker& w, Actions& actions);
  void LeavePrefixIndexLocked(uint64_t worker);
  void HandleKvEventsLocked(Worker& w, const proto::KvEvents& events, Actions& actions);
  void HandleKvSnapshotLocked(Worker& w, const proto::KvSnapshot& snapshot);
  // The prompt's block keys by KV identity (layout hash, page size): one chain per identity
  // among the workers, computed once per dispatch.
  using PromptKeys = std::map<std::pair<uint64_t, int>, std::vector<BlockKey>>;
  // Fills request.matched_blocks; returns the keys for RecordRoutedLocked.
  PromptKeys PromptKeysLocked(const std::vector<int32_t>& prompt, RouteRequest& request) const;
  void RecordRoutedLocked(const Route& route, const PromptKeys& keys_of);

  boost::asio::io_context& io_;
  RegistryOptions options_;
  boost::asio::ip::tcp::acceptor acceptor_;
  boost::asio::steady_timer sweep_timer_;
  AcceptBackoff accept_backoff_;  // the accept handler's
  uint16_t port_ = 0;
  // The sweep timer's handler only (one at a time).
  std::chrono::steady_clock::time_point last_sweep_, last_heartbeat_;

  mutable std::mutex mu_;
  uint64_t next_id_ = 1;                   // guarded by mu_
  std::map<uint64_t, Worker> workers_;     // by connection id; guarded by mu_
  std::map<uint64_t, InFlight> attempts_;  // by attempt id; guarded by mu_
  LoadView loads_;                         // the registered workers' load; guarded by mu_
  KvIndex kv_index_;                       // blocks of workers that publish; guarded by mu_
  RoutedPrefixes routed_prefixes_;         // of those that do not; guarded by mu_
};

}  // namespace pdserve::router
