// CompletionCall: one OpenAI completion or chat request from tokenized prompt to the last
// byte: dispatches it to a worker, retries on another worker while no token has reached the
// client, turns TokenBatch messages into text (incremental detokenisation, stop strings) and
// hands the HTTP session what to write. It is the RequestSink the WorkerRegistry calls.
//
// Threads: registry callbacks arrive on io threads and are posted to the owning session's strand;
// everything else runs on that strand.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <set>
#include <string>

#include "gateway/gateway_metrics.h"
#include "gateway/openai_response.h"
#include "gateway/worker_registry.h"
#include "model/detokenizer.h"
#include "model/stop_strings.h"
#include "model/tokenizer.h"

namespace pdserve::gateway {

// What the session must do next; called on the session's strand.
struct CallOutput {
  std::function<void(std::string)> write_stream;  // SSE bytes (streaming only)
  // The end: for streaming, the last SSE bytes; otherwise the whole JSON body and status.
  std::function<void(int status, std::string body, std::string server_timing, bool is_error)>
      finish;
};

class CompletionCall : public RequestSink, public std::enable_shared_from_this<CompletionCall> {
 public:
  CompletionCall(boost::asio::any_io_executor strand, std::shared_ptr<WorkerRegistry> registry,
                 std::shared_ptr<const model::Tokenizer> tokenizer, GenerationRequest request,
                 std::vector<int32_t> prompt, int max_tokens, std::string request_id,
                 std::string model_id, CallOutput output, std::shared_ptr<GatewayMetrics> metrics);

  // Sends the request to a worker. False (and `finish` already called) when none is available.
  bool Start();
  // The client went away: stop the worker.
  void Cancel();

  void OnTokens(const proto::TokenBatch& batch) override;
  void OnFailure(const std::string& message, bool retryable, uint64_t failed_worker) override;
  void OnAttemptClosed(const AttemptUsage& cost) override;

 private:
  void HandleTokens(const proto::TokenBatch& batch);
  void HandleFailure(const std::string& message, bool retryable, uint64_t failed_worker);
  void Complete(const std::string& finish_reason);
  std::string ServerTiming() const;

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
  bool done_ = false;
  int attempts_ = 0;
  uint64_t attempt_id_ = 0;  // the current attempt's id with the registry
  std::set<uint64_t> failed_workers_;
  // Wall times the first token's batch reported (the worker side of queue, prefill, transfer).
  double worker_queue_seconds_ = 0, prefill_seconds_ = 0, transfer_seconds_ = 0;
  std::vector<AttemptUsage> closed_attempts_;
  std::chrono::steady_clock::time_point arrival_, dispatched_, first_token_;
};

}  // namespace pdserve::gateway
