// CompletionCall: one OpenAI completion or chat request from tokenized prompt to the last
// byte: dispatches it to a worker, retries on another worker while no token has reached the
// client, turns TokenBatch messages into text (incremental detokenisation, stop strings) and
// hands the HTTP session what to write. It is the RequestSink the WorkerRegistry calls. Every
// attempt gets one ledger row once its workers are done with it (status ok, cancelled, error or
// retried); a completed request's row is written before its last bytes go out, and its cost is
// returned in the x-pdserve-cost-usd header and as usage.cost_usd.
//
// Threads: registry callbacks arrive on io threads and are posted to the owning session's strand;
// everything else runs on that strand.
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

#include "gateway/gateway_metrics.h"
#include "gateway/openai_response.h"
#include "ledger/ledger.h"
#include "router/worker_registry.h"
#include "tokenizer/detokenizer.h"
#include "tokenizer/stop_strings.h"
#include "tokenizer/tokenizer.h"

namespace pdserve::gateway {

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

// What the session must do next; called on the session's strand.
struct CallOutput {
  std::function<void(std::string)> write_stream;  // SSE bytes (streaming only)
  // The end: for streaming, the last SSE bytes; otherwise the whole JSON body, status and
  // headers (server-timing, x-pdserve-cost-usd).
  std::function<void(int status, std::string body, HttpHeaders headers, bool is_error)> finish;
};

// Who asked and how the call is accounted.
struct CallAccounting {
  std::shared_ptr<Ledger> ledger;           // null: no ledger
  bool store_text = false;                  // keep prompt and completion text in the ledger
  double egress_usd_per_gb = 0;             // KV bytes crossing zones
  std::string tenant;                       // from the API key; "" without authentication
  std::map<std::string, std::string> tags;  // x-pdserve-tags
};

class CompletionCall : public RequestSink, public std::enable_shared_from_this<CompletionCall> {
 public:
  CompletionCall(boost::asio::any_io_executor strand, std::shared_ptr<WorkerRegistry> registry,
                 std::shared_ptr<const model::Tokenizer> tokenizer, GenerationRequest request,
                 std::vector<int32_t> prompt, int max_tokens, std::string request_id,
                 std::string model_id, CallOutput output, std::shared_ptr<GatewayMetrics> metrics,
                 CallAccounting accounting = {});

  // Sends the request to a worker. False (and `finish` already called) when none is available.
  bool Start();
  // The client went away: stop the worker.
  void Cancel();

  void OnTokens(const proto::TokenBatch& batch) override;
  void OnFailure(const std::string& message, bool retryable, uint64_t failed_worker) override;
  void OnAttemptClosed(const AttemptUsage& cost) override;

 private:
  // One attempt's ledger state; its row is written once it has both a status and its usage.
  struct Attempt {
    int number = 0;
    std::string status;  // "" while it runs; then ok, cancelled, error or retried
    std::optional<AttemptUsage> usage;
    std::chrono::system_clock::time_point end;
    bool written = false;
    double cost_usd = 0;  // once written
  };

  void HandleTokens(const proto::TokenBatch& batch);
  void HandleFailure(const std::string& message, bool retryable, uint64_t failed_worker);
  void HandleClosed(const AttemptUsage& usage);
  void Complete(const std::string& finish_reason);
  // Sends the completed response (its cost known, or given up waiting for it).
  void SendCompletion();
  void EndAttempt(const std::string& status);
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
  std::vector<int32_t> token_ids_;  // with return_token_ids: every completion token's id
  size_t streamed_ids_ = 0;         // how many of them stream chunks carried
  bool streamed_prompt_ids_ = false;
  bool done_ = false;
  int attempts_ = 0;
  uint64_t attempt_id_ = 0;  // the current attempt's id with the registry
  std::set<uint64_t> failed_workers_;
  // Wall times the first token's batch reported (the worker side of queue, prefill, transfer).
  double worker_queue_seconds_ = 0, prefill_seconds_ = 0, transfer_seconds_ = 0;
  std::map<uint64_t, Attempt> attempts_by_id_;
  CallAccounting accounting_;
  std::string finish_reason_;
  bool waiting_for_cost_ = false, completion_sent_ = false;
  std::unique_ptr<boost::asio::steady_timer> cost_timer_;
  std::chrono::system_clock::time_point arrival_wall_, first_token_wall_;
  std::chrono::steady_clock::time_point arrival_, dispatched_, first_token_, end_;
};

}  // namespace pdserve::gateway
