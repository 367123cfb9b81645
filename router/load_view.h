// LoadView: the registered workers' load as the router and admission see it. It keeps, per
// worker, what it registered, its last Load (capped by what it registered), the attempts it
// holds and its measured prompt rate, and per attempt the KV pages routed to its decode worker;
// from these it makes the snapshot the Router picks from (with the pages and prompts routed but
// not yet shown in the workers' Loads), readiness (HasRoute), the largest KV a worker holds and
// the prefill capacity admission predicts waits from, and the summaries /health and /metrics
// show. WorkerRegistry (router/worker_registry.h) tells it what the protocol did: a worker
// joined or left, a Load or StepReport came, an attempt was routed, answered, prefilled,
// released or closed.
//
// Pages routed to a decode worker count as taken (pending_pages) from the Reserve (or Generate)
// until a Load the worker sent after answering it: a burst of requests between two Loads cannot
// promise the same free pages twice, and a Load from before the worker read the Reserve does
// not free them.
//
// Threads: none of its own and no lock; one caller at a time (the registry, under its mutex).
// The caller passes the time, so tests drive it.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "proto/control.pb.h"
#include "router/prompt_step_fit.h"
#include "router/router.h"

namespace pdserve::router {

// A registered worker as /health and /metrics list it.
struct WorkerSummary {
  uint64_t id;
  std::string role;
  CapacityClass capacity_class = CapacityClass::kReserved;
  std::string name;
  int free_pages, running, inflight;
  bool draining;
  int kv_pages = 0;  // as registered: with free_pages, whether it holds any KV
};

class LoadView {
 public:
  using Clock = std::chrono::steady_clock;

  // `worker` registered `info` at `now`: all its pages free, idle since now.
  void Join(uint64_t worker, const proto::Register& info, Clock::time_point now);
  // It left (after the registry released the attempts it held).
  void Leave(uint64_t worker);
  // Its Load: what it may claim is what it registered (no more free pages than its pool, no
  // negative counts). A Load sent after its answer to a Reserve (or its first tokens) counts
  // that attempt's pages among the used ones. True when the worker may have room it did not
  // have (more free pages, fewer sequences running or waiting, or it stopped draining): what is
  // worth another look at the admission queue. A heartbeat that repeats the last Load is not.
  bool OnLoad(uint64_t worker, const proto::Load& load);
  // A well-formed StepReport of its (step_cost.h): its prompt tokens a second while it runs
  // prompts, an average over about the last ten steps; and a decode step with one sequence
  // alone, its unloaded decode step, likewise.
  void OnStep(uint64_t worker, const proto::StepReport& step);

  // Attempt `attempt` was sent to `route`'s decode (or colocated) worker, which reserves
  // `kv_pages` for it and holds it from `now`. Its `prompt_tokens` (those its prefill worker
  // computes: past the blocks it holds) count in that worker's queue from now: disaggregated,
  // though sent only once the decode worker answers; otherwise the one worker's own.
  void Routed(uint64_t attempt, const router::Route& route, int kv_pages, int64_t prompt_tokens,
              Clock::time_point now);
  // Its decode worker answered its Reserve (or, colocated, sent its first tokens): a Load it
  // sends from now on shows its pages.
  void KvAnswered(uint64_t attempt);
  // Its prompt was sent to its prefill worker, which holds it from `now`.
  void PrefillSent(uint64_t attempt, Clock::time_point now);
  // Its prefill worker answered (its first token or an error) at `now`: the prompt leaves that
  // worker's backlog, whose remaining work counts from now. Once per attempt.
  void PrefillAnswered(uint64_t attempt, Clock::time_point now);
  // It was cancelled, failed or finished: a prompt not yet sent no longer counts in its prefill
  // worker's queue.
  void Withdrawn(uint64_t attempt);
  // `worker` no longer holds a part of it (idle from `now` if it holds nothing else).
  void Released(uint64_t attempt, uint64_t worker, Clock::time_point now);
  // No worker holds it any more; a prompt still counted in a worker's queue leaves it.
  void Closed(uint64_t attempt);

  // The attempts `worker` holds a part of (none when it is not registered).
  std::set<uint64_t> HeldBy(uint64_t worker) const;

  // Every registered worker's load now, by id: what the Router picks from.
  std::vector<router::WorkerLoad> Snapshot() const;
  // The same with how long each has been idle at `now` and its name (the planner's).
  std::vector<router::WorkerLoad> SnapshotWithIdleTimes(Clock::time_point now) const;
  // Whether `router` finds a route among the registered workers, room aside.
  bool HasRoute(const router::Router& router) const;
  // The most KV, in tokens, any registered decode or colocated worker can hold for one request
  // (its pool, capped by its context); 0 with none registered.
  int64_t LargestKvTokens() const;
  // The live prefill and colocated workers' prompt rate and backlog at `now`.
  router::PrefillCapacity Prefill(Clock::time_point now) const;
  std::vector<WorkerSummary> Summaries() const;

 private:
  struct Worker {
    proto::Register info;
    proto::Load load;
    bool overclaimed = false;     // reported more free pages than it registered (logged once)
    std::set<uint64_t> attempts;  // attempts it holds a part of
    Clock::time_point last_busy;  // it last gained or lost an attempt
    // Prompt tokens to compute sent and not yet answered (prefill): its steps run those alone.
    int64_t sent_prompt_tokens = 0;
    // Since when it has worked on those: when the first was sent to it idle, or its last answer.
    Clock::time_point prompt_work_since;
    // Its prompt steps' time fitted (router/prompt_step_fit.h), and the fit's prompt rate.
    PromptStepFit prompt_steps;
    double prefill_tokens_per_second = 0;
    double unloaded_decode_step_seconds = 0;  // WorkerLoad's
  };
  // Whether the decode worker's last Load counts an attempt's pages: not while its Reserve (or
  // Generate) is unanswered, nor until a Load sent after its answer.
  enum class KvCount { kPending, kAnswered, kInLoad };
  struct Attempt {
    uint64_t prefill_worker = 0, decode_worker = 0;
    int kv_pages = 0;  // its reservation on the decode worker
    KvCount kv_count = KvCount::kPending;
    int64_t prompt_tokens = 0;
    bool reserving = false;   // its prompt counts in its prefill worker's queue, not yet sent
    bool prefilling = false;  // its prompt was sent to its prefill worker, not yet answered
  };

  std::map<uint64_t, Worker> workers_;    // registered, by id
  std::map<uint64_t, Attempt> attempts_;  // routed and not yet closed, by id
};

}  // namespace pdserve::router
