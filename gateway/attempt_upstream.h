// AttemptUpstream: where one attempt of a request runs, as the call sees it. Two
// implementations: self-hosted workers over the worker registry (gateway/worker_attempts.h)
// and external OpenAI-compatible APIs over ExternalCall (gateway/external_attempts.h); a fake
// for tests (tests/fakes/fake_attempt_upstream.h). The call (gateway/completion_call.h) starts
// and cancels attempts only through this interface and hears of them only through
// AttemptListener.
//
// An attempt's life, as its listener hears it: text (token batches from workers, text from an
// API), then either its end (a batch with a finish reason, or Finished) or Failed; and always,
// last and once, Closed with what it used, when nothing holds a part of it any more (also after
// Cancel).
//
// Threads: Start may be called from any thread (the admission queue calls it under its lock);
// Cancel from the call's strand. Listener methods are called on the strand the attempt was
// started with (AttemptSpec::strand).
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "gateway/api_error.h"
#include "router/worker_registry.h"

namespace pdserve::gateway {

// What an attempt is asked to do.
struct AttemptSpec {
  uint64_t id = 0;  // unique per attempt; workers key their state by it
  boost::asio::any_io_executor strand;
  std::shared_ptr<const std::vector<int32_t>> prompt;  // with a resumed stream's tokens so far
  proto::Sampling sampling;
  // Self-hosted: workers to avoid while others can take it, and the zones it may use (empty:
  // any).
  std::set<uint64_t> exclude_workers;
  std::set<std::string> zones;
  // External: which upstream (index into router::ExternalUpstreams::configs()).
  int upstream = -1;
};

// Why an attempt ended without finishing.
struct AttemptFault {
  std::string message;
  bool retryable = false;  // nothing reached the client from it: another attempt may serve it
  bool no_room = false;    // a decode worker had no KV pages for it now: it may wait for room
  bool preempted = false;  // a decode worker preempted it for pages: it resumes where there is room
  uint64_t failed_worker = 0;  // the worker to avoid on a retry (0: none)
  // External: the error for the client when no other attempt follows (unset: a 502 from
  // `message`).
  std::optional<ApiError> client_error;
};

// What an attempt used, once nothing holds it: its self-hosted workers' attributed step time
// and KV bytes, or the tokens an external API is paid for.
struct AttemptUse {
  router::AttemptUsage workers;  // self-hosted (attempt_id set in both cases)
  int upstream = -1;             // >= 0: an external attempt on this upstream
  int64_t api_prompt_tokens = 0, api_completion_tokens = 0;
  // External: of api_prompt_tokens, those the API says it read from its prompt cache (its
  // usage.prompt_tokens_details.cached_tokens; 0 when it said nothing).
  int64_t api_cached_prompt_tokens = 0;
};

class AttemptListener {
 public:
  virtual ~AttemptListener() = default;
  // Self-hosted: tokens from the decode (or prefill) worker; `read_at` when the registry read
  // them. A batch with a finish reason is the attempt's last.
  virtual void AttemptTokens(uint64_t id, const proto::TokenBatch& batch,
                             std::chrono::steady_clock::time_point read_at) = 0;
  // External: text as the upstream sent it.
  virtual void AttemptText(uint64_t id, const std::string& text) = 0;
  // External, for a request whose answer is relayed as the upstream wrote it
  // (RelaysUpstreamChoices): each streamed chunk's `choices` array, or the whole response's
  // (compact JSON), before that chunk's text.
  virtual void AttemptChoices(uint64_t id, const std::string& choices) {
    (void)id;
    (void)choices;
  }
  // External: the answer is complete; the tokens it is paid for (the upstream's usage, else our
  // count).
  virtual void AttemptFinished(uint64_t id, const std::string& finish_reason, int64_t prompt_tokens,
                               int64_t completion_tokens) = 0;
  virtual void AttemptFailed(uint64_t id, const AttemptFault& fault) = 0;
  virtual void AttemptClosed(const AttemptUse& use) = 0;
};

class AttemptUpstream {
 public:
  virtual ~AttemptUpstream() = default;
  // Starts the attempt; false when it cannot start now (self-hosted: no worker or pair has
  // room; the listener hears nothing). True: it runs, and the caller counts it started.
  virtual bool Start(const AttemptSpec& spec, std::shared_ptr<AttemptListener> listener) = 0;
  // Stops a started attempt; its listener hears no more text or failures, only AttemptClosed.
  virtual void Cancel(uint64_t id) = 0;
};

// What the call reads of the self-hosted workers besides starting attempts.
class WorkerCapacity {
 public:
  virtual ~WorkerCapacity() = default;
  // The most KV, in tokens, any registered decode or colocated worker holds for one request
  // (0: none registered).
  virtual int64_t LargestKvTokens() const = 0;
  // The prefill side's prompt rate and backlog.
  virtual router::PrefillCapacity Prefill() const = 0;
  // The leading tokens of `prompt` a prefill or colocated worker's prefix cache is believed to
  // hold (0: none, or not known).
  virtual int64_t CachedPromptTokens(const std::vector<int32_t>& /*prompt*/) const { return 0; }
};

}  // namespace pdserve::gateway
