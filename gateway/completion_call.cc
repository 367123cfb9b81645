#include "gateway/completion_call.h"

#include <spdlog/spdlog.h>

#include <atomic>
#include <cstdio>

#include "common/json_text.h"
#include "gateway/ledger_rows.h"

namespace pdserve::gateway {

namespace {
constexpr int kMaxAttempts = 3;
// How long a completed response waits for its attempt's cost (the workers' last step reports).
constexpr auto kCostWait = std::chrono::seconds(5);
// Attempt ids, which workers key their state by, start from this process's start time in
// milliseconds times 2^16: a gateway that restarts never hands out an id of the one before it
// (which would have had to start 65,536 attempts a millisecond), so the state workers keep of
// the old gateway's attempts (a failed transfer's entry) cannot meet a new one.
std::atomic<uint64_t> g_next_request{
    static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count())
    << 16};

double Seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}
}  // namespace

CompletionCall::CompletionCall(boost::asio::any_io_executor strand,
                               std::shared_ptr<WorkerRegistry> registry,
                               std::shared_ptr<const model::Tokenizer> tokenizer,
                               GenerationRequest request, std::vector<int32_t> prompt,
                               int max_tokens, std::string request_id, std::string model_id,
                               CallOutput output, std::shared_ptr<GatewayMetrics> metrics,
                               CallAccounting accounting)
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
      accounting_(std::move(accounting)),
      arrival_wall_(std::chrono::system_clock::now()),
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
  const uint64_t previous = attempt_id_;
  ++attempts_;
  attempt_id_ = g_next_request.fetch_add(1);
  attempts_by_id_[attempt_id_].number = attempts_;
  auto worker =
      registry_->Dispatch(attempt_id_, prompt_, sampling, shared_from_this(), failed_workers_);
  if (!worker.ok()) {
    attempts_by_id_.erase(attempt_id_);  // it never ran
    if (auto it = attempts_by_id_.find(previous);
        it != attempts_by_id_.end() && !it->second.written) {
      it->second.status = kStatusError;  // no retry happened after all: the request failed
      MaybeWriteRow(previous);
    }
    done_ = true;
    if (attempts_ > 1) {  // a retry found no worker: the request was counted as running
      metrics_->running().Decrement();
      metrics_->RecordFailed();
    }
    const ApiError e = ApiError::Unavailable(worker.status().message());
    if (request_.stream && attempts_ > 1) {
      output_.finish(e.http_status, SseError(e) + SseDone(), {}, true);
    } else {
      output_.finish(e.http_status, DumpJson(e.ToJson()), {}, true);
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
  finish_reason_ = "abort";
  EndAttempt(kStatusCancelled);
  registry_->Cancel(attempt_id_);
}

void CompletionCall::EndAttempt(const std::string& status) {
  end_ = std::chrono::steady_clock::now();
  Attempt& a = attempts_by_id_[attempt_id_];
  a.status = status;
  a.end = std::chrono::system_clock::now();
  MaybeWriteRow(attempt_id_);
}

void CompletionCall::OnTokens(const proto::TokenBatch& batch) {
  boost::asio::post(strand_, [self = shared_from_this(), batch] { self->HandleTokens(batch); });
}

void CompletionCall::OnFailure(const std::string& message, bool retryable, uint64_t failed_worker) {
  boost::asio::post(strand_, [self = shared_from_this(), message, retryable, failed_worker] {
    self->HandleFailure(message, retryable, failed_worker);
  });
}

void CompletionCall::OnAttemptClosed(const AttemptUsage& usage) {
  boost::asio::post(strand_, [self = shared_from_this(), usage] { self->HandleClosed(usage); });
}

void CompletionCall::HandleClosed(const AttemptUsage& usage) {
  auto it = attempts_by_id_.find(usage.attempt_id);
  if (it == attempts_by_id_.end()) return;
  it->second.usage = usage;
  if (usage.attempt_id == attempt_id_ && waiting_for_cost_) return SendCompletion();
  MaybeWriteRow(usage.attempt_id);
}

void CompletionCall::MaybeWriteRow(uint64_t attempt_id) {
  Attempt& a = attempts_by_id_[attempt_id];
  if (a.written || a.status.empty() || !a.usage) return;
  a.written = true;
  const bool final_attempt = attempt_id == attempt_id_;
  AttemptRow row;
  row.request_id = builder_.id();
  row.attempt = a.number;
  row.tenant = accounting_.tenant;
  row.model = request_.model;
  row.endpoint = request_.endpoint == Endpoint::kChatCompletions ? "chat" : "completions";
  row.status = a.status;
  row.finish_reason = final_attempt ? finish_reason_ : "";
  row.arrival_unix = UnixSeconds(arrival_wall_);
  row.end_unix = UnixSeconds(a.end);
  row.prompt_tokens = static_cast<int64_t>(prompt_.size());
  if (final_attempt) {
    if (completion_tokens_ > 0) row.first_token_unix = UnixSeconds(first_token_wall_);
    row.completion_tokens = completion_tokens_;
    row.queue_seconds = Seconds(dispatched_ - arrival_) + worker_queue_seconds_;
    row.prefill_seconds = prefill_seconds_;
    row.transfer_seconds = transfer_seconds_;
    if (completion_tokens_ > 0) row.decode_seconds = Seconds(end_ - first_token_);
  }
  row.tags = accounting_.tags;
  row.user = request_.user;
  if (accounting_.store_text && final_attempt) {
    if (request_.endpoint == Endpoint::kChatCompletions) {
      nlohmann::json messages = nlohmann::json::array();
      for (const auto& m : request_.messages) {
        messages.push_back({{"role", m.role}, {"content", m.content}});
      }
      row.prompt_text = DumpJson(messages);
    } else {
      row.prompt_text = request_.prompt;
    }
    row.completion_text = text_;
  }
  PriceRow(*a.usage, accounting_.egress_usd_per_gb, &row);
  a.cost_usd = row.cost_usd;
  metrics_->RecordCost(accounting_.tenant, row.prefill_worker.capacity_class,
                       ComputeCostUsd(row.prefill_step_seconds, row.prefill_worker));
  metrics_->RecordCost(accounting_.tenant, row.decode_worker.capacity_class,
                       ComputeCostUsd(row.decode_step_seconds, row.decode_worker));
  if (accounting_.ledger) {
    if (Status s = accounting_.ledger->Append(row); !s.ok()) {
      spdlog::error("ledger: could not record {} attempt {}: {}", row.request_id, row.attempt,
                    s.ToString());
    }
  }
}

void CompletionCall::HandleTokens(const proto::TokenBatch& batch) {
  if (done_) return;
  if (completion_tokens_ == 0 && batch.tokens_size() > 0) {
    first_token_wall_ = std::chrono::system_clock::now();
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
    if (request_.return_token_ids) token_ids_.push_back(batch.tokens(i));
    if (i == n - 1 && batch.last_is_stop_token()) break;  // an end-of-sequence token has no text
    piece += stops_.Push(detok_.Add(batch.tokens(i)));
    if (stops_.stopped()) break;
  }
  if (stops_.stopped()) {
    registry_->Cancel(attempt_id_);
    text_ += piece;
    if (request_.stream && !piece.empty()) {
      output_.write_stream(SseEvent(WithNewTokenIds(builder_.Delta(piece))));
    }
    return Complete("stop");
  }
  if (!batch.finish_reason().empty()) {
    piece += stops_.Push(detok_.Flush());
    piece += stops_.Flush();
  }
  text_ += piece;
  if (request_.stream && !piece.empty()) {
    output_.write_stream(SseEvent(WithNewTokenIds(builder_.Delta(piece))));
  }
  if (!batch.finish_reason().empty())
    Complete(batch.finish_reason() == "cancelled" ? "stop" : batch.finish_reason());
}

void CompletionCall::HandleFailure(const std::string& message, bool retryable,
                                   uint64_t failed_worker) {
  if (done_) return;
  if (retryable && completion_tokens_ == 0 && attempts_ < kMaxAttempts) {
    failed_workers_.insert(failed_worker);
    EndAttempt(kStatusRetried);
    Start();
    return;
  }
  done_ = true;
  metrics_->running().Decrement();
  metrics_->RecordFailed();
  finish_reason_ = "error";
  EndAttempt(kStatusError);
  ApiError e = ApiError::Internal("request failed: " + message);
  e.http_status = 502;
  e.code = "worker_failed";
  if (request_.stream) {
    output_.finish(e.http_status, SseError(e) + SseDone(), {}, true);
  } else {
    output_.finish(e.http_status, DumpJson(e.ToJson()), {}, true);
  }
}

nlohmann::json CompletionCall::WithNewTokenIds(nlohmann::json chunk) {
  if (!request_.return_token_ids) return chunk;
  const std::vector<int32_t> fresh(token_ids_.begin() + static_cast<std::ptrdiff_t>(streamed_ids_),
                                   token_ids_.end());
  streamed_ids_ = token_ids_.size();
  ResponseBuilder::AddTokenIds(chunk, fresh, streamed_prompt_ids_ ? nullptr : &prompt_);
  streamed_prompt_ids_ = true;
  return chunk;
}

std::string CompletionCall::ServerTiming() const {
  const auto now = end_;
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
  finish_reason_ = finish_reason;
  EndAttempt(kStatusOk);
  if (attempts_by_id_[attempt_id_].written) return SendCompletion();
  // The workers' last step reports and end messages are behind the last tokens, or (after a
  // stop string) the decode worker confirms the cancel within a step: wait for them, boundedly.
  waiting_for_cost_ = true;
  cost_timer_ = std::make_unique<boost::asio::steady_timer>(strand_, kCostWait);
  cost_timer_->async_wait([self = shared_from_this()](boost::system::error_code ec) {
    if (!ec) self->SendCompletion();
  });
}

void CompletionCall::SendCompletion() {
  if (completion_sent_) return;
  completion_sent_ = true;
  waiting_for_cost_ = false;
  if (cost_timer_) cost_timer_->cancel();
  // The row is committed before the client sees the end of the response.
  MaybeWriteRow(attempt_id_);
  const Attempt& attempt = attempts_by_id_[attempt_id_];
  const std::optional<double> cost =
      attempt.written ? std::optional<double>(attempt.cost_usd) : std::nullopt;
  if (!cost) {
    spdlog::warn("{}: the workers did not report the attempt's cost within {} s", builder_.id(),
                 kCostWait.count());
  }
  const Usage usage{static_cast<int>(prompt_.size()), completion_tokens_};
  const nlohmann::json extra = cost ? nlohmann::json{{"cost_usd", *cost}} : nlohmann::json(nullptr);
  char cost_text[64] = "";
  if (cost) std::snprintf(cost_text, sizeof cost_text, "%.12g", *cost);
  if (request_.stream) {
    std::string tail = SseEvent(WithNewTokenIds(builder_.Finish(finish_reason_)));
    if (request_.include_usage) tail += SseEvent(builder_.UsageChunk(usage, extra));
    tail += SseComment("server-timing: " + ServerTiming());
    if (cost) tail += SseComment(std::string("x-pdserve-cost-usd: ") + cost_text);
    tail += SseDone();
    output_.finish(200, std::move(tail), {}, false);
  } else {
    HttpHeaders headers{{"server-timing", ServerTiming()}};
    if (cost) headers.emplace_back("x-pdserve-cost-usd", cost_text);
    nlohmann::json body = builder_.Full(text_, finish_reason_, usage, extra);
    if (request_.return_token_ids) ResponseBuilder::AddTokenIds(body, token_ids_, &prompt_);
    output_.finish(200, DumpJson(body), std::move(headers), false);
  }
}

}  // namespace pdserve::gateway
