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
                               CallAdmission admission, CallAccounting accounting)
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
      admission_(std::move(admission)),
      accounting_(std::move(accounting)) {
  const auto now = std::chrono::steady_clock::now();
  arrival_ =
      admission_.received == std::chrono::steady_clock::time_point{} ? now : admission_.received;
  arrival_wall_ = std::chrono::system_clock::now() -
                  std::chrono::duration_cast<std::chrono::system_clock::duration>(now - arrival_);
}

bool CompletionCall::Start() {
  proto::Sampling* s = &sampling_;
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
  return Admit();
}

void CompletionCall::NewAttempt() {
  ++attempts_;
  attempt_id_ = g_next_request.fetch_add(1);
  attempts_by_id_[attempt_id_].number = attempts_;
}

bool CompletionCall::Admit() {
  NewAttempt();
  if (attempts_ == 1) first_attempt_id_ = attempt_id_;
  // A request no registered worker could ever hold would wait out its deadline for nothing.
  const int64_t kv_tokens = static_cast<int64_t>(prompt_.size()) + max_tokens_;
  if (const int64_t largest = registry_->LargestKvTokens(); largest > 0 && kv_tokens > largest) {
    ApiError e = ApiError::BadRequest(
        "This request needs KV for " + std::to_string(kv_tokens) +
            " tokens (prompt plus max_tokens); the largest decode worker holds " +
            std::to_string(largest) + ". Lower max_tokens or shorten the prompt.",
        "max_tokens");
    e.code = "kv_capacity_exceeded";
    metrics_->RecordRejected("kv_capacity");
    EndUnstarted(e, 0);
    return false;
  }
  if (attempts_ == 1 && overflow_.rule == router::OverflowRule::kCheapest) {
    if (const int upstream = CheaperUpstream(); upstream >= 0) {
      StartExternal(upstream, "cheapest");
      return true;
    }
  }
  return Submit();
}

bool CompletionCall::Submit() {
  // A stream under way resumes from where its client is: the tokens it has are prompt now, the
  // sampler's stream starts past them, and it goes before anything new.
  const bool resuming = completion_tokens_ > 0;
  auto prompt = std::make_shared<std::vector<int32_t>>(prompt_);
  prompt->insert(prompt->end(), token_ids_.begin(), token_ids_.end());
  proto::Sampling sampling = sampling_;
  sampling.set_max_tokens(max_tokens_ - completion_tokens_);
  sampling.set_samples_drawn(completion_tokens_);
  router::AdmissionRequest r;
  r.tenant = accounting_.tenant;
  r.weight = admission_.weight;
  r.priority = resuming ? router::Priority::kResumed : admission_.priority;
  r.prompt_tokens = static_cast<int64_t>(prompt->size());
  r.cost = static_cast<int64_t>(prompt->size()) + sampling.max_tokens();
  // A retry waits as long as the request first could, from now.
  r.deadline = attempts_ == 1 ? admission_.deadline
                              : std::chrono::steady_clock::now() + (admission_.deadline - arrival_);
  overflow_deadline_ = false;
  if (attempts_ == 1 && refused_for_objective_) {
    if (const auto at = OverflowTime(); at && *at < r.deadline) {
      r.deadline = *at;
      overflow_deadline_ = true;
    }
  }
  // A retry is not refused for its SLO: the request was admitted once; nor one that waits for a
  // burst worker due within it, or waited until its overflow time.
  if (attempts_ == 1 && refused_for_objective_) r.ttft_slo = admission_.ttft_slo;
  std::weak_ptr<CompletionCall> weak = shared_from_this();
  r.try_start = [weak, id = attempt_id_, exclude = failed_workers_, prompt, sampling] {
    auto self = weak.lock();
    return self && self->TryStart(id, *prompt, sampling, exclude);
  };
  r.on_timeout = [weak, id = attempt_id_] {
    if (auto self = weak.lock()) {
      boost::asio::post(self->strand_, [self, id] { self->HandleTimeout(id); });
    }
  };
  if (attempts_ == 1) submitted_ = std::chrono::steady_clock::now();
  const router::Admission a = admission_.queue->Submit(std::move(r));
  if (a.verdict == router::Admission::Verdict::kQueued) ticket_ = a.ticket;
  if (a.verdict != router::Admission::Verdict::kRejected) return true;
  if (overflow_.rule != router::OverflowRule::kNever) return Overflow(a);
  metrics_->RecordRejected("predicted_wait");
  char wait[32];
  std::snprintf(wait, sizeof wait, "%.1f", a.predicted_wait_s);
  ApiError e = ApiError::RateLimited(
      std::string("The cluster is at capacity: this request's predicted wait of ") + wait +
      " s exceeds its time-to-first-token objective of " +
      std::to_string(admission_.ttft_slo.count()) + " ms. Please try again later.");
  e.type = "capacity";
  e.code = "predicted_wait_exceeds_slo";
  EndUnstarted(e, a.retry_after_s);
  return false;
}

bool CompletionCall::TryStart(uint64_t id, const std::vector<int32_t>& prompt,
                              const proto::Sampling& sampling, const std::set<uint64_t>& exclude) {
  auto self = shared_from_this();
  const auto begin = std::chrono::steady_clock::now();
  auto attempt = registry_->Dispatch(id, prompt, sampling, self, exclude, admission_.zones);
  // Workers that failed this request are avoided while others can take it, not waited for.
  if (!attempt.ok() && !exclude.empty()) {
    attempt = registry_->Dispatch(id, prompt, sampling, self, {}, admission_.zones);
  }
  if (!attempt.ok()) return false;
  // The gateway's own time: reading to queueing, and dispatching; not the wait in the queue.
  double own = -1;
  if (id == first_attempt_id_) {
    own = Seconds(submitted_ - arrival_) + Seconds(std::chrono::steady_clock::now() - begin);
    metrics_->RecordOwnRequest(own);
  }
  boost::asio::post(strand_, [self, id, own] { self->HandleStarted(id, own); });
  return true;
}

void CompletionCall::HandleStarted(uint64_t id, double own_seconds) {
  if (own_seconds >= 0) own_request_seconds_ = own_seconds;
  // The attempt's first tokens or failure may have come first (posted by the registry's thread
  // before this was posted): it is started once, by whichever runs first.
  if (id != attempt_id_ || started_attempt_ == id) return;
  started_attempt_ = id;
  ticket_ = 0;
  if (done_) return;  // cancelled meanwhile, which cancelled the attempt too
  // The request's queue time ends when the attempt that gives its first token leaves the queue.
  if (completion_tokens_ == 0) dispatched_ = std::chrono::steady_clock::now();
  if (started_) return;
  started_ = true;
  metrics_->running().Increment();
  // Only what workers start counts (the planner's starts); an upstream's attempt did not queue.
  if (attempts_by_id_[id].upstream < 0) {
    metrics_->RecordQueueTime(Seconds(dispatched_ - arrival_),
                              static_cast<int64_t>(prompt_.size()));
  }
  if (output_.started) output_.started();
}

void CompletionCall::HandleTimeout(uint64_t id) {
  if (done_ || id != attempt_id_) return;
  ticket_ = 0;
  if (overflow_deadline_) return OverflowFromQueue();
  metrics_->RecordRejected("queue_timeout");
  const double waited = Seconds(std::chrono::steady_clock::now() - arrival_);
  char text[160];
  std::snprintf(text, sizeof text,
                "No worker could take this request within its queue deadline (%.1f s): the "
                "cluster is at capacity or has no workers. Please try again later.",
                waited);
  ApiError e = ApiError::Unavailable(text);
  e.code = "queue_timeout";
  EndUnstarted(e, 1);
}

void CompletionCall::ForgetUnstartedAttempt(AttemptStatus prior_status) {
  attempts_by_id_.erase(attempt_id_);
  // A retry that never ran: the attempt before it was the request's last.
  for (auto& [id, a] : attempts_by_id_) {
    if (!a.written &&
        (a.status == AttemptStatus::kRetried || a.status == AttemptStatus::kResumed)) {
      a.status = prior_status;
      MaybeWriteRow(id);
    }
  }
  if (!started_ && admission_.quota && !accounting_.tenant.empty()) {
    admission_.quota->Refund(accounting_.tenant, admission_.quota_tokens);
  }
}

void CompletionCall::EndUnstarted(const ApiError& e, int retry_after_s) {
  done_ = true;
  ForgetUnstartedAttempt(AttemptStatus::kError);
  if (started_) {  // a retry: the request was counted as running
    metrics_->running().Decrement();
    metrics_->RecordFailed();
  }
  HttpHeaders headers;  // retry_after_s 0: trying again will not help
  if (retry_after_s > 0) headers.emplace_back("retry-after", std::to_string(retry_after_s));
  if (request_.stream && started_) {
    output_.finish(e.http_status, SseError(e) + SseDone(), {}, true);
  } else {
    output_.finish(e.http_status, DumpJson(e.ToJson()), std::move(headers), true);
  }
}

void CompletionCall::Cancel() {
  if (done_) return;
  done_ = true;
  if (started_) {
    metrics_->running().Decrement();
    metrics_->RecordFinished("abort", Seconds(std::chrono::steady_clock::now() - arrival_),
                             static_cast<int>(prompt_.size()), completion_tokens_);
  }
  if (ticket_ != 0 && admission_.queue->Withdraw(ticket_)) {
    ticket_ = 0;  // the current attempt never left the queue: nothing runs to stop
    ForgetUnstartedAttempt(AttemptStatus::kCancelled);
    return;
  }
  finish_reason_ = "abort";
  if (Attempt& a = attempts_by_id_[attempt_id_]; a.upstream >= 0) {
    if (external_) external_->Cancel();
    external_.reset();
    SetExternalUsage(a, ExternalEnd{});
    return EndAttempt(AttemptStatus::kCancelled);
  }
  EndAttempt(AttemptStatus::kCancelled);
  registry_->Cancel(attempt_id_);
}

void CompletionCall::EndAttempt(AttemptStatus status) {
  end_ = std::chrono::steady_clock::now();
  Attempt& a = attempts_by_id_[attempt_id_];
  a.status = status;
  a.end = std::chrono::system_clock::now();
  MaybeWriteRow(attempt_id_);
}

void CompletionCall::OnTokens(const proto::TokenBatch& batch) {
  boost::asio::post(strand_,
                    [self = shared_from_this(), batch, read_at = std::chrono::steady_clock::now()] {
                      self->HandleTokens(batch, read_at);
                    });
}

void CompletionCall::OnFailure(const AttemptFailure& failure) {
  boost::asio::post(strand_,
                    [self = shared_from_this(), failure] { self->HandleFailure(failure); });
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

AttemptRow CompletionCall::BaseRow(uint64_t attempt_id, const Attempt& a) const {
  const bool final_attempt = attempt_id == attempt_id_;
  AttemptRow row;
  row.request_id = builder_.id();
  row.attempt = a.number;
  row.tenant = accounting_.tenant;
  row.model = request_.model;
  row.endpoint = request_.endpoint == Endpoint::kChatCompletions ? "chat" : "completions";
  row.status = *a.status;
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
  return row;
}

void CompletionCall::MaybeWriteRow(uint64_t attempt_id) {
  Attempt& a = attempts_by_id_[attempt_id];
  if (a.upstream >= 0) return WriteExternalRow(attempt_id);
  if (a.written || !a.status || !a.usage) return;
  a.written = true;
  AttemptRow row = BaseRow(attempt_id, a);
  PriceRow(*a.usage, accounting_.egress_usd_per_gb, &row);
  a.cost_usd = row.cost.total();
  metrics_->RecordCost(accounting_.tenant, row);
  if (accounting_.rates && a.status == AttemptStatus::kOk) {
    const bool prefilled = row.prefill_worker.id != 0, decoded = row.decode_worker.id != 0;
    accounting_.rates->Record(prefilled ? row.prompt_tokens : 0, row.cost.prefill_compute_usd,
                              decoded ? row.completion_tokens : 0, row.cost.decode_compute_usd);
  }
  if (accounting_.ledger) {
    if (Status s = accounting_.ledger->Append(row); !s.ok()) {
      spdlog::error("ledger: could not record {} attempt {}: {}", row.request_id, row.attempt,
                    s.ToString());
    }
  }
}

void CompletionCall::StreamPiece(const std::string& piece,
                                 std::chrono::steady_clock::time_point read_at) {
  if (!request_.stream || piece.empty()) return;
  output_.write_stream(SseEvent(WithNewTokenIds(builder_.Delta(piece))));
  if (streamed_text_) return;
  streamed_text_ = true;
  if (attempt_id_ != first_attempt_id_) return;
  metrics_->RecordOwnRelay(Seconds(std::chrono::steady_clock::now() - read_at),
                           own_request_seconds_);
}

void CompletionCall::HandleTokens(const proto::TokenBatch& batch,
                                  std::chrono::steady_clock::time_point read_at) {
  HandleStarted(attempt_id_);  // the registry sends only the current attempt's tokens
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
    token_ids_.push_back(batch.tokens(i));
    if (i == n - 1 && batch.last_is_stop_token()) break;  // an end-of-sequence token has no text
    piece += stops_.Push(detok_.Add(batch.tokens(i)));
    if (stops_.stopped()) break;
  }
  if (stops_.stopped()) {
    registry_->Cancel(attempt_id_);
    text_ += piece;
    StreamPiece(piece, read_at);
    return Complete("stop");
  }
  if (!batch.finish_reason().empty()) {
    piece += stops_.Push(detok_.Flush());
    piece += stops_.Flush();
  }
  text_ += piece;
  StreamPiece(piece, read_at);
  if (!batch.finish_reason().empty())
    Complete(batch.finish_reason() == "cancelled" ? "stop" : batch.finish_reason());
}

void CompletionCall::HandleFailure(const AttemptFailure& failure) {
  HandleStarted(attempt_id_);  // and only the current attempt's failure
  if (done_) return;
  // Every token was sent, its end lost with its worker: nothing is left to resume.
  if (completion_tokens_ >= max_tokens_) return Complete("length");
  // A decode worker without room sends the request back to wait, and one that ran out of pages
  // sends back what it preempted; other failures are retried elsewhere a bounded number of
  // times. A stream under way resumes on the new attempt where its client is.
  const bool for_room = failure.no_room || failure.preempted;
  if (!for_room) ++failures_;
  if (failure.retryable && failures_ < kMaxAttempts) {
    if (!for_room) failed_workers_.insert(failure.failed_worker);
    // An attempt refused for room never ran: its request waits again, resumed or not.
    const bool resuming = completion_tokens_ > 0 && !failure.no_room;
    if (resuming) metrics_->RecordResumed(failure.preempted ? "preempted" : "worker_failed");
    EndAttempt(resuming ? AttemptStatus::kResumed : AttemptStatus::kRetried);
    Admit();
    return;
  }
  const std::string& message = failure.message;
  done_ = true;
  metrics_->running().Decrement();
  metrics_->RecordFailed();
  finish_reason_ = "error";
  EndAttempt(AttemptStatus::kError);
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
  EndAttempt(AttemptStatus::kOk);
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
  const Usage usage{static_cast<int>(usage_prompt_tokens_.value_or(prompt_.size())),
                    completion_tokens_};
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
