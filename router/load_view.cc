// The registered workers' load; see load_view.h.
#include "router/load_view.h"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace pdserve::router {
namespace {

// A registered worker's class: reserved or burst, checked when it registered (CheckRegister).
CapacityClass RegisteredClass(const proto::Register& info) {
  auto parsed = ParseWorkerCapacityClass(info.capacity_class());
  return parsed.ok() ? *parsed : CapacityClass::kReserved;
}

}  // namespace

void LoadView::Join(uint64_t worker, const proto::Register& info, Clock::time_point now) {
  Worker& w = workers_[worker];
  w.info = info;
  w.load.set_free_pages(info.kv_pages());
  w.last_busy = now;
}

void LoadView::Leave(uint64_t worker) { workers_.erase(worker); }

bool LoadView::OnLoad(uint64_t worker, const proto::Load& load) {
  auto it = workers_.find(worker);
  if (it == workers_.end()) return false;
  Worker& w = it->second;
  const proto::Load before = w.load;
  w.load = load;
  for (uint64_t a : w.attempts) {
    auto f = attempts_.find(a);
    if (f != attempts_.end() && f->second.decode_worker == worker &&
        f->second.kv_count == KvCount::kAnswered) {
      f->second.kv_count = KvCount::kInLoad;
    }
  }
  if (w.load.free_pages() > w.info.kv_pages() && !w.overclaimed) {
    w.overclaimed = true;
    spdlog::warn("worker {} ({}) reports {} free KV pages of the {} it registered; counting {}",
                 worker, w.info.name(), w.load.free_pages(), w.info.kv_pages(), w.info.kv_pages());
  }
  w.load.set_free_pages(std::clamp(w.load.free_pages(), 0, w.info.kv_pages()));
  w.load.set_running(std::max(0, w.load.running()));
  w.load.set_waiting(std::max(0, w.load.waiting()));
  return w.load.free_pages() > before.free_pages() || w.load.running() < before.running() ||
         w.load.waiting() < before.waiting() || (before.draining() && !w.load.draining());
}

void LoadView::OnStep(uint64_t worker, const proto::StepReport& step) {
  auto it = workers_.find(worker);
  if (it == workers_.end()) return;
  Worker& w = it->second;
  int64_t prompt_tokens = 0;
  for (int i = 0; i < step.request_ids_size(); ++i) {
    if (step.prompt(i)) prompt_tokens += step.tokens(i);
  }
  if (prompt_tokens > 0 && step.seconds() > 0) {
    w.prompt_steps.Add(prompt_tokens, step.seconds());
    w.prefill_tokens_per_second = w.prompt_steps.tokens_per_second();
  }
  if (prompt_tokens == 0 && step.request_ids_size() == 1 && step.seconds() > 0) {
    double& unloaded = w.unloaded_decode_step_seconds;
    unloaded = unloaded > 0 ? 0.9 * unloaded + 0.1 * step.seconds() : step.seconds();
  }
}

void LoadView::Routed(uint64_t attempt, const router::Route& route, int kv_pages,
                      int64_t prompt_tokens, Clock::time_point now) {
  Attempt& a = attempts_[attempt];
  a.prefill_worker = route.prefill_worker;
  a.decode_worker = route.decode_worker;
  a.kv_pages = kv_pages;
  a.prompt_tokens = prompt_tokens;
  a.reserving = route.disaggregated;
  if (auto d = workers_.find(route.decode_worker); d != workers_.end()) {
    d->second.attempts.insert(attempt);
    d->second.last_busy = now;
    if (!route.disaggregated) {  // it prefills the prompt itself, from now
      a.prefilling = true;
      if (d->second.sent_prompt_tokens <= 0) d->second.prompt_work_since = now;
      d->second.sent_prompt_tokens += prompt_tokens;
    }
  }
}

void LoadView::KvAnswered(uint64_t attempt) {
  auto a = attempts_.find(attempt);
  if (a != attempts_.end() && a->second.kv_count == KvCount::kPending) {
    a->second.kv_count = KvCount::kAnswered;
  }
}

void LoadView::PrefillSent(uint64_t attempt, Clock::time_point now) {
  auto a = attempts_.find(attempt);
  if (a == attempts_.end()) return;
  a->second.reserving = false;
  auto p = workers_.find(a->second.prefill_worker);
  if (p == workers_.end()) return;
  a->second.prefilling = true;
  Worker& w = p->second;
  w.attempts.insert(attempt);
  w.last_busy = now;
  if (w.sent_prompt_tokens <= 0) w.prompt_work_since = now;
  w.sent_prompt_tokens += a->second.prompt_tokens;
}

void LoadView::PrefillAnswered(uint64_t attempt, Clock::time_point now) {
  auto a = attempts_.find(attempt);
  if (a == attempts_.end() || !a->second.prefilling) return;
  a->second.prefilling = false;
  auto p = workers_.find(a->second.prefill_worker);
  if (p == workers_.end()) return;
  p->second.sent_prompt_tokens -= a->second.prompt_tokens;
  p->second.prompt_work_since = now;
}

void LoadView::Withdrawn(uint64_t attempt) {
  if (auto a = attempts_.find(attempt); a != attempts_.end()) a->second.reserving = false;
}

void LoadView::Released(uint64_t attempt, uint64_t worker, Clock::time_point now) {
  auto it = workers_.find(worker);
  if (it == workers_.end()) return;
  it->second.attempts.erase(attempt);
  it->second.last_busy = now;
}

void LoadView::Closed(uint64_t attempt) {
  auto a = attempts_.find(attempt);
  if (a == attempts_.end()) return;
  // Closed before its prefill worker answered (cancelled, or the worker failed): its prompt
  // leaves that worker's queue.
  if (a->second.prefilling) {
    if (auto p = workers_.find(a->second.prefill_worker); p != workers_.end()) {
      p->second.sent_prompt_tokens -= a->second.prompt_tokens;
    }
  }
  attempts_.erase(a);
}

std::set<uint64_t> LoadView::HeldBy(uint64_t worker) const {
  auto it = workers_.find(worker);
  return it == workers_.end() ? std::set<uint64_t>{} : it->second.attempts;
}

std::vector<router::WorkerLoad> LoadView::Snapshot() const {
  std::vector<router::WorkerLoad> out;
  out.reserve(workers_.size());
  // Prompts routed to a prefill worker whose decode worker has not reserved yet: not sent, but
  // its queue's all the same.
  std::map<uint64_t, int64_t> reserving_prompt_tokens;
  for (const auto& [id, a] : attempts_) {
    if (a.reserving) reserving_prompt_tokens[a.prefill_worker] += a.prompt_tokens;
  }
  for (const auto& [id, w] : workers_) {
    router::WorkerLoad l;
    l.id = id;
    l.role = w.info.role();
    l.capacity_class = RegisteredClass(w.info);
    l.zone = w.info.zone();
    l.layout_hash = w.info.layout_hash();
    l.kv_pages = w.info.kv_pages();
    l.page_size = w.info.page_size();
    l.max_context = w.info.max_context();
    l.kv_lookahead_tokens = std::max(0, w.info.kv_lookahead_tokens());
    l.free_pages = w.load.free_pages();
    for (uint64_t held : w.attempts) {
      auto a = attempts_.find(held);
      if (a != attempts_.end() && a->second.decode_worker == id &&
          a->second.kv_count != KvCount::kInLoad) {
        l.pending_pages += a->second.kv_pages;
      }
    }
    l.running = w.load.running();
    l.waiting = w.load.waiting();
    l.attempts = static_cast<int>(w.attempts.size());
    l.sent_prompt_tokens = w.sent_prompt_tokens;
    if (auto r = reserving_prompt_tokens.find(id); r != reserving_prompt_tokens.end()) {
      l.sent_prompt_tokens += r->second;
    }
    l.max_batch_tokens = w.info.max_batch_tokens();
    l.prefill_tokens_per_second = w.prefill_tokens_per_second;
    l.unloaded_decode_step_seconds = w.unloaded_decode_step_seconds;
    l.draining = w.load.draining();
    out.push_back(std::move(l));
  }
  return out;
}

std::vector<router::WorkerLoad> LoadView::SnapshotWithIdleTimes(Clock::time_point now) const {
  std::vector<router::WorkerLoad> out = Snapshot();
  for (router::WorkerLoad& l : out) {
    const Worker& w = workers_.at(l.id);
    l.name = w.info.name();
    if (w.attempts.empty())
      l.idle_seconds = std::chrono::duration<double>(now - w.last_busy).count();
  }
  return out;
}

bool LoadView::HasRoute(const router::Router& router) const {
  return router.Pick(Snapshot(), router::RouteRequest{}).has_value();
}

int64_t LoadView::LargestKvTokens() const {
  int64_t largest = 0;
  for (const auto& [id, w] : workers_) {
    if (w.info.role() == "prefill") continue;
    int64_t tokens = int64_t{w.info.kv_pages()} * w.info.page_size();
    if (w.info.max_context() > 0) tokens = std::min<int64_t>(tokens, w.info.max_context());
    largest = std::max(largest, tokens);
  }
  return largest;
}

router::PrefillCapacity LoadView::Prefill(Clock::time_point now) const {
  router::PrefillCapacity c;
  // A worker that has run no prompt yet (one that just joined) counts at the measured ones'
  // mean: leaving it out would predict waits it is there to shorten, and admission would refuse
  // the requests that would have shown its rate.
  int unmeasured = 0;
  double unmeasured_sent = 0;  // prompt tokens sent to those
  for (const auto& [id, w] : workers_) {
    if (w.load.draining() || w.info.role() == "decode") continue;
    c.tokens_per_second += w.prefill_tokens_per_second;
    if (w.prefill_tokens_per_second > 0) c.step_seconds += w.prompt_steps.step_seconds();
    c.workers += w.prefill_tokens_per_second > 0;
    unmeasured += !(w.prefill_tokens_per_second > 0);
    c.idle_workers += w.sent_prompt_tokens <= 0;
    if (w.sent_prompt_tokens <= 0) continue;
    // Its step has been running since its last answer: counting all it holds as still to do
    // would predict a request behind half a step a whole step's wait.
    const double elapsed = std::chrono::duration<double>(now - w.prompt_work_since).count();
    const double done = w.prefill_tokens_per_second * elapsed;
    c.queued_prompt_tokens += std::max(0.0, static_cast<double>(w.sent_prompt_tokens) - done);
    // In time: a step's fixed cost and the tokens at its rate, less what has run (a profile with
    // no cost per token has all its work in the fixed cost, which tokens cannot show).
    if (w.prefill_tokens_per_second > 0) {
      c.queued_prompt_seconds += std::max(
          0.0, w.prompt_steps.step_seconds() +
                   static_cast<double>(w.sent_prompt_tokens) / w.prefill_tokens_per_second -
                   elapsed);
    } else {
      unmeasured_sent += static_cast<double>(w.sent_prompt_tokens);
    }
  }
  if (c.workers > 0) {
    c.step_seconds /= c.workers;
    const double mean_rate = c.tokens_per_second / c.workers;
    c.queued_prompt_seconds += unmeasured_sent / mean_rate;
    c.tokens_per_second += mean_rate * unmeasured;
    c.workers += unmeasured;
  }
  return c;
}

std::vector<WorkerSummary> LoadView::Summaries() const {
  std::vector<WorkerSummary> out;
  for (const auto& [id, w] : workers_) {
    out.push_back({id, w.info.role(), RegisteredClass(w.info), w.info.name(), w.load.free_pages(),
                   w.load.running(), static_cast<int>(w.attempts.size()), w.load.draining(),
                   w.info.kv_pages()});
  }
  return out;
}

}  // namespace pdserve::router
