#include "router/admission_queue.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace pdserve::router {

namespace {
// How far back the drain rate looks, and how long a backlog must last before it is trusted.
constexpr auto kDrainWindow = std::chrono::seconds(10);
constexpr auto kDrainMinimum = std::chrono::seconds(1);
constexpr int kMaxRetryAfterSeconds = 3600;
// Headroom: admit when the predicted wait is at most 0.8 x the objective, so a prediction's error
// under overload leaves room (the figures: docs/benchmarks.md, "Admission under overload").
constexpr double kSloHeadroom = 0.8;
// Times after prefill learned from: the last kMaxOutcomes within kOutcomeWindow, once
// kMinOutcomes.
constexpr size_t kMinOutcomes = 20, kMaxOutcomes = 200;
constexpr auto kOutcomeWindow = std::chrono::seconds(60);

double Seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

// Calls what TakeExpiredLocked took out, without the queue's lock.
void RunTimeouts(const std::vector<std::function<void()>>& timeouts) {
  for (const auto& timeout : timeouts) {
    if (timeout) timeout();
  }
}
}  // namespace

AdmissionQueue::AdmissionQueue(std::function<PrefillCapacity()> capacity, Clock clock)
    : capacity_(std::move(capacity)), clock_(std::move(clock)) {}

Admission AdmissionQueue::Submit(AdmissionRequest request) {
  if (!(request.weight > 0) || !std::isfinite(request.weight)) request.weight = 1;
  request.cost = std::max<int64_t>(1, request.cost);
  request.prompt_tokens = std::max<int64_t>(0, request.prompt_tokens);
  std::lock_guard lock(mu_);
  const auto now = clock_();
  Admission a;
  const double model = PredictLocked(request, now, &a.predicted_queue_s);
  const double slo = kSloHeadroom * std::chrono::duration<double>(request.ttft_slo).count();
  if (model > 0) a.after_prefill_s = AfterPrefillLocked(now);
  a.predicted_wait_s = model + a.after_prefill_s;
  if (slo > 0 && a.predicted_wait_s > slo) {
    a.verdict = Admission::Verdict::kRejected;
    const double over = std::ceil(a.predicted_wait_s - slo);
    a.retry_after_s = std::isfinite(over) ? std::clamp(static_cast<int>(std::min(over, 1e6)), 1,
                                                       kMaxRetryAfterSeconds)
                                          : kMaxRetryAfterSeconds;
    return a;
  }
  if (!AnyWaitingAtOrAboveLocked(request.priority) && request.try_start()) {
    a.verdict = Admission::Verdict::kStarted;
    return a;
  }
  a.verdict = Admission::Verdict::kQueued;
  a.ticket = next_ticket_++;
  if (waiting_ == 0) backlog_since_ = now;
  EnqueueLocked(a.ticket, std::move(request));
  return a;
}

void AdmissionQueue::EnqueueLocked(uint64_t ticket, AdmissionRequest request) {
  PriorityQueue& pq = queues_[static_cast<int>(request.priority)];
  TenantQueue& tq = pq.tenants[request.tenant];
  Entry e;
  e.ticket = ticket;
  e.start_tag = std::max(pq.virtual_time, tq.last_finish);
  tq.last_finish = e.start_tag + static_cast<double>(request.cost) / request.weight;
  tq.weight = request.weight;
  tq.prompt_tokens += request.prompt_tokens;
  tq.cost += request.cost;
  ++waiting_;
  waiting_prompt_tokens_ += request.prompt_tokens;
  e.request = std::move(request);
  tq.entries.push_back(std::move(e));
}

bool AdmissionQueue::AnyWaitingAtOrAboveLocked(Priority priority) const {
  for (int p = 0; p <= static_cast<int>(priority); ++p) {
    for (const auto& [name, tq] : queues_[p].tenants) {
      if (!tq.entries.empty()) return true;
    }
  }
  return false;
}

AdmissionQueue::Entry* AdmissionQueue::NextLocked(PriorityQueue** queue, TenantQueue** tenant) {
  for (PriorityQueue& pq : queues_) {
    Entry* best = nullptr;
    for (auto& [name, tq] : pq.tenants) {
      if (tq.entries.empty()) continue;
      Entry& head = tq.entries.front();
      if (!best || head.start_tag < best->start_tag ||
          (head.start_tag == best->start_tag && head.ticket < best->ticket)) {
        best = &head;
        *tenant = &tq;
      }
    }
    if (best) {
      *queue = &pq;
      return best;
    }
  }
  return nullptr;
}

void AdmissionQueue::RemoveLocked(PriorityQueue& pq, const std::string& tenant,
                                  std::deque<Entry>::iterator it) {
  TenantQueue& tq = pq.tenants.at(tenant);
  tq.prompt_tokens -= it->request.prompt_tokens;
  tq.cost -= it->request.cost;
  --waiting_;
  waiting_prompt_tokens_ -= it->request.prompt_tokens;
  tq.entries.erase(it);
  // A tenant with nothing waiting and no tag ahead of the queue's time has nothing to remember.
  if (tq.entries.empty() && tq.last_finish <= pq.virtual_time) pq.tenants.erase(tenant);
}

bool AdmissionQueue::Withdraw(uint64_t ticket) {
  std::lock_guard lock(mu_);
  for (PriorityQueue& pq : queues_) {
    for (auto& [name, tq] : pq.tenants) {
      for (auto it = tq.entries.begin(); it != tq.entries.end(); ++it) {
        if (it->ticket != ticket) continue;
        const std::string tenant = name;  // RemoveLocked may erase the map's key
        RemoveLocked(pq, tenant, it);
        return true;
      }
    }
  }
  return false;
}

std::vector<std::function<void()>> AdmissionQueue::TakeExpiredLocked(
    std::chrono::steady_clock::time_point now) {
  std::vector<std::function<void()>> timeouts;
  for (PriorityQueue& pq : queues_) {
    std::vector<std::pair<std::string, uint64_t>> expired;
    for (const auto& [name, tq] : pq.tenants) {
      for (const Entry& e : tq.entries) {
        if (e.request.deadline <= now) expired.emplace_back(name, e.ticket);
      }
    }
    for (const auto& [name, ticket] : expired) {
      auto& entries = pq.tenants.at(name).entries;  // not erased while it held this entry
      auto it = std::find_if(entries.begin(), entries.end(),
                             [ticket = ticket](const Entry& e) { return e.ticket == ticket; });
      timeouts.push_back(std::move(it->request.on_timeout));
      RemoveLocked(pq, name, it);
    }
  }
  return timeouts;
}

int AdmissionQueue::Pump() {
  std::vector<std::function<void()>> timeouts;
  int started = 0;
  {
    std::lock_guard lock(mu_);
    const auto now = clock_();
    timeouts = TakeExpiredLocked(now);
    PriorityQueue* pq = nullptr;
    TenantQueue* tq = nullptr;
    while (Entry* e = NextLocked(&pq, &tq)) {
      if (!e->request.try_start()) break;
      started_.push_back({now, e->request.prompt_tokens});
      pq->virtual_time = std::max(pq->virtual_time, e->start_tag);
      const std::string tenant = e->request.tenant;
      RemoveLocked(*pq, tenant, pq->tenants.at(tenant).entries.begin());
      ++started;
    }
    while (!started_.empty() && now - started_.front().at > kDrainWindow) started_.pop_front();
  }
  RunTimeouts(timeouts);
  return started;
}

int AdmissionQueue::Expire() {
  std::vector<std::function<void()>> timeouts;
  {
    std::lock_guard lock(mu_);
    timeouts = TakeExpiredLocked(clock_());
  }
  RunTimeouts(timeouts);
  return static_cast<int>(timeouts.size());
}

size_t AdmissionQueue::waiting() const {
  std::lock_guard lock(mu_);
  return waiting_;
}

int64_t AdmissionQueue::waiting_prompt_tokens() const {
  std::lock_guard lock(mu_);
  return waiting_prompt_tokens_;
}

double AdmissionQueue::PredictWait(const AdmissionRequest& request) const {
  std::lock_guard lock(mu_);
  const auto now = clock_();
  const double model = PredictLocked(request, now);
  return model > 0 ? model + AfterPrefillLocked(now) : 0;
}

void AdmissionQueue::RecordAfterPrefill(double seconds) {
  if (!(seconds >= 0) || !std::isfinite(seconds)) return;
  std::lock_guard lock(mu_);
  outcomes_.emplace_back(clock_(), seconds);
  while (outcomes_.size() > kMaxOutcomes) outcomes_.pop_front();
}

double AdmissionQueue::AfterPrefillLocked(std::chrono::steady_clock::time_point now) const {
  std::vector<double> recent;
  for (const auto& [at, seconds] : outcomes_) {
    if (now - at <= kOutcomeWindow) recent.push_back(seconds);
  }
  if (recent.size() < kMinOutcomes) return 0;
  std::nth_element(recent.begin(), recent.begin() + recent.size() / 2, recent.end());
  return recent[recent.size() / 2];
}

double AdmissionQueue::DrainRateLocked(std::chrono::steady_clock::time_point now,
                                       std::chrono::duration<double> minimum,
                                       double* requests_per_second) const {
  *requests_per_second = -1;
  if (waiting_ == 0) return -1;
  const auto from = std::max(backlog_since_, now - kDrainWindow);
  if (now - from < kDrainMinimum || now - from < minimum) return -1;
  int64_t tokens = 0, requests = 0;
  for (const Started& s : started_) {
    if (s.at < from) continue;
    tokens += s.prompt_tokens;
    ++requests;
  }
  *requests_per_second = static_cast<double>(requests) / Seconds(now - from);
  return static_cast<double>(tokens) / Seconds(now - from);
}

double AdmissionQueue::PredictLocked(const AdmissionRequest& request,
                                     std::chrono::steady_clock::time_point now,
                                     double* queue_s) const {
  double unused = 0;
  if (!queue_s) queue_s = &unused;
  *queue_s = 0;
  const PrefillCapacity capacity = capacity_ ? capacity_() : PrefillCapacity{};
  if (!(capacity.tokens_per_second > 0)) return 0;
  double ahead = 0, requests_ahead = 0;  // prompt tokens, and requests, that start before it
  for (int p = 0; p < static_cast<int>(request.priority); ++p) {
    for (const auto& [name, tq] : queues_[p].tenants) {
      ahead += static_cast<double>(tq.prompt_tokens);
      requests_ahead += static_cast<double>(tq.entries.size());
    }
  }
  const PriorityQueue& pq = queues_[static_cast<int>(request.priority)];
  auto own = pq.tenants.find(request.tenant);
  const double own_cost =
      static_cast<double>(own == pq.tenants.end() ? 0 : own->second.cost) + request.cost;
  if (own != pq.tenants.end()) {
    ahead += static_cast<double>(own->second.prompt_tokens);
    requests_ahead += static_cast<double>(own->second.entries.size());
  }
  // While the tenant's own queue and this request are served, each other tenant is served its
  // weight's share of that cost, or all it has waiting if less (fair share's fluid model).
  for (const auto& [name, tq] : pq.tenants) {
    if (name == request.tenant || tq.cost <= 0) continue;
    const double share = std::min(1.0, own_cost * tq.weight / request.weight / tq.cost);
    ahead += static_cast<double>(tq.prompt_tokens) * share;
    requests_ahead += static_cast<double>(tq.entries.size()) * share;
  }
  const double one_worker = capacity.tokens_per_second / std::max(1, capacity.workers);
  // Nothing waits ahead of it and a prefill worker is idle (one that just joined): it starts now.
  const double own_prompt_s =
      capacity.step_seconds + static_cast<double>(request.prompt_tokens) / one_worker;
  if (ahead <= 0 && capacity.idle_workers > 0) return own_prompt_s;
  // The work ahead is shared by every prefill worker; the request's own prompt runs on one.
  const double in_workers_s = capacity.queued_prompt_seconds / std::max(1, capacity.workers);
  double rate = capacity.tokens_per_second;
  // The queue's own pace counts once it has been backlogged for two of its prompts' times on a
  // worker: a prompt-heavy queue whose head waits out one long step has not stalled.
  const double mean_waiting =
      waiting_ > 0 ? static_cast<double>(waiting_prompt_tokens_) / static_cast<double>(waiting_)
                   : 0;
  const std::chrono::duration<double> minimum(2 * mean_waiting / one_worker);
  double requests_per_second = -1;
  const double drain = DrainRateLocked(now, minimum, &requests_per_second);
  // The queue's pace already holds every cost of a request; the workers' rate is per token.
  const bool drain_binds = drain >= 0 && drain < rate;
  if (drain >= 0) rate = std::min(rate, drain);
  if (rate <= 0) {
    *queue_s = std::numeric_limits<double>::infinity();
    return *queue_s;
  }
  *queue_s = ahead / rate + in_workers_s;
  // At the workers' rate each request ahead also costs a step's fixed cost, shared like the
  // tokens.
  if (!drain_binds) {
    *queue_s += requests_ahead * capacity.step_seconds / std::max(1, capacity.workers);
  }
  // Requests cost more than their prompt tokens (a step's fixed cost, their KV's transfer, a
  // decode side that takes so many a second): while backlogged, the requests ahead at the pace
  // the queue has been starting them bound the wait too.
  if (requests_per_second > 0) *queue_s = std::max(*queue_s, requests_ahead / requests_per_second);
  return *queue_s + own_prompt_s;
}

}  // namespace pdserve::router
