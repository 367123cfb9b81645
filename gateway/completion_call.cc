#include "gateway/completion_call.h"

#include <atomic>
#include <cstdio>

namespace pdserve::gateway {

namespace {
constexpr int kMaxAttempts = 3;
std::atomic<uint64_t> g_next_request{1};

double Seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}
}  // namespace

CompletionCall::CompletionCall(boost::asio::any_io_executor strand,
                               std::shared_ptr<WorkerRegistry> registry,
                               std::shared_ptr<const model::Tokenizer> tokenizer,
                               GenerationRequest request, std::vector<int32_t> prompt,
                               int max_tokens, std::string request_id, std::string model_id,
                               CallOutput output, std::shared_ptr<GatewayMetrics> metrics)
    : strand_(std::move(strand)),
      registry_(std::move(registry)),
      tokenizer_(tokenizer),
      request_(std::move(request)),
      prompt_(std::move(prompt)),
      max_tokens_(max_tokens),
      builder_(request_.endpoint, std::move(request_id), std::move(model_id),
               std::chrono::duration_cast<std::chrono::seconds>(
                   std::chrono::system_clock::now().time_since_epoch())
                   .count()),
      output_(std::move(output)),
      metrics_(std::move(metrics)),
      detok_(tokenizer),
      stops_(request_.stop),
      arrival_(std::chrono::steady_clock::now()) {}

bool CompletionCall::Start() {
  proto::Sampling sampling;
  proto::Sampling* s = &sampling;
  s->set_temperature(request_.temperature);
  s->set_top_p(request_.top_p);
  s->set_top_k(request_.top_k);
  if (request_.seed) {
    s->set_has_seed(true);
    s->set_seed(*request_.seed);
  }
  s->set_max_tokens(max_tokens_);
  s->set_ignore_eos(request_.ignore_eos);
  if (!request_.ignore_eos) {
    for (int32_t id : tokenizer_->eos_ids()) s->add_stop_token_ids(id);
  }
  ++attempts_;
  attempt_id_ = g_next_request.fetch_add(1);
  auto worker =
      registry_->Dispatch(attempt_id_, prompt_, sampling, shared_from_this(), failed_workers_);
  if (!worker.ok()) {
    done_ = true;
    if (attempts_ > 1) {  // a retry found no worker: the request was counted as running
      metrics_->running().Decrement();
      metrics_->RecordFailed();
    }
    const ApiError e = ApiError::Unavailable(worker.status().message());
    if (request_.stream && attempts_ > 1) {
      output_.finish(e.http_status, SseError(e) + SseDone(), "", true);
    } else {
      output_.finish(e.http_status, e.ToJson().dump(), "", true);
    }
    return false;
  }
  dispatched_ = std::chrono::steady_clock::now();
  if (attempts_ == 1) metrics_->running().Increment();
  return true;
}

void CompletionCall::Cancel() {
  if (done_) return;
  done_ = true;
  metrics_->running().Decrement();
  metrics_->RecordFinished("abort", Seconds(std::chrono::steady_clock::now() - arrival_),
                           static_cast<int>(prompt_.size()), completion_tokens_);
  registry_->Cancel(attempt_id_);
}

void CompletionCall::OnTokens(const proto::TokenBatch& batch) {
  boost::asio::post(strand_, [self = shared_from_this(), batch] { self->HandleTokens(batch); });
}

void CompletionCall::OnFailure(const std::string& message, bool retryable, uint64_t failed_worker) {
  boost::asio::post(strand_, [self = shared_from_this(), message, retryable, failed_worker] {
    self->HandleFailure(message, retryable, failed_worker);
  });
}

void CompletionCall::OnAttemptClosed(const AttemptUsage& cost) {
  boost::asio::post(strand_,
                    [self = shared_from_this(), cost] { self->closed_attempts_.push_back(cost); });
}

void CompletionCall::HandleTokens(const proto::TokenBatch& batch) {
  if (done_) return;
  if (completion_tokens_ == 0 && batch.tokens_size() > 0) {
    worker_queue_seconds_ = batch.queue_seconds();
    prefill_seconds_ = batch.prefill_seconds();
    transfer_seconds_ = batch.transfer_seconds();
  }
  std::string piece;
  const int n = batch.tokens_size();
  const auto now = std::chrono::steady_clock::now();
  if (n > 0) {
    if (completion_tokens_ == 0) {
      metrics_->RecordFirstToken(Seconds(now - arrival_));
    } else {
      metrics_->RecordInterToken(Seconds(now - last_token_) / n);
    }
    last_token_ = now;
  }
  for (int i = 0; i < n; ++i) {
    if (completion_tokens_ == 0 && first_token_ == std::chrono::steady_clock::time_point{}) {
      first_token_ = std::chrono::steady_clock::now();
    }
    ++completion_tokens_;
    if (i == n - 1 && batch.last_is_stop_token()) break;  // an end-of-sequence token has no text
    piece += stops_.Push(detok_.Add(batch.tokens(i)));
    if (stops_.stopped()) break;
  }
  if (stops_.stopped()) {
    registry_->Cancel(attempt_id_);
    text_ += piece;
    if (request_.stream && !piece.empty()) output_.write_stream(SseEvent(builder_.Delta(piece)));
    return Complete("stop");
  }
  if (!batch.finish_reason().empty()) {
    piece += stops_.Push(detok_.Flush());
    piece += stops_.Flush();
  }
  text_ += piece;
  if (request_.stream && !piece.empty()) output_.write_stream(SseEvent(builder_.Delta(piece)));
  if (!batch.finish_reason().empty())
    Complete(batch.finish_reason() == "cancelled" ? "stop" : batch.finish_reason());
}

void CompletionCall::HandleFailure(const std::string& message, bool retryable,
                                   uint64_t failed_worker) {
  if (done_) return;
  if (retryable && completion_tokens_ == 0 && attempts_ < kMaxAttempts) {
    failed_workers_.insert(failed_worker);
    Start();
    return;
  }
  done_ = true;
  metrics_->running().Decrement();
  metrics_->RecordFailed();
  ApiError e = ApiError::Internal("request failed: " + message);
  e.http_status = 502;
  e.code = "worker_failed";
  if (request_.stream) {
    output_.finish(e.http_status, SseError(e) + SseDone(), "", true);
  } else {
    output_.finish(e.http_status, e.ToJson().dump(), "", true);
  }
}

std::string CompletionCall::ServerTiming() const {
  const auto now = std::chrono::steady_clock::now();
  const double decode =
      first_token_ == std::chrono::steady_clock::time_point{} ? 0 : Seconds(now - first_token_);
  char buf[256];
  std::snprintf(
      buf, sizeof buf,
      "queue;dur=%.3f, prefill;dur=%.3f, kv_transfer;dur=%.3f, decode;dur=%.3f, total;dur=%.3f",
      (Seconds(dispatched_ - arrival_) + worker_queue_seconds_) * 1e3, prefill_seconds_ * 1e3,
      transfer_seconds_ * 1e3, decode * 1e3, Seconds(now - arrival_) * 1e3);
  return buf;
}

void CompletionCall::Complete(const std::string& finish_reason) {
  done_ = true;
  metrics_->running().Decrement();
  metrics_->RecordFinished(finish_reason, Seconds(std::chrono::steady_clock::now() - arrival_),
                           static_cast<int>(prompt_.size()), completion_tokens_);
  const Usage usage{static_cast<int>(prompt_.size()), completion_tokens_};
  if (request_.stream) {
    std::string tail = SseEvent(builder_.Finish(finish_reason));
    if (request_.include_usage) tail += SseEvent(builder_.UsageChunk(usage));
    tail += SseComment("server-timing: " + ServerTiming());
    tail += SseDone();
    output_.finish(200, std::move(tail), "", false);
  } else {
    output_.finish(200, builder_.Full(text_, finish_reason, usage).dump(), ServerTiming(), false);
  }
}

}  // namespace pdserve::gateway
