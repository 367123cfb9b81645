// CompletionCall: one OpenAI completion or chat request from tokenized prompt to the last
// byte: submits it to the admission queue (router/admission_queue.h), which starts it on workers
// or refuses it (429: its TTFT SLO is out of reach; 503: its queue deadline passed, both with
// Retry-After), retries on other workers while no token has reached the client (a decode worker
// that had no room for it sends it back to the queue), resumes a stream under way on other
// workers when its decode worker preempts it or is lost (the tokens sent so far prefilled again,
// the client's stream going on with no gap and no repeat), turns TokenBatch messages into text
// (incremental detokenisation, stop strings) and hands the HTTP session what to write. It is the
// RequestSink the WorkerRegistry calls. Every attempt gets one ledger row once its workers are done
// with it (status ok, cancelled, error or retried); a completed request's row is written before its
// last bytes go out, and its cost is returned in the x-pdserve-cost-usd header and as
// usage.cost_usd.
//
// Overflow (router/external_upstream.h): a tenant whose rule is `overflow` or `cheapest` is not
// refused when admission predicts its TTFT objective would be missed: unless a burst worker the
// planner asked for is due to register within that objective (then it waits in the queue for it,
// the objective no longer refusing it), its first attempt goes to the cheapest external upstream
// that is not cooling down (gateway/external_call.h). A `cheapest` tenant's request also goes
// there when no miss is predicted, if the upstream's price for its prompt and max_tokens is below
// what self-hosted workers charged lately for as many tokens (router/self_hosted_rates.h; none
// charged lately: it stays). One that waits in the queue instead leaves it for an upstream (the
// same choice, reason queue_wait) when it has not started by its objective less its own prompt's
// time at a worker's measured rate: it would miss the objective by waiting on. A failure there
// before
// any text reached the client is retried on another upstream and then on self-hosted workers,
// and a request that can go nowhere allowed gets 503 (no_allowed_route) saying why. The client
// sees our response id and model name, and the usage the upstream reported (or our tokenizer's
// count where it reported none); the attempt's ledger row (class api) is priced at the
// upstream's token prices times exactly that usage. Code: gateway/completion_call_external.cc.
//
// Threads: registry and queue callbacks arrive on other threads and are posted to the owning
// session's strand; everything else runs on that strand.
#pragma once

#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "gateway/external_call.h"
#include "gateway/gateway_metrics.h"
#include "gateway/openai_response.h"
#include "gateway/tenant_quota.h"
#include "ledger/ledger.h"
#include "router/admission_queue.h"
#include "router/self_hosted_rates.h"
#include "router/worker_registry.h"
#include "tokenizer/detokenizer.h"
#include "tokenizer/stop_strings.h"
#include "tokenizer/tokenizer.h"

namespace pdserve::gateway {

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

// What the session must do next; called on the session's strand.
struct CallOutput {
  std::function<void()> started;                  // its first attempt left the queue
  std::function<void(std::string)> write_stream;  // SSE bytes (streaming only)
  // The end: for streaming, the last SSE bytes once started; otherwise the whole JSON body,
  // status and headers (server-timing, x-pdserve-cost-usd, retry-after).
  std::function<void(int status, std::string body, HttpHeaders headers, bool is_error)> finish;
};

// Who asked and how the call is accounted.
struct CallAccounting {
  std::shared_ptr<Ledger> ledger;           // null: no ledger
  bool store_text = false;                  // keep prompt and completion text in the ledger
  double egress_usd_per_gb = 0;             // KV bytes crossing zones
  std::string tenant;                       // from the API key; "" without authentication
  std::map<std::string, std::string> tags;  // x-pdserve-tags
  // Completed self-hosted attempts' compute is recorded here (null: nowhere).
  std::shared_ptr<router::SelfHostedRates> rates;
};

// How the call waits for its workers, and what it gives back if it never runs.
struct CallAdmission {
  std::shared_ptr<router::AdmissionQueue> queue;
  double weight = 1;
  router::Priority priority = router::Priority::kInteractive;
  std::chrono::steady_clock::time_point deadline;  // of its wait in the queue
  std::chrono::milliseconds ttft_slo{0};           // 0: never refused early
  std::shared_ptr<TenantQuota> quota;              // null: nothing was charged
  int64_t quota_tokens = 0;                        // what was charged
  std::set<std::string> zones;  // the workers' zones it may use (its tenant's); empty: any
  router::OverflowRule overflow = router::OverflowRule::kNever;  // its tenant's rule
  // When its request's last byte was read (unset: when the call was made): its TTFT and the
  // gateway's own time count from here.
  std::chrono::steady_clock::time_point received;
};

// Where the call may go beyond self-hosted workers.
struct CallOverflow {
  router::OverflowRule rule = router::OverflowRule::kNever;
  std::shared_ptr<router::ExternalUpstreams> upstreams;  // null: none configured
  std::shared_ptr<boost::asio::ssl::context> tls;        // for https upstreams
  std::string client_body;                               // the request as the client sent it
  // When the next burst prefill worker the planner asked for should register (null, or nullopt:
  // none is coming that can be counted on).
  std::function<std::optional<std::chrono::system_clock::time_point>()> next_burst;
};

class CompletionCall : public RequestSink, public std::enable_shared_from_this<CompletionCall> {
 public:
  CompletionCall(boost::asio::any_io_executor strand, std::shared_ptr<WorkerRegistry> registry,
                 std::shared_ptr<const model::Tokenizer> tokenizer, GenerationRequest request,
                 std::vector<int32_t> prompt, int max_tokens, std::string request_id,
                 std::string model_id, CallOutput output, std::shared_ptr<GatewayMetrics> metrics,
                 CallAdmission admission, CallAccounting accounting = {});

  // Submits the request to the admission queue. False (and `finish` already called) when it was
  // refused; otherwise `started` follows once it leaves the queue (or `finish` with a 503 when
  // its deadline passes first).
  bool Start();
  // Before Start: lets the call overflow to external upstreams as `overflow.rule` says.
  void AllowOverflow(CallOverflow overflow) { overflow_ = std::move(overflow); }
  // The client went away: take it out of the queue, or stop its workers.
  void Cancel();

  void OnTokens(const proto::TokenBatch& batch) override;
  void OnFailure(const AttemptFailure& failure) override;
  void OnAttemptClosed(const AttemptUsage& cost) override;

 private:
  // One attempt's ledger state; its row is written once it has both a status and its usage.
  struct Attempt {
    int number = 0;
    std::optional<AttemptStatus> status;  // none while it runs
    std::optional<AttemptUsage> usage;
    std::chrono::system_clock::time_point end;
    bool written = false;
    double cost_usd = 0;  // once written
    int upstream = -1;    // >= 0: an external attempt, on this upstream
    int64_t external_prompt_tokens = 0, external_completion_tokens = 0;  // what it is priced at
  };

  // A new attempt, through the queue. False when it was refused (the call has finished).
  bool Admit();
  // Submits the current attempt to the queue (Admit's second half).
  bool Submit();
  // Gives the call a new attempt id (and number).
  void NewAttempt();
  // External upstreams (completion_call_external.cc). Overflow: admission refused the first
  // attempt (`refusal`); it goes to an upstream, or ends with 503; false when it ended.
  bool Overflow(const router::Admission& refusal);
  // Whether this request may leave for an upstream at all: there are upstreams, its tenant is
  // pinned to no zone (upstreams have none), and its body can be proxied (WhyNotExternal).
  bool MayGoExternal() const;
  // A `cheapest` request's upstream when it is cheaper there than on self-hosted workers; -1:
  // stay.
  int CheaperUpstream() const;
  // Whether a burst prefill worker is due before the request's objective runs out.
  bool BurstDueInTime() const;
  // When a first attempt that may overflow should leave the queue for an upstream: its
  // objective less its prompt's time on a worker; nullopt: never (no objective, no upstream).
  std::optional<std::chrono::steady_clock::time_point> OverflowTime() const;
  // Its overflow time came while it waited: an upstream, or on waiting until its deadline.
  void OverflowFromQueue();
  void StartExternal(int upstream, const std::string& reason);
  void HandleExternalText(uint64_t id, const std::string& text);
  void HandleExternalEnd(uint64_t id, const ExternalEnd& end);
  // The tokens an external attempt is priced at: the upstream's usage, else our count.
  void SetExternalUsage(Attempt& attempt, const ExternalEnd& end);
  void WriteExternalRow(uint64_t attempt_id);
  // A row's common fields (who, when, what, text) for attempt `attempt_id`.
  AttemptRow BaseRow(uint64_t attempt_id, const Attempt& attempt) const;
  // Under the queue's lock, from any thread: dispatches attempt `id` to the registry.
  bool TryStart(uint64_t id, const std::vector<int32_t>& prompt, const proto::Sampling& sampling,
                const std::set<uint64_t>& exclude);
  // `own_seconds` >= 0: the gateway's own time until the attempt's first message left.
  void HandleStarted(uint64_t id, double own_seconds = -1);
  void HandleTimeout(uint64_t id);
  // Drops the current attempt, which never ran: the retried attempt before it (if any) gets
  // `prior_status` and its row, and a request that never started gets its quota back.
  void ForgetUnstartedAttempt(AttemptStatus prior_status);
  // Ends a call whose current attempt never left the queue (refused, timed out), with
  // Retry-After when retry_after_s > 0.
  void EndUnstarted(const ApiError& error, int retry_after_s);
  // `read_at`: when the registry read the batch from its worker.
  void HandleTokens(const proto::TokenBatch& batch, std::chrono::steady_clock::time_point read_at);
  // Streams `piece` to the client; the first that reaches it records the gateway's own time.
  void StreamPiece(const std::string& piece, std::chrono::steady_clock::time_point read_at);
  void HandleFailure(const AttemptFailure& failure);
  void HandleClosed(const AttemptUsage& usage);
  void Complete(const std::string& finish_reason);
  // Sends the completed response (its cost known, or given up waiting for it).
  void SendCompletion();
  void EndAttempt(AttemptStatus status);
  // Writes the attempt's row when it has a status and its usage (once).
  void MaybeWriteRow(uint64_t attempt_id);
  std::string ServerTiming() const;
  // A stream chunk with, when the request asked for token ids, those not yet sent (and the
  // prompt's, in the first).
  nlohmann::json WithNewTokenIds(nlohmann::json chunk);

  boost::asio::any_io_executor strand_;
  std::shared_ptr<WorkerRegistry> registry_;
  std::shared_ptr<const model::Tokenizer> tokenizer_;
  GenerationRequest request_;
  std::vector<int32_t> prompt_;
  int max_tokens_;
  ResponseBuilder builder_;
  CallOutput output_;
  std::shared_ptr<GatewayMetrics> metrics_;
  std::chrono::steady_clock::time_point last_token_;

  model::IncrementalDetokenizer detok_;
  model::StopStringMatcher stops_;
  std::string text_;
  int completion_tokens_ = 0;
  std::vector<int32_t> token_ids_;  // every completion token's id (a resumed attempt's prompt)
  size_t streamed_ids_ = 0;         // with return_token_ids: how many stream chunks carried
  bool streamed_prompt_ids_ = false;
  bool done_ = false;
  bool started_ = false;  // an attempt left the queue (the client's response has begun)
  int attempts_ = 0;
  int failures_ = 0;              // attempts that failed, but for want of room (or preempted)
  uint64_t ticket_ = 0;           // the current attempt's place in the queue while it waits
  uint64_t started_attempt_ = 0;  // the last attempt HandleStarted took
  CallAdmission admission_;
  proto::Sampling sampling_;
  uint64_t attempt_id_ = 0;  // the current attempt's id with the registry
  std::set<uint64_t> failed_workers_;
  // Wall times the first token's batch reported (the worker side of queue, prefill, transfer).
  double worker_queue_seconds_ = 0, prefill_seconds_ = 0, transfer_seconds_ = 0;
  std::map<uint64_t, Attempt> attempts_by_id_;
  CallAccounting accounting_;
  std::string finish_reason_;
  bool waiting_for_cost_ = false, completion_sent_ = false;
  std::unique_ptr<boost::asio::steady_timer> cost_timer_;
  CallOverflow overflow_;
  std::shared_ptr<ExternalCall> external_;  // the external attempt under way
  std::set<int> failed_upstreams_;
  // Admission may still refuse it for its objective (not once it waits for a burst worker or has
  // waited in the queue until its overflow time).
  bool refused_for_objective_ = true;
  bool overflow_deadline_ = false;  // its queue deadline is its overflow time, not the request's
  bool external_text_ = false;      // an external attempt's text reached the client
  std::optional<int64_t> usage_prompt_tokens_;  // the prompt tokens the client's usage says
  std::chrono::system_clock::time_point arrival_wall_, first_token_wall_;
  std::chrono::steady_clock::time_point arrival_, dispatched_, first_token_, end_;
  // The gateway's own time (GatewayMetrics::RecordOwnRequest and RecordOwnRelay): the first
  // attempt's id and when it went to the queue (both set before the queue may run TryStart), its
  // own time until it left (-1: unknown), and whether a stream's first text has reached the
  // client.
  uint64_t first_attempt_id_ = 0;
  std::chrono::steady_clock::time_point submitted_;
  double own_request_seconds_ = -1;
  bool streamed_text_ = false;
};

}  // namespace pdserve::gateway
