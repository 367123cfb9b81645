// AdmissionQueue: where a request waits while no route can take it (docs/architecture.md, "A
// request's life", step 2). The gateway submits every request; one that nobody waits ahead of
// is tried at once, the others wait until Pump finds them a route, until their deadline passes
// (Expire), or until their client leaves (Withdraw).
//
// Order: resumed streams, then interactive requests, then batch ones; within a priority, fair share
// across tenants by start-time fair queueing (Goyal et al., SIGCOMM 1996): each request is tagged
// with a virtual start time, max(the queue's virtual time, its tenant's previous finish tag), and a
// finish tag, start + cost / weight; the waiting request with the smallest start tag goes next, and
// the queue's virtual time becomes its start tag. A tenant with weight 2 so gets twice the cost of
// one with weight 1 while both wait, and a tenant that was idle comes back at the current
// virtual time, with no credit saved up. Within a tenant, first come first served.
//
// Early rejection: a request with a TTFT SLO is refused at Submit when the wait predicted for it
// already exceeds the SLO. The prediction is the prompt tokens that will start before it (all
// of higher priority, its tenant's own, and of every other tenant what fair share gives it
// meanwhile), plus what the prefill workers still have to do of the prompts they hold (less what
// their running steps have done at their measured rates) at the slower of two rates:
// the workers' measured prompt rate and the rate the queue has been draining at while backlogged
// (which sees the decode side's limit too; at the workers' rate each request ahead also costs a
// step's fixed cost), and no shorter than the requests ahead at the pace the queue has been
// starting requests while backlogged; then its own prompt on one worker: a step's fixed cost and
// its tokens at a worker's rate. Prompt tokens are those to compute: a caller
// passes a prompt less the part the workers' prefix caches hold. With no measured prompt rate yet
// it predicts nothing and refuses nothing.
//
// After its prefill: a request's first token also waits for its KV's transfer and its decode
// worker's first step, which grows with that worker's batch. The caller reports each admitted
// request's time from the end of its prefill to its first token (RecordAfterPrefill); once 20
// of the last minute's are known, the prediction adds their median. A request is refused when
// its prediction exceeds 0.8 of its SLO (the headroom: docs/benchmarks.md, "Admission under
// overload").
//
// Threads: every method may be called from any thread; one mutex guards the queue, and
// `try_start` runs under it (so that Withdraw returning true means it never ran and never will).
// `try_start` may take other locks (the registry's) but must not call into the queue.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "router/router.h"

namespace pdserve::router {

// kResumed: a stream already under way whose sequence must start again elsewhere (its decode
// worker preempted it or was lost); it goes before anything new, its client waiting mid-stream.
enum class Priority { kResumed = 0, kInteractive = 1, kBatch = 2 };

struct AdmissionRequest {
  std::string tenant;
  double weight = 1;  // the tenant's share against other waiting tenants; > 0
  Priority priority = Priority::kInteractive;
  int64_t prompt_tokens = 0;  // its prompt work (tokens to compute), for the prediction
  int64_t cost = 1;           // what fair share counts (the gateway: prompt plus max_tokens)
  std::chrono::steady_clock::time_point deadline;
  std::chrono::milliseconds ttft_slo{0};  // 0: not refused early
  // Starts the request on a route, true when it did. Under the queue's lock.
  std::function<bool()> try_start;
  // Its deadline passed while it waited: called once, without the lock, by Expire.
  std::function<void()> on_timeout;
};

struct Admission {
  enum class Verdict { kStarted, kQueued, kRejected } verdict = Verdict::kQueued;
  uint64_t ticket = 0;  // kQueued: what Withdraw takes
  // The wait until its first token predicted at Submit (0: none predicted), and of it the
  // wait before its prompt starts (the work ahead of it) and the time after its prefill (see
  // "After its prefill" above).
  double predicted_wait_s = 0, predicted_queue_s = 0, after_prefill_s = 0;
  int retry_after_s = 0;  // kRejected: when to try again (whole seconds, at least 1)
};

class AdmissionQueue {
 public:
  using Clock = std::function<std::chrono::steady_clock::time_point()>;

  // `capacity`: the live workers' prompt rate and backlog (WorkerRegistry::Prefill), read at
  // Submit.
  explicit AdmissionQueue(std::function<PrefillCapacity()> capacity,
                          Clock clock = &std::chrono::steady_clock::now);

  // Refuses the request (its SLO is out of reach), starts it (no one waits ahead of it and
  // try_start succeeded) or queues it.
  Admission Submit(AdmissionRequest request);
  // Takes a waiting request out of the queue: true when it was waiting (it never started);
  // false when it started or timed out already.
  bool Withdraw(uint64_t ticket);
  // Starts waiting requests in order while they find routes; how many started.
  int Pump();
  // Times out the requests whose deadline has passed (their on_timeout is called); how many.
  int Expire();

  size_t waiting() const;
  int64_t waiting_prompt_tokens() const;
  // The wait Submit would predict now for `request` (seconds; 0: none predicted).
  double PredictWait(const AdmissionRequest& request) const;
  // An admitted request's first token came `seconds` after its prefill ended.
  void RecordAfterPrefill(double seconds);

 private:
  struct Entry {
    uint64_t ticket = 0;
    AdmissionRequest request;
    double start_tag = 0;
  };
  struct TenantQueue {
    std::deque<Entry> entries;
    double last_finish = 0;
    int64_t prompt_tokens = 0;  // of its waiting entries
    int64_t cost = 0;           // of its waiting entries
    double weight = 1;          // of its latest request
  };
  struct PriorityQueue {
    std::map<std::string, TenantQueue> tenants;
    double virtual_time = 0;
  };
  struct Started {
    std::chrono::steady_clock::time_point at;
    int64_t prompt_tokens;
  };

  // The predicted wait until its first token; `queue_s` (when not null): of it, the wait
  // before its prompt starts.
  double PredictLocked(const AdmissionRequest& request, std::chrono::steady_clock::time_point now,
                       double* queue_s = nullptr) const;
  // Prompt tokens a second the queue started while it was backlogged (0: not known yet).
  // Prompt tokens a second started while backlogged, over the last window; -1 while that backlog
  // is younger than `minimum` (a queue that has not moved for less than a prompt's time is
  // not evidence of a slow queue).
  // `requests_per_second`: the requests it started a second over the same window (-1 likewise).
  double DrainRateLocked(std::chrono::steady_clock::time_point now,
                         std::chrono::duration<double> minimum, double* requests_per_second) const;
  bool AnyWaitingAtOrAboveLocked(Priority priority) const;
  void EnqueueLocked(uint64_t ticket, AdmissionRequest request);
  // The waiting request to try next, or null.
  Entry* NextLocked(PriorityQueue** queue, TenantQueue** tenant);
  // Takes `it` of `tenant`'s entries out; forgets the tenant when nothing of it matters now.
  void RemoveLocked(PriorityQueue& queue, const std::string& tenant,
                    std::deque<Entry>::iterator it);
  // Takes out the requests past their deadline: their on_timeout calls, to run unlocked.
  std::vector<std::function<void()>> TakeExpiredLocked(std::chrono::steady_clock::time_point now);

  // The median time after a prefill of the recent requests; 0 while fewer than kMinOutcomes
  // are known.
  double AfterPrefillLocked(std::chrono::steady_clock::time_point now) const;

  const std::function<PrefillCapacity()> capacity_;
  const Clock clock_;
  // Recent requests' times after their prefill, and when each was recorded; guarded by mu_.
  std::deque<std::pair<std::chrono::steady_clock::time_point, double>> outcomes_;

  mutable std::mutex mu_;
  PriorityQueue queues_[3];  // by Priority; guarded by mu_
  uint64_t next_ticket_ = 1;
  size_t waiting_ = 0;
  int64_t waiting_prompt_tokens_ = 0;
  // Since when requests have waited without a break, and what the queue started since (the
  // last window's worth), for the drain rate.
  std::chrono::steady_clock::time_point backlog_since_;
  std::deque<Started> started_;
};

}  // namespace pdserve::router
