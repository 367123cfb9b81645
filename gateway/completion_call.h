// CompletionCall: one OpenAI completion or chat request from tokenized prompt to the last byte,
// as a state machine over its attempts. It submits the request to the admission queue
// (router/admission_queue.h), which starts it on workers or refuses it (429: its TTFT SLO is out
// of reach; 503: its queue deadline passed, both with Retry-After); it retries on other workers
// while no token has reached the client (a decode worker that had no room sends it back to the
// queue), and resumes a stream under way on other workers when its decode worker preempts it or
// is lost (the tokens sent so far prefilled again: the client's stream goes on with no gap and
// no repeat).
//
// Attempts start and stop only through AttemptUpstream (gateway/attempt_upstream.h): self-hosted
// workers, and external APIs for a tenant whose overflow rule allows them, where the overflow
// policy (gateway/overflow_policy.h) sends it: at arrival when cheaper (`cheapest`), when
// admission refuses it for its objective, when it has waited until its objective less its own
// prompt's time, and after an upstream failed before any text. The response side (text, stop
// strings, OpenAI bodies and SSE) is ResponseStream's; each attempt is priced once, when its
// status and what it used are both known, by AttemptAccounting, whose figure goes to the ledger
// row, the metrics, the x-pdserve-cost-usd header and usage.cost_usd. A completed request's row
// is written before its last bytes go out. usage.prompt_tokens_details.cached_tokens is the
// cached prompt tokens of the attempt whose first output started the response (its worker's
// first-token TokenBatch.cached_tokens, or an external API's usage), never above prompt_tokens.
//
// A request of several choices (OpenAI's n) runs on one worker that prefills its prompt once
// (Sampling.n); each choice has its ResponseStream, a stream sends each choice's chunks as they
// come and its finishing chunk when it ends, and the request ends with its last choice. Its
// usage and ledger row count the prompt once and every choice's tokens. It retries while no
// token has come, but does not resume: a worker lost after its first token fails it (502).
//
// An external upstream's answer to a request with tools, logprobs, several choices or echo is
// relayed as the upstream wrote its `choices` (each streamed chunk's, or the whole response's,
// under this response's id and model), with this gateway's usage and cost; other answers are
// re-rendered from the upstream's text.
//
// Threads: the admission queue calls TryStart under its lock on any thread; everything else runs
// on the strand the call was made with (listener calls arrive there).
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

#include "gateway/attempt_accounting.h"
#include "gateway/attempt_upstream.h"
#include "gateway/gateway_metrics.h"
#include "gateway/overflow_policy.h"
#include "gateway/response_stream.h"
#include "gateway/tenant_quota.h"
#include "router/admission_queue.h"

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

// The self-hosted workers.
struct CallWorkers {
  std::shared_ptr<AttemptUpstream> attempts;
  std::shared_ptr<const WorkerCapacity> capacity;
};

// Where the call may go beyond self-hosted workers.
struct CallOverflow {
  router::OverflowRule rule = router::OverflowRule::kNever;
  std::shared_ptr<router::ExternalUpstreams> upstreams;  // null: none configured
  std::shared_ptr<AttemptUpstream> attempts;             // starts attempts on them
  // Why this request's body may not be proxied ("" when it may: WhyNotExternal).
  std::string why_not_external;
  // When the next burst prefill worker the planner asked for should register (null, or nullopt:
  // none is coming that can be counted on).
  std::function<std::optional<std::chrono::system_clock::time_point>()> next_burst;
};

class CompletionCall : public AttemptListener, public std::enable_shared_from_this<CompletionCall> {
 public:
  CompletionCall(boost::asio::any_io_executor strand, CallWorkers workers,
                 std::shared_ptr<const tokenizer::Tokenizer> tokenizer, GenerationRequest request,
                 std::vector<int32_t> prompt, int max_tokens, std::string request_id,
                 std::string model_id, CallOutput output, std::shared_ptr<GatewayMetrics> metrics,
                 CallAdmission admission, CallAccounting accounting = {});

  // Submits the request to the admission queue. False (and `finish` already called) when it was
  // refused; otherwise `started` follows once it leaves the queue (or `finish` with a 503 when
  // its deadline passes first).
  bool Start();
  // Before Start: lets the call overflow to external upstreams as `overflow.rule` says.
  void AllowOverflow(CallOverflow overflow) { overflow_ = std::move(overflow); }
  // The client went away: take it out of the queue, or stop its attempt.
  void Cancel();

  void AttemptTokens(uint64_t id, const proto::TokenBatch& batch,
                     std::chrono::steady_clock::time_point read_at) override;
  void AttemptText(uint64_t id, const std::string& text) override;
  void AttemptChoices(uint64_t id, const std::string& choices) override;
  void AttemptFinished(uint64_t id, const std::string& finish_reason, int64_t prompt_tokens,
                       int64_t completion_tokens) override;
  void AttemptFailed(uint64_t id, const AttemptFault& fault) override;
  void AttemptClosed(const AttemptUse& use) override;

 private:
  // One attempt's ledger state; its row is written once it has both a status and its use.
  struct Attempt {
    int number = 0;
    std::optional<ledger::AttemptStatus> status;  // none while it runs
    std::optional<AttemptUse> use;
    std::chrono::system_clock::time_point end;
    bool written = false;
    double cost_usd = 0;  // once written
    int upstream = -1;    // >= 0: an external attempt, on this upstream
    // Self-hosted: the prompt tokens its prefill (or colocated) worker found in its prefix cache,
    // as its first-token batch said (TokenBatch.cached_tokens).
    int64_t cached_prompt_tokens = 0;
  };

  // A new attempt, through the queue (or to an upstream). False when the call has finished.
  bool Admit();
  // Submits the current attempt to the queue (Admit's second half).
  bool Submit();
  void NewAttempt();
  // The overflow policy's facts at `moment` (gateway/overflow_policy.h).
  RouteFacts Facts(RouteMoment moment) const;
  // Admission refused the first attempt for its objective: an upstream, a wait for a burst
  // worker, or 503; false when it ended.
  bool Overflow(const router::Admission& refusal);
  // When a first attempt that may overflow should leave the queue for an upstream: its
  // objective less its prompt's time on a worker; nullopt: never.
  std::optional<std::chrono::steady_clock::time_point> OverflowTime() const;
  // Its prompt's time on one prefill worker at their mean measured rate (0: none measured).
  double OwnPromptSeconds() const;
  void OverflowFromQueue();
  void StartExternal(int upstream, const std::string& reason);
  // Under the queue's lock, from any thread: starts attempt `id` on the workers.
  bool TryStart(uint64_t id, std::shared_ptr<const std::vector<int32_t>> prompt,
                const proto::Sampling& sampling, const std::set<uint64_t>& exclude);
  // `own_seconds` >= 0: the gateway's own time until the attempt's first message left.
  void HandleStarted(uint64_t id, double own_seconds = -1);
  void HandleTimeout(uint64_t id);
  // Drops the current attempt, which never ran: the retried attempt before it (if any) gets
  // `prior_status` and its row, and a request that never started gets its quota back.
  void ForgetUnstartedAttempt(ledger::AttemptStatus prior_status);
  // Ends a call whose current attempt never left the queue, with Retry-After when > 0. A request
  // that never ran and was refused or timed out in the queue (`decision`: "refused",
  // "queue_timeout") leaves a row of status refused; "" for one that leaves none (a bad request).
  void EndUnstarted(const ApiError& error, int retry_after_s, const std::string& decision = "");
  // Ends a started call with an error (its stream's error event, or the error body).
  void Fail(const ApiError& error);
  void StreamPiece(ResponseStream& choice, const std::string& piece,
                   std::chrono::steady_clock::time_point read_at);
  // Choice `index` (0: response_) and every choice's tokens.
  ResponseStream& Choice(int index) { return index == 0 ? response_ : *more_choices_[index - 1]; }
  int CompletionTokens() const;
  // A request of several choices: choice `index` ended (`by_gateway`: a stop string, while its
  // worker may go on); the request completes with the last.
  void EndChoice(int index, const std::string& finish_reason, bool by_gateway);
  void Complete(const std::string& finish_reason);
  // Sends the completed response (its cost known, or given up waiting for it).
  void SendCompletion();
  void EndAttempt(ledger::AttemptStatus status);
  // Writes the attempt's row when it has a status and its use (once).
  void MaybeWriteRow(uint64_t attempt_id);
  ledger::AttemptRow BaseRow(uint64_t attempt_id, const Attempt& attempt) const;
  // The usage's cached prompt tokens (see the header comment); 0 when none were reported.
  int64_t UsageCachedTokens() const;
  std::string ServerTiming() const;
  bool is_current_external() const;
  // The request's first output (a token, or an external upstream's text) reached it at `now`:
  // its first-token times and the TTFT metric.
  void NoteFirstOutput(std::chrono::steady_clock::time_point now);

  boost::asio::any_io_executor strand_;
  CallWorkers workers_;
  std::shared_ptr<const tokenizer::Tokenizer> tokenizer_;
  GenerationRequest request_;
  const int max_tokens_;
  ResponseStream response_;
  // Choices 1 to n - 1, their finish reasons (every choice's; "" while it runs), how many run.
  std::vector<std::unique_ptr<ResponseStream>> more_choices_;
  std::vector<std::string> choice_finish_;
  int open_choices_ = 1;
  bool choice_stopped_by_gateway_ = false;  // its worker still runs it
  CallOutput output_;
  std::shared_ptr<GatewayMetrics> metrics_;
  CallAdmission admission_;
  AttemptAccounting accounting_;
  CallOverflow overflow_;
  proto::Sampling sampling_;

  bool done_ = false;
  bool started_ = false;  // an attempt left the queue (the client's response has begun)
  int attempts_ = 0;
  int failures_ = 0;              // attempts that failed, but for want of room (or preempted)
  uint64_t ticket_ = 0;           // the current attempt's place in the queue while it waits
  uint64_t attempt_id_ = 0;       // the current attempt's id
  uint64_t started_attempt_ = 0;  // the last attempt HandleStarted took
  std::set<uint64_t> failed_workers_;
  std::set<int> failed_upstreams_;
  std::map<uint64_t, Attempt> attempts_by_id_;
  std::string finish_reason_;
  bool waiting_for_cost_ = false, completion_sent_ = false;
  std::unique_ptr<boost::asio::steady_timer> cost_timer_;
  // Admission may still refuse it for its objective (not once it waits for a burst worker or has
  // waited in the queue until its overflow time).
  bool refused_for_objective_ = true;
  bool overflow_deadline_ = false;  // its queue deadline is its overflow time, not the request's
  // Refused for its objective, it waits for a burst worker due in time, until its overflow time.
  bool waiting_for_burst_ = false;
  bool external_text_ = false;  // an external attempt's text reached the client
  // An upstream's choices were relayed as it wrote them (RelaysUpstreamChoices): a stream's
  // chunks went out as they came, and a whole response's choices are these.
  bool relayed_choices_ = false;
  nlohmann::json upstream_choices_;
  // Admission's decision for the request and what it predicted at its first Submit: every row's
  // admission and predicted_* columns (ledger/ledger.h).
  std::string admission_decision_;
  double predicted_queue_s_ = 0, predicted_ttft_s_ = 0;
  bool predicted_ = false;
  std::optional<int64_t> usage_prompt_tokens_;  // the prompt tokens the client's usage says
  // The attempt whose first output started the client's response: its cached prompt tokens are
  // the usage's (a resumed attempt prefills the request's prompt and the tokens so far again,
  // which is not the client's prompt; its own count goes to its ledger row only).
  uint64_t first_output_attempt_ = 0;
  // Wall times the first token's batch reported (the worker side of queue, prefill, transfer).
  double worker_queue_seconds_ = 0, prefill_seconds_ = 0, transfer_seconds_ = 0;
  std::chrono::system_clock::time_point arrival_wall_, first_token_wall_;
  std::chrono::steady_clock::time_point arrival_, dispatched_, first_token_, last_token_, end_;
  // The gateway's own time (GatewayMetrics::RecordOwnRequest and RecordOwnRelay): the first
  // attempt's id and when it went to the queue (both set before the queue may run TryStart), its
  // own time until it left (-1: unknown), and whether a stream's first text reached the client.
  uint64_t first_attempt_id_ = 0;
  std::chrono::steady_clock::time_point submitted_;
  double own_request_seconds_ = -1;
  bool streamed_text_ = false;
};

}  // namespace pdserve::gateway
