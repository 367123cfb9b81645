// WorkerRegistry's reports of its workers' load (router/worker_registry.h): the snapshot its
// router picks from, with the pages and prompts routed but not yet shown in the workers' Loads;
// readiness; the prefill rate and the largest KV a worker holds, which admission reads; and the
// summaries /health and /metrics show. The protocol that keeps these figures is in
// worker_registry.cc.
#include <algorithm>
#include <map>

#include "router/worker_registry.h"

namespace pdserve::gateway {

std::vector<router::WorkerLoad> WorkerRegistry::SnapshotLocked() const {
  std::vector<router::WorkerLoad> out;
  out.reserve(workers_.size());
  // Prompts routed to a prefill worker whose decode worker has not reserved yet: not sent, but
  // its queue's all the same.
  std::map<uint64_t, int64_t> reserving_prompt_tokens;
  for (const auto& [id, f] : attempts_) {
    if (f.phase == Phase::kReserving && f.sink_active) {
      reserving_prompt_tokens[f.cost.prefill_worker] += static_cast<int64_t>(f.prompt.size());
    }
  }
  for (const auto& [id, w] : workers_) {
    if (!w.registered) continue;
    router::WorkerLoad l;
    l.id = id;
    l.role = w.info.role();
    l.capacity_class = w.info.capacity_class();
    l.zone = w.info.zone();
    l.layout_hash = w.info.layout_hash();
    l.kv_pages = w.info.kv_pages();
    l.page_size = w.info.page_size();
    l.max_context = w.info.max_context();
    l.kv_lookahead_tokens = std::max(0, w.info.kv_lookahead_tokens());
    l.free_pages = w.load.free_pages();
    for (uint64_t a : w.attempts) {
      auto f = attempts_.find(a);
      if (f != attempts_.end() && f->second.cost.decode_worker == id &&
          f->second.kv_count != KvCount::kInLoad) {
        l.pending_pages += f->second.kv_pages;
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
    l.draining = w.load.draining();
    out.push_back(std::move(l));
  }
  return out;
}

std::vector<router::WorkerLoad> WorkerRegistry::LoadSnapshot() const {
  std::lock_guard lock(mu_);
  std::vector<router::WorkerLoad> out = SnapshotLocked();
  // Idle time is the planner's, not the router's: filled here, off the dispatch path.
  const auto now = std::chrono::steady_clock::now();
  for (router::WorkerLoad& l : out) {
    const Worker& w = workers_.at(l.id);
    if (w.attempts.empty())
      l.idle_seconds = std::chrono::duration<double>(now - w.last_busy).count();
  }
  return out;
}

bool WorkerRegistry::HasRoute() const {
  std::lock_guard lock(mu_);
  return options_.router->Pick(SnapshotLocked(), router::RouteRequest{}).has_value();
}

int64_t WorkerRegistry::LargestKvTokens() const {
  std::lock_guard lock(mu_);
  int64_t largest = 0;
  for (const auto& [id, w] : workers_) {
    if (!w.registered || w.info.role() == "prefill") continue;
    int64_t tokens = int64_t{w.info.kv_pages()} * w.info.page_size();
    if (w.info.max_context() > 0) tokens = std::min<int64_t>(tokens, w.info.max_context());
    largest = std::max(largest, tokens);
  }
  return largest;
}

router::PrefillCapacity WorkerRegistry::Prefill() const {
  std::lock_guard lock(mu_);
  router::PrefillCapacity c;
  // A worker that has run no prompt yet (one that just joined) counts at the measured ones'
  // mean: leaving it out would predict waits it is there to shorten, and admission would refuse
  // the requests that would have shown its rate.
  int unmeasured = 0;
  const auto now = std::chrono::steady_clock::now();
  for (const auto& [id, w] : workers_) {
    if (!w.registered || w.load.draining() || w.info.role() == "decode") continue;
    c.tokens_per_second += w.prefill_tokens_per_second;
    c.workers += w.prefill_tokens_per_second > 0;
    unmeasured += !(w.prefill_tokens_per_second > 0);
    c.idle_workers += w.sent_prompt_tokens <= 0;
    if (w.sent_prompt_tokens <= 0) continue;
    // Its step has been running since its last answer: counting all it holds as still to do
    // would predict a request behind half a step a whole step's wait.
    const double done = w.prefill_tokens_per_second *
                        std::chrono::duration<double>(now - w.prompt_work_since).count();
    c.queued_prompt_tokens += std::max(0.0, static_cast<double>(w.sent_prompt_tokens) - done);
  }
  if (c.workers > 0) {
    c.tokens_per_second += c.tokens_per_second / c.workers * unmeasured;
    c.workers += unmeasured;
  }
  return c;
}

std::vector<WorkerSummary> WorkerRegistry::Workers() const {
  std::lock_guard lock(mu_);
  std::vector<WorkerSummary> out;
  for (const auto& [id, w] : workers_) {
    if (!w.registered) continue;
    out.push_back({id, w.info.role(), w.info.capacity_class(), w.info.name(), w.load.free_pages(),
                   w.load.running(), static_cast<int>(w.attempts.size()), w.load.draining()});
  }
  return out;
}

}  // namespace pdserve::gateway
