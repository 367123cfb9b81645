#include "gateway/completion_call.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/post.hpp>
#include <cstdio>
#include <random>

#include "common/json_text.h"
#include "gateway/ledger_rows.h"

namespace pdserve::gateway {

namespace {
constexpr int kMaxAttempts = 3;
constexpr int kMaxExternalAttempts = 3;  // failures before the request gives up
// How long a completed response waits for its attempt's cost (the workers' last step reports).
constexpr auto kCostWait = std::chrono::seconds(5);
constexpr double kEndlessSeconds = 365.0 * 24 * 3600;  // a predicted wait recorded as endless
// Attempt ids, which workers key their state by, start at a random point below 2^62: the ids of
// gateways that share workers (or of a gateway and the one it restarted from) meet only if two
// such points fall within the attempts one of them makes, about 2^-32 for 2^30 attempts each;
// so a worker's state of one gateway's attempt (a failed transfer's entry, the gateway its
// answers go to) cannot meet another's.
std::atomic<uint64_t> g_next_request{[] {
  std::random_device seed;
  const uint64_t r = (uint64_t{seed()} << 32) ^ seed();
  return 1 + (r >> 2);
}()};

double Seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

int64_t UnixNow() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}
}  // namespace

CompletionCall::CompletionCall(boost::asio::any_io_executor strand, CallWorkers workers,
                               std::shared_ptr<const tokenizer::Tokenizer> tokenizer,
                               GenerationRequest request, std::vector<int32_t> prompt,
                               int max_tokens, std::string request_id, std::string model_id,
                               CallOutput output, std::shared_ptr<GatewayMetrics> metrics,
                               CallAdmission admission, CallAccounting accounting)
    : strand_(std::move(strand)),
      workers_(std::move(workers)),
      tokenizer_(tokenizer),
      request_(std::move(request)),
      max_tokens_(max_tokens),
      response_(request_, tokenizer, std::move(request_id), std::move(model_id), UnixNow(),
                std::move(prompt)),
      output_(std::move(output)),
      metrics_(metrics),
      admission_(std::move(admission)),
      accounting_(std::move(accounting), std::move(metrics)) {
  const auto now = std::chrono::steady_clock::now();
  arrival_ =
      admission_.received == std::chrono::steady_clock::time_point{} ? now : admission_.received;
  arrival_wall_ = std::chrono::system_clock::now() -
                  std::chrono::duration_cast<std::chrono::system_clock::duration>(now - arrival_);
  const int n = std::max(1, request_.n);
  for (int i = 1; i < n; ++i) {
    more_choices_.push_back(std::make_unique<ResponseStream>(
        request_, tokenizer_, response_.id().substr(response_.id().find('-') + 1),
        response_.model_id(), response_.created(), response_.prompt(), i));
  }
  choice_finish_.assign(static_cast<size_t>(n), "");
  open_choices_ = n;
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
  if (request_.n > 1) s->set_n(request_.n);
  s->set_ignore_eos(request_.ignore_eos);
  s->set_json_schema(request_.json_schema);
  s->set_json_prefix(request_.json_prefix);
  s->set_json_suffix(request_.json_suffix);
  s->set_logprobs(request_.logprobs >= 0);
  s->set_prompt_logprobs(request_.echo && request_.logprobs >= 0);
  s->set_top_logprobs(std::max(0, request_.logprobs));
  for (const auto& [token, bias] : request_.logit_bias) {
    proto::LogitBias* b = s->add_logit_bias();
    b->set_token(token);
    b->set_bias(bias);
  }
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

bool CompletionCall::is_current_external() const {
  auto it = attempts_by_id_.find(attempt_id_);
  return it != attempts_by_id_.end() && it->second.upstream >= 0;
}

bool CompletionCall::Admit() {
  NewAttempt();
  if (attempts_ == 1) first_attempt_id_ = attempt_id_;
  // A request no registered worker could ever hold would wait out its deadline for nothing.
  const int64_t kv_tokens = static_cast<int64_t>(response_.prompt().size()) + max_tokens_;
  if (const int64_t largest = workers_.capacity->LargestKvTokens();
      largest > 0 && kv_tokens > largest) {
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
    const RouteChoice choice = ChooseRoute(Facts(RouteMoment::kArrival));
    if (choice.where == RouteChoice::Where::kExternal) {
      StartExternal(choice.upstream, choice.reason);
      return true;
    }
  }
  return Submit();
}

bool CompletionCall::Submit() {
  // A stream under way resumes from where its client is: the tokens it has are prompt now, the
  // sampler's stream starts past them, and it goes before anything new.
  const int sent = response_.completion_tokens();
  const bool resuming = sent > 0;
  auto prompt = std::make_shared<std::vector<int32_t>>(response_.prompt());
  prompt->insert(prompt->end(), response_.token_ids().begin(), response_.token_ids().end());
  proto::Sampling sampling = sampling_;
  sampling.set_max_tokens(max_tokens_ - sent);
  sampling.set_samples_drawn(sent);
  if (resuming) sampling.set_prompt_logprobs(false);  // the first attempt's batch had them
  router::AdmissionRequest r;
  r.tenant = accounting_.accounting().tenant;
  r.weight = admission_.weight;
  r.priority = resuming ? router::Priority::kResumed : admission_.priority;
  // Its prompt work: what no prefill worker's cache holds (it computes one token at least).
  r.prompt_tokens = std::max<int64_t>(
      1, static_cast<int64_t>(prompt->size()) - workers_.capacity->CachedPromptTokens(*prompt));
  r.cost = static_cast<int64_t>(prompt->size()) +
           int64_t{std::max(1, request_.n)} * sampling.max_tokens();
  // A retry waits as long as the request first could, from now.
  r.deadline = attempts_ == 1 ? admission_.deadline
                              : std::chrono::steady_clock::now() + (admission_.deadline - arrival_);
  overflow_deadline_ = false;
  if (attempts_ == 1 && (refused_for_objective_ || waiting_for_burst_)) {
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
    return self && self->TryStart(id, prompt, sampling, exclude);
  };
  r.on_timeout = [weak, id = attempt_id_] {
    if (auto self = weak.lock()) {
      boost::asio::post(self->strand_, [self, id] { self->HandleTimeout(id); });
    }
  };
  if (attempts_ == 1) submitted_ = std::chrono::steady_clock::now();
  const router::Admission a = admission_.queue->Submit(std::move(r));
  if (attempts_ == 1 && !predicted_) {
    predicted_ = true;
    predicted_queue_s_ = a.predicted_queue_s;
    predicted_ttft_s_ = a.predicted_wait_s;
  }
  if (a.verdict == router::Admission::Verdict::kQueued) ticket_ = a.ticket;
  if (a.verdict != router::Admission::Verdict::kRejected) {
    if (admission_decision_.empty()) admission_decision_ = "admitted";
    return true;
  }
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
  EndUnstarted(e, a.retry_after_s, "refused");
  return false;
}

bool CompletionCall::TryStart(uint64_t id, std::shared_ptr<const std::vector<int32_t>> prompt,
                              const proto::Sampling& sampling, const std::set<uint64_t>& exclude) {
  auto self = shared_from_this();
  const auto begin = std::chrono::steady_clock::now();
  AttemptSpec spec;
  spec.id = id;
  spec.strand = strand_;
  spec.prompt = std::move(prompt);
  spec.sampling = sampling;
  spec.exclude_workers = exclude;
  spec.zones = admission_.zones;
  if (!workers_.attempts->Start(spec, self)) return false;
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
  if (CompletionTokens() == 0) dispatched_ = std::chrono::steady_clock::now();
  if (started_) return;
  started_ = true;
  metrics_->running().Increment();
  // Only what workers start counts (the planner's starts); an upstream's attempt did not queue.
  if (attempts_by_id_[id].upstream < 0) {
    metrics_->RecordQueueTime(Seconds(dispatched_ - arrival_),
                              static_cast<int64_t>(response_.prompt().size()));
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
  EndUnstarted(e, 1, "queue_timeout");
}

void CompletionCall::ForgetUnstartedAttempt(ledger::AttemptStatus prior_status) {
  attempts_by_id_.erase(attempt_id_);
  // A retry that never ran: the attempt before it was the request's last.
  for (auto& [id, a] : attempts_by_id_) {
    if (!a.written && (a.status == ledger::AttemptStatus::kRetried ||
                       a.status == ledger::AttemptStatus::kResumed)) {
      a.status = prior_status;
      MaybeWriteRow(id);
    }
  }
  const std::string& tenant = accounting_.accounting().tenant;
  if (!started_ && admission_.quota && !tenant.empty()) {
    admission_.quota->Refund(tenant, admission_.quota_tokens);
  }
}

void CompletionCall::EndUnstarted(const ApiError& e, int retry_after_s,
                                  const std::string& decision) {
  done_ = true;
  if (!started_ && attempts_ == 1 && !decision.empty()) {
    // It never ran: its row holds the decision and the prediction, at no cost.
    admission_decision_ = decision;
    Attempt a = attempts_by_id_[attempt_id_];
    a.status = ledger::AttemptStatus::kRefused;
    a.end = std::chrono::system_clock::now();
    ledger::AttemptRow row = BaseRow(attempt_id_, a);
    row.queue_seconds = Seconds(std::chrono::steady_clock::now() - arrival_);
    accounting_.RecordUnrun(row);
  }
  ForgetUnstartedAttempt(ledger::AttemptStatus::kError);
  if (started_) {  // a retry: the request was counted as running
    metrics_->running().Decrement();
    metrics_->RecordFailed();
  }
  HttpHeaders headers;  // retry_after_s 0: trying again will not help
  if (retry_after_s > 0) headers.emplace_back("retry-after", std::to_string(retry_after_s));
  if (request_.stream && started_) {
    output_.finish(e.http_status, ResponseStream::StreamError(e), {}, true);
  } else {
    output_.finish(e.http_status, DumpJson(e.ToJson()), std::move(headers), true);
  }
}

void CompletionCall::Fail(const ApiError& e) {
  done_ = true;
  metrics_->running().Decrement();
  metrics_->RecordFailed();
  finish_reason_ = "error";
  EndAttempt(ledger::AttemptStatus::kError);
  if (request_.stream) {
    output_.finish(e.http_status, ResponseStream::StreamError(e), {}, true);
  } else {
    output_.finish(e.http_status, DumpJson(e.ToJson()), {}, true);
  }
}

void CompletionCall::Cancel() {
  if (done_) return;
  done_ = true;
  if (started_) {
    metrics_->running().Decrement();
    metrics_->RecordFinished("abort", Seconds(std::chrono::steady_clock::now() - arrival_),
                             static_cast<int>(response_.prompt().size()), CompletionTokens());
  }
  if (ticket_ != 0 && admission_.queue->Withdraw(ticket_)) {
    ticket_ = 0;  // the current attempt never left the queue: nothing runs to stop
    ForgetUnstartedAttempt(ledger::AttemptStatus::kCancelled);
    return;
  }
  finish_reason_ = "abort";
  EndAttempt(ledger::AttemptStatus::kCancelled);
  if (is_current_external()) {
    overflow_.attempts->Cancel(attempt_id_);
  } else {
    workers_.attempts->Cancel(attempt_id_);
  }
}

void CompletionCall::EndAttempt(ledger::AttemptStatus status) {
  end_ = std::chrono::steady_clock::now();
  Attempt& a = attempts_by_id_[attempt_id_];
  a.status = status;
  a.end = std::chrono::system_clock::now();
  MaybeWriteRow(attempt_id_);
}

void CompletionCall::StreamPiece(ResponseStream& choice, const std::string& piece,
                                 std::chrono::steady_clock::time_point read_at) {
  if (!request_.stream || piece.empty()) return;
  output_.write_stream(choice.DeltaEvent(piece));
  if (streamed_text_) return;
  streamed_text_ = true;
  if (attempt_id_ != first_attempt_id_) return;
  metrics_->RecordOwnRelay(Seconds(std::chrono::steady_clock::now() - read_at),
                           own_request_seconds_);
}

void CompletionCall::AttemptTokens(uint64_t id, const proto::TokenBatch& batch,
                                   std::chrono::steady_clock::time_point read_at) {
  if (id != attempt_id_) return;  // a retried attempt's late tokens
  HandleStarted(id);
  if (done_) return;
  const int index = batch.choice();
  if (index < 0 || index >= static_cast<int>(choice_finish_.size())) {
    spdlog::warn("{}: a worker sent tokens of choice {}, which this request does not have",
                 response_.id(), index);
    return;
  }
  if (!choice_finish_[static_cast<size_t>(index)].empty()) return;  // stopped here: ignored
  const int n = batch.tokens_size();
  const auto now = std::chrono::steady_clock::now();
  if (batch.cached_tokens() > 0) {  // set on the attempt's first-token batch
    attempts_by_id_[id].cached_prompt_tokens = batch.cached_tokens();
  }
  if (n > 0) {
    if (CompletionTokens() == 0) {
      first_output_attempt_ = id;
      worker_queue_seconds_ = batch.queue_seconds();
      prefill_seconds_ = batch.prefill_seconds();
      transfer_seconds_ = batch.transfer_seconds();
      NoteFirstOutput(now);
    } else {
      metrics_->RecordInterToken(Seconds(now - last_token_) / n);
    }
    last_token_ = now;
  }
  ResponseStream& choice = Choice(index);
  const std::string piece = choice.AddTokens(batch);
  StreamPiece(choice, piece, read_at);
  if (!more_choices_.empty()) {
    if (choice.stopped()) return EndChoice(index, "stop", /*by_gateway=*/true);
    if (batch.finish_reason().empty()) return;
    return EndChoice(index, batch.finish_reason() == "cancelled" ? "stop" : batch.finish_reason(),
                     false);
  }
  if (response_.stopped()) {
    workers_.attempts->Cancel(attempt_id_);
    return Complete("stop");
  }
  if (!batch.finish_reason().empty()) {
    Complete(batch.finish_reason() == "cancelled" ? "stop" : batch.finish_reason());
  }
}

void CompletionCall::NoteFirstOutput(std::chrono::steady_clock::time_point now) {
  first_token_wall_ = std::chrono::system_clock::now();
  first_token_ = now;
  metrics_->RecordFirstToken(Seconds(now - arrival_));
  if (admission_decision_ == "admitted" && !is_current_external()) {
    metrics_->RecordTtftPrediction(predicted_ttft_s_, Seconds(now - arrival_));
    // From its prefill's end: from leaving the queue, less the worker's queue and prefill.
    admission_.queue->RecordAfterPrefill(
        std::max(0.0, Seconds(now - dispatched_) - worker_queue_seconds_ - prefill_seconds_));
  }
}

void CompletionCall::AttemptText(uint64_t id, const std::string& text) {
  if (id != attempt_id_ || done_) return;
  HandleStarted(id);
  if (done_ || text.empty()) return;
  const auto now = std::chrono::steady_clock::now();
  if (!external_text_) {
    external_text_ = true;
    first_output_attempt_ = id;
    NoteFirstOutput(now);
  }
  last_token_ = now;
  response_.AddText(text);
  if (request_.stream && !relayed_choices_) output_.write_stream(response_.DeltaEvent(text));
}

void CompletionCall::AttemptFinished(uint64_t id, const std::string& finish_reason,
                                     int64_t prompt_tokens, int64_t completion_tokens) {
  if (id != attempt_id_ || done_) return;
  HandleStarted(id);
  if (done_) return;
  response_.set_completion_tokens(static_cast<int>(completion_tokens));
  usage_prompt_tokens_ = prompt_tokens;
  Complete(finish_reason);
}

void CompletionCall::AttemptFailed(uint64_t id, const AttemptFault& fault) {
  if (id != attempt_id_) return;
  HandleStarted(id);
  if (done_) return;
  if (is_current_external()) {
    ++failures_;
    failed_upstreams_.insert(attempts_by_id_[id].upstream);
    // Nothing reached the client yet: another upstream, else self-hosted workers, may serve it.
    if (!external_text_ && fault.retryable && failures_ < kMaxExternalAttempts) {
      EndAttempt(ledger::AttemptStatus::kRetried);
      const RouteChoice choice = ChooseRoute(Facts(RouteMoment::kExternalFailed));
      if (choice.where == RouteChoice::Where::kExternal) {
        NewAttempt();
        return StartExternal(choice.upstream, choice.reason);
      }
      Admit();  // a retry: it waits for workers, not refused for its objective
      return;
    }
    return Fail(fault.client_error.value_or(ApiError::Internal(fault.message)));
  }
  if (!more_choices_.empty() && CompletionTokens() > 0) {
    ApiError e = ApiError::Internal(
        "request failed: the worker running this request's choices was lost after they began (" +
        fault.message + "); a request of several choices does not resume elsewhere");
    e.http_status = 502;
    e.code = "worker_failed";
    return Fail(e);
  }
  // Every token was sent, its end lost with its worker: nothing is left to resume.
  const int sent = response_.completion_tokens();
  if (sent >= max_tokens_) return Complete("length");
  // A decode worker without room sends the request back to wait, and one that ran out of pages
  // sends back what it preempted; other failures are retried elsewhere a bounded number of
  // times. A stream under way resumes on the new attempt where its client is.
  const bool for_room = fault.no_room || fault.preempted;
  if (!for_room) ++failures_;
  if (fault.retryable && failures_ < kMaxAttempts) {
    if (!for_room) failed_workers_.insert(fault.failed_worker);
    // An attempt refused for room never ran: its request waits again, resumed or not.
    const bool resuming = sent > 0 && !fault.no_room;
    if (resuming) metrics_->RecordResumed(fault.preempted ? "preempted" : "worker_failed");
    EndAttempt(resuming ? ledger::AttemptStatus::kResumed : ledger::AttemptStatus::kRetried);
    Admit();
    return;
  }
  ApiError e = ApiError::Internal("request failed: " + fault.message);
  e.http_status = 502;
  e.code = "worker_failed";
  Fail(e);
}

void CompletionCall::AttemptClosed(const AttemptUse& use) {
  auto it = attempts_by_id_.find(use.workers.attempt_id);
  if (it == attempts_by_id_.end()) return;
  it->second.use = use;
  if (use.workers.attempt_id == attempt_id_ && waiting_for_cost_) return SendCompletion();
  MaybeWriteRow(use.workers.attempt_id);
}

void CompletionCall::Complete(const std::string& finish_reason) {
  done_ = true;
  metrics_->running().Decrement();
  metrics_->RecordFinished(finish_reason, Seconds(std::chrono::steady_clock::now() - arrival_),
                           static_cast<int>(response_.prompt().size()), CompletionTokens());
  finish_reason_ = finish_reason;
  EndAttempt(ledger::AttemptStatus::kOk);
  if (attempts_by_id_[attempt_id_].written) return SendCompletion();
  // The workers' last step reports and end messages are behind the last tokens, or (after a
  // stop string) the decode worker confirms the cancel within a step: wait for them, boundedly.
  waiting_for_cost_ = true;
  cost_timer_ = std::make_unique<boost::asio::steady_timer>(strand_, kCostWait);
  cost_timer_->async_wait([self = shared_from_this()](boost::system::error_code ec) {
    if (!ec) self->SendCompletion();
  });
}

void CompletionCall::MaybeWriteRow(uint64_t attempt_id) {
  Attempt& a = attempts_by_id_[attempt_id];
  if (a.written || !a.status || !a.use) return;
  a.written = true;
  const router::UpstreamConfig* upstream =
      a.upstream >= 0 ? &overflow_.upstreams->configs()[a.upstream] : nullptr;
  a.cost_usd = accounting_.Record(BaseRow(attempt_id, a), *a.use, upstream);
}

ledger::AttemptRow CompletionCall::BaseRow(uint64_t attempt_id, const Attempt& a) const {
  const bool final_attempt = attempt_id == attempt_id_;
  const CallAccounting& accounting = accounting_.accounting();
  const int completion_tokens = CompletionTokens();  // every choice's
  ledger::AttemptRow row;
  row.request_id = response_.id();
  row.attempt = a.number;
  row.tenant = accounting.tenant;
  row.model = request_.model;
  row.endpoint = request_.endpoint == Endpoint::kChatCompletions ? "chat" : "completions";
  row.status = *a.status;
  row.finish_reason = final_attempt ? response_.FinalFinishReason(finish_reason_) : "";
  row.arrival_unix = UnixSeconds(arrival_wall_);
  row.end_unix = UnixSeconds(a.end);
  row.prompt_tokens = static_cast<int64_t>(response_.prompt().size());
  // A resumed attempt's worker may also have found the tokens so far cached: the row counts the
  // client's prompt only. An external row's come from its use (PriceExternalRow).
  row.cached_prompt_tokens = std::min(a.cached_prompt_tokens, row.prompt_tokens);
  row.admission = admission_decision_;
  // A wait predicted endless (a queue that does not move) is recorded as a year.
  row.predicted_queue_seconds = std::min(predicted_queue_s_, kEndlessSeconds);
  row.predicted_ttft_seconds = std::min(predicted_ttft_s_, kEndlessSeconds);
  if (final_attempt) {
    if (completion_tokens > 0) row.first_token_unix = UnixSeconds(first_token_wall_);
    row.completion_tokens = completion_tokens;
    row.queue_seconds = Seconds(dispatched_ - arrival_) + worker_queue_seconds_;
    row.prefill_seconds = prefill_seconds_;
    row.transfer_seconds = transfer_seconds_;
    if (completion_tokens > 0) row.decode_seconds = Seconds(end_ - first_token_);
  }
  row.tags = accounting.tags;
  row.user = request_.user;
  if (accounting.store_text && final_attempt) {
    if (request_.endpoint == Endpoint::kChatCompletions) {
      nlohmann::json messages = nlohmann::json::array();
      for (const auto& m : request_.messages) {
        messages.push_back({{"role", m.role}, {"content", m.content}});
      }
      row.prompt_text = DumpJson(messages);
    } else {
      row.prompt_text = request_.prompt;
    }
    row.completion_text = response_.text();
  }
  return row;
}

std::string CompletionCall::ServerTiming() const {
  const double decode =
      first_token_ == std::chrono::steady_clock::time_point{} ? 0 : Seconds(end_ - first_token_);
  char buf[256];
  std::snprintf(
      buf, sizeof buf,
      "queue;dur=%.3f, prefill;dur=%.3f, kv_transfer;dur=%.3f, decode;dur=%.3f, total;dur=%.3f",
      (Seconds(dispatched_ - arrival_) + worker_queue_seconds_) * 1e3, prefill_seconds_ * 1e3,
      transfer_seconds_ * 1e3, decode * 1e3, Seconds(end_ - arrival_) * 1e3);
  return buf;
}

}  // namespace pdserve::gateway
