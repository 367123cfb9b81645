// WorkerRegistry's relaying of request attempts (router/worker_registry.h): dispatching one to
// the workers its router picks, then Reserve, Prefill, KvDone, Generate, tokens and errors
// between its workers and its sink, cancels and failures, each phase's deadline, and closing an
// attempt once no worker holds it. Membership (accepting, registering, heartbeats, a worker
// leaving) is in worker_registry.cc.
#include "router/worker_registry.h"

#include "router/cache_aware_scoring.h"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace pdserve::router {

namespace {
// The KV an attempt reserves on its decode worker, in tokens: its prompt and every token it may
// generate (the worker caps this at its context).
// The prompt, and max_tokens for each choice.
int KvTokens(size_t prompt_tokens, const proto::Sampling& sampling) {
  return static_cast<int>(std::min<int64_t>(
      INT32_MAX, static_cast<int64_t>(prompt_tokens) +
                     int64_t{std::max(1, sampling.n())} * std::max(0, sampling.max_tokens())));
}
}  // namespace

void WorkerRegistry::SendLocked(uint64_t worker_id, proto::Envelope m, Actions& actions) {
  auto it = workers_.find(worker_id);
  if (it != workers_.end()) actions.sends.emplace_back(it->second.conn, std::move(m));
}

void WorkerRegistry::HandleReservedLocked(Worker& w, const proto::Reserved& reserved,
                                          Actions& actions) {
  auto it = attempts_.find(reserved.request_id());
  if (it == attempts_.end()) return;
  InFlight& f = it->second;
  if (f.phase != Phase::kReserving || w.id != f.cost.decode_worker || !f.sink_active) return;
  loads_.KvAnswered(it->first);
  // Pages of its registered pool, enough for the prompt's pages after those it holds cached:
  // else the prefill worker would write where the decode worker never reserved.
  const int64_t prompt_pages = (static_cast<int64_t>(f.prompt.size()) + w.info.page_size() - 1) /
                               std::max(1, w.info.page_size());
  const int64_t needed = prompt_pages - reserved.cached_blocks();
  const bool in_pool = std::all_of(reserved.page_ids().begin(), reserved.page_ids().end(),
                                   [&](int32_t p) { return p >= 0 && p < w.info.kv_pages(); });
  if (!in_pool || reserved.cached_blocks() < 0 || needed < 1 || reserved.page_ids_size() < needed ||
      reserved.layout_hash() != w.info.layout_hash()) {
    spdlog::warn(
        "worker {} ({}) answered Reserve with {} pages that are not a reservation of its "
        "pool of {} for {} prompt tokens; dropping it",
        w.id, w.info.name(), reserved.page_ids_size(), w.info.kv_pages(), f.prompt.size());
    actions.calls.push_back([conn = w.conn] {
      conn->Close(InvalidArgument("a Reserved outside the registered KV pool"));
    });
    return FailLocked(it->first, f,
                      {"the decode worker answered with an invalid reservation", true, false, w.id},
                      0, actions);
  }
  auto p = workers_.find(f.cost.prefill_worker);
  if (p == workers_.end()) {
    return FailLocked(
        it->first, f,
        {"the prefill worker chosen for this request was lost", true, false, f.cost.prefill_worker},
        0, actions);
  }
  proto::Envelope m;
  proto::Prefill* prefill = m.mutable_prefill();
  prefill->set_request_id(it->first);
  prefill->mutable_prompt()->Add(f.prompt.begin(), f.prompt.end());
  *prefill->mutable_sampling() = f.sampling;
  *prefill->mutable_destination() = reserved;
  prefill->set_deadline_seconds(options_.kv_deadline_seconds);
  f.phase = Phase::kPrefilling;
  f.phase_since = std::chrono::steady_clock::now();
  f.open.insert(p->first);
  loads_.PrefillSent(it->first, std::chrono::steady_clock::now());
  actions.sends.emplace_back(p->second.conn, std::move(m));
}

void WorkerRegistry::HandleTokensLocked(Worker& w, const proto::TokenBatch& batch,
                                        Actions& actions) {
  auto it = attempts_.find(batch.request_id());
  if (it == attempts_.end() || !it->second.open.count(w.id)) return;  // stale
  const uint64_t id = it->first;
  InFlight& f = it->second;
  // The attempt ends with its last choice's last batch.
  const bool ended = !batch.finish_reason().empty() && --f.open_choices <= 0;
  // A colocated worker's first tokens: its pages are taken, and its prompt is done.
  if (w.id == f.cost.decode_worker) {
    loads_.KvAnswered(id);
    if (w.id == f.cost.prefill_worker) loads_.PrefillAnswered(id, std::chrono::steady_clock::now());
  }
  if (f.phase == Phase::kPrefilling && w.id == f.cost.prefill_worker) {
    // The prefill worker's answer: the first token, its KV acknowledged by the decode worker.
    loads_.PrefillAnswered(id, std::chrono::steady_clock::now());
    f.cost.kv_bytes = batch.kv_bytes();
    f.phase = Phase::kDecoding;
    f.phase_since = std::chrono::steady_clock::now();
    if (f.sink_active && batch.finish_reason() != "cancelled") {
      proto::Envelope m;
      if (ended) {  // the request ends at its first token: the decode worker frees its pages
        m.mutable_cancel()->set_request_id(id);
      } else {
        proto::KvDone* done = m.mutable_kv_done();
        done->set_request_id(id);
        done->set_first_token(batch.tokens_size() > 0 ? batch.tokens(0) : 0);
        done->set_kv_bytes(batch.kv_bytes());
        done->set_transfer_seconds(batch.transfer_seconds());
      }
      SendLocked(f.cost.decode_worker, std::move(m), actions);
      actions.calls.push_back([sink = f.sink, batch] { sink->OnTokens(batch); });
      if (ended) DeactivateLocked(id, f);
    }
    return ReleaseLocked(id, f, &w, actions);
  }
  f.phase_since = std::chrono::steady_clock::now();  // progress: the stall deadline restarts
  if (f.sink_active) {
    actions.calls.push_back([sink = f.sink, batch] { sink->OnTokens(batch); });
    if (ended) DeactivateLocked(id, f);
  }
  if (ended) ReleaseLocked(id, f, &w, actions);
}

void WorkerRegistry::HandleErrorLocked(Worker& w, const proto::RequestError& error,
                                       Actions& actions) {
  auto it = attempts_.find(error.request_id());
  if (it == attempts_.end() || !it->second.open.count(w.id)) return;
  InFlight& f = it->second;
  if (w.id == f.cost.prefill_worker) {  // no-op unless its prompt is still counted there
    loads_.PrefillAnswered(it->first, std::chrono::steady_clock::now());
  }
  const uint64_t failed = error.peer_failed() ? f.cost.decode_worker : w.id;
  FailLocked(it->first, f,
             {error.message(), error.retryable(), error.no_room(), failed, error.preempted()}, w.id,
             actions);
  ReleaseLocked(it->first, f, &w, actions);
}

void WorkerRegistry::FailLocked(uint64_t attempt_id, InFlight& f, AttemptFailure failure,
                                uint64_t except_worker, Actions& actions) {
  if (f.sink_active) {
    DeactivateLocked(attempt_id, f);
    actions.calls.push_back(
        [sink = f.sink, failure = std::move(failure)] { sink->OnFailure(failure); });
  }
  for (uint64_t other : f.open) {
    if (other == except_worker) continue;
    proto::Envelope m;
    m.mutable_cancel()->set_request_id(attempt_id);
    SendLocked(other, std::move(m), actions);
  }
}

void WorkerRegistry::DeactivateLocked(uint64_t attempt_id, InFlight& f) {
  f.Deactivate();
  loads_.Withdrawn(attempt_id);
}

void WorkerRegistry::ReleaseLocked(uint64_t attempt_id, InFlight& f, Worker* w, Actions& actions) {
  if (w) {
    f.open.erase(w->id);
    loads_.Released(attempt_id, w->id, std::chrono::steady_clock::now());
    actions.released = true;
  }
  if (!f.open.empty()) return;
  actions.calls.push_back([sink = f.sink, cost = f.cost] { sink->OnAttemptClosed(cost); });
  loads_.Closed(attempt_id);
  attempts_.erase(attempt_id);
}

void WorkerRegistry::EnforcePhaseDeadlines(std::chrono::steady_clock::time_point now) {
  Actions actions;
  {
    std::lock_guard lock(mu_);
    const auto prefill_deadline = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                      std::chrono::duration<double>(options_.kv_deadline_seconds)) +
                                  options_.prefill_grace;
    std::vector<uint64_t> late;
    for (const auto& [id, f] : attempts_) {
      if (!f.sink_active) continue;
      const auto in_phase = now - f.phase_since;
      const bool past = f.phase == Phase::kReserving    ? in_phase > options_.reserve_timeout
                        : f.phase == Phase::kPrefilling ? in_phase > prefill_deadline
                                                        : in_phase > options_.token_stall_timeout;
      if (past) late.push_back(id);
    }
    for (uint64_t id : late) {
      InFlight& f = attempts_[id];
      const char* phase = f.phase == Phase::kReserving    ? "reserve KV pages"
                          : f.phase == Phase::kPrefilling ? "prefill the prompt"
                                                          : "send its next tokens";
      const uint64_t slow =
          f.phase == Phase::kPrefilling ? f.cost.prefill_worker : f.cost.decode_worker;
      std::string why = "the worker chosen to " + std::string(phase) + " did not answer in time";
      spdlog::warn("attempt {}: {}", id, why);
      if (f.phase == Phase::kReserving) {
        // It heartbeats but does not serve: no more requests go to it.
        if (auto w = workers_.find(slow); w != workers_.end()) {
          actions.calls.push_back([conn = w->second.conn] {
            conn->Close(DeadlineExceeded("did not answer Reserve in time"));
          });
        }
      }
      FailLocked(id, f, {why, true, false, slow}, 0, actions);
    }
  }
  actions.Run();
}

void WorkerRegistry::CloseAbandonedAttempts(std::chrono::steady_clock::time_point now) {
  Actions actions;
  {
    std::lock_guard lock(mu_);
    std::vector<uint64_t> abandoned;
    for (const auto& [id, f] : attempts_) {
      if (!f.sink_active && now - f.inactive_since > options_.abandon_after)
        abandoned.push_back(id);
    }
    for (uint64_t id : abandoned) {
      InFlight& f = attempts_[id];
      spdlog::warn("attempt {}: {} worker(s) never confirmed its end; closing it", id,
                   f.open.size());
      for (uint64_t w : f.open) loads_.Released(id, w, std::chrono::steady_clock::now());
      f.open.clear();
      ReleaseLocked(id, f, nullptr, actions);  // nothing open: closes it
    }
  }
  actions.Run();
}

Result<Attempt> WorkerRegistry::Dispatch(uint64_t attempt_id, const std::vector<int32_t>& prompt,
                                         const proto::Sampling& sampling,
                                         std::shared_ptr<RequestSink> sink,
                                         const std::set<uint64_t>& exclude,
                                         const std::set<std::string>& zones) {
  Actions actions;
  Attempt attempt;
  {
    std::lock_guard lock(mu_);
    if (attempts_.count(attempt_id)) return InvalidArgument("attempt id reused");
    router::RouteRequest request;
    request.prompt_tokens = static_cast<int>(prompt.size());
    request.kv_tokens = KvTokens(prompt.size(), sampling);
    request.exclude = exclude;
    request.zones = zones;
    request.one_worker = sampling.n() > 1;
    const auto keys_of = PromptKeysLocked(prompt, request);
    const std::vector<router::WorkerLoad> loads = loads_.Snapshot();
    const std::optional<router::Route> route = options_.router->Pick(loads, request);
    auto d_it = route ? workers_.find(route->decode_worker) : workers_.end();
    auto p_it = route ? workers_.find(route->prefill_worker) : workers_.end();
    if (d_it == workers_.end() || p_it == workers_.end()) {
      return Unavailable("no worker is available for this model right now");
    }
    Worker* d = &d_it->second;
    Worker* p = &p_it->second;
    const bool pair =
        route->disaggregated && p->info.role() == "prefill" && d->info.role() == "decode";
    // One worker prefilling and decoding: of role both, or a decode worker prefilling locally.
    const bool colocated =
        !route->disaggregated && p == d && (d->info.role() == "both" || d->info.role() == "decode");
    if (!d->registered || !p->registered || !(pair || colocated)) {
      return Internal("the router chose workers " + std::to_string(route->prefill_worker) +
                      " and " + std::to_string(route->decode_worker) +
                      ", which cannot serve that route");
    }
    attempt = *route;
    RecordRoutedLocked(*route, keys_of);
    InFlight f;
    f.sink = std::move(sink);
    f.open_choices = std::max(1, sampling.n());
    proto::Envelope m;
    if (route->disaggregated) {
      f.phase = Phase::kReserving;
      f.prompt = prompt;
      f.sampling = sampling;
      proto::Reserve* r = m.mutable_reserve();
      r->set_request_id(attempt_id);
      r->mutable_prompt()->Add(prompt.begin(), prompt.end());
      *r->mutable_sampling() = sampling;
      r->set_deadline_seconds(options_.kv_deadline_seconds);
    } else {
      f.phase = Phase::kGenerating;
      proto::Generate* g = m.mutable_generate();
      g->set_request_id(attempt_id);
      g->mutable_prompt()->Add(prompt.begin(), prompt.end());
      *g->mutable_sampling() = sampling;
    }
    // What D reserves for it, as the router counted D's room.
    const auto d_load = std::find_if(loads.begin(), loads.end(),
                                     [&](const router::WorkerLoad& w) { return w.id == d->id; });
    // P's queue grows by what it computes: the prompt past the blocks it holds.
    loads_.Routed(
        attempt_id, *route, router::InitialKvPages(*d_load, request),
        router::UncachedTokens(request.prompt_tokens, request.Matched(p->id), p->info.page_size()),
        std::chrono::steady_clock::now());
    f.cost.attempt_id = attempt_id;
    f.cost.prefill_worker = p->id;
    f.cost.decode_worker = d->id;
    f.cost.prefill_info = p->info;
    f.cost.decode_info = d->info;
    f.cost.placement = route->placement;
    f.cost.placement_reason = route->placement_reason;
    f.open.insert(d->id);
    actions.sends.emplace_back(d->conn, std::move(m));
    attempts_.emplace(attempt_id, std::move(f));
  }
  actions.Run();
  return attempt;
}

void WorkerRegistry::Cancel(uint64_t attempt_id) {
  Actions actions;
  {
    std::lock_guard lock(mu_);
    auto it = attempts_.find(attempt_id);
    if (it == attempts_.end()) return;
    DeactivateLocked(attempt_id, it->second);
    for (uint64_t w : it->second.open) {
      proto::Envelope m;
      m.mutable_cancel()->set_request_id(attempt_id);
      SendLocked(w, std::move(m), actions);
    }
  }
  actions.Run();
}

}  // namespace pdserve::router
