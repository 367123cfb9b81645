// Router: which workers take a request attempt, decided from a snapshot of the registry's live
// workers (docs/architecture.md, "A request's life", step 2). A policy is a pure function of its
// inputs: WorkerRegistry takes the snapshot under its lock and sends the messages the chosen
// route needs. Implementations: PdPairRouter, ColocatedRouter and their fallback chain
// (routers.h); FakeRouter (tests/fakes/fake_router.h) for tests. Pick may be called from any
// thread; implementations hold no mutable state.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>

#include "common/capacity_class.h"

namespace pdserve::router {

// One registered worker as the registry sees it now.
struct WorkerLoad {
  uint64_t id = 0;
  // As registered ("host:pid"): which process an actuator lets go; WorkerRegistry::LoadSnapshot
  // only (the router's own picks need no name).
  std::string name;
  std::string role;  // "prefill", "decode" or "both"
  CapacityClass capacity_class = CapacityClass::kReserved;
  std::string zone;
  uint64_t layout_hash = 0;
  int kv_pages = 0;     // as registered
  int page_size = 0;    // tokens per KV page, as registered
  int max_context = 0;  // as registered; a reservation never exceeds it (0: unknown)
  // As registered: it reserves KV for a request's prompt plus this many tokens and grows it as
  // the request decodes (0: prompt plus max_tokens up front).
  int kv_lookahead_tokens = 0;
  int free_pages = 0;  // from its last Load, at most kv_pages
  // Pages the registry routed to it that its last Load does not show yet (a Reserve or Generate
  // it has not answered, or answered after that Load): free_pages - pending_pages is its room.
  int pending_pages = 0;
  int running = 0;  // sequences in its batch, from its last Load
  int waiting = 0;
  int attempts = 0;  // attempts the registry has on it now
  // Since it last held an attempt (0 while it holds one); WorkerRegistry::LoadSnapshot only.
  double idle_seconds = 0;
  // Prompt tokens the registry sent it to compute (past the blocks it held) and it has not
  // answered yet (prefill workers).
  int64_t sent_prompt_tokens = 0;
  int max_batch_tokens = 0;  // its step budget, as registered (0: not said)
  // Its prompt rate while running prompts, measured from its step reports (0: not yet).
  double prefill_tokens_per_second = 0;
  // Its decode step's time with one sequence in the batch, from its step reports (a recent
  // average; 0: not yet): the inter-token latency no scaling goes below.
  double unloaded_decode_step_seconds = 0;
  bool draining = false;
};

struct RouteRequest {
  int prompt_tokens = 0;
  // The KV the attempt may need on its decode worker, in tokens (prompt plus max_tokens): a
  // decode or colocated worker takes it only with room for what it reserves of it at the start
  // (InitialKvPages) now. 0: no check.
  int kv_tokens = 0;
  std::set<uint64_t> exclude;   // workers not to use (those that failed this request before)
  std::set<std::string> zones;  // where its workers must be (its tenant's residency); empty: any
  // It must be prefilled where it is decoded (a request of several choices, which start from
  // its prompt's logits): a colocated worker, or a decode worker prefilling locally.
  bool one_worker = false;
  // By worker id, the prompt's leading full KV blocks the worker is believed to hold
  // (prefix_index.h); a worker not in it holds none. A hint: a wrong count costs time, never the
  // request.
  std::map<uint64_t, int> matched_blocks;
  int Matched(uint64_t worker) const {
    auto it = matched_blocks.find(worker);
    return it == matched_blocks.end() ? 0 : it->second;
  }
};

// The workers of one attempt: a prefill and a decode worker (disaggregated), or one worker that
// prefills and decodes (the same id twice): of role both (colocated), or a decode worker
// prefilling the prompt itself (conditional disaggregation).
struct Route {
  uint64_t prefill_worker = 0, decode_worker = 0;
  bool disaggregated = false;
  // What the ledger row records: "pair", "local" (a decode worker prefills) or "colocated", and
  // why (routers.h); empty when the router gives none.
  std::string placement;
  std::string placement_reason;
};

// The prompt work the live prefill (and colocated) workers can do: what admission predicts a
// queued request's wait from.
struct PrefillCapacity {
  // Measured from their step reports (a step's cost per prompt token, past its fixed cost), a
  // worker that has run no prompt yet at the mean of those measured; 0 before any prompt ran
  // anywhere.
  double tokens_per_second = 0;
  // Sent to prefill workers and not answered yet, less what each worker has done of them since
  // its last answer at its measured rate: the work a request queued now still waits behind.
  double queued_prompt_tokens = 0;
  // The same in worker seconds, summed over the workers: each one's step's fixed cost and its
  // tokens at its rate, less the time it has run (admission's measure of the work ahead).
  double queued_prompt_seconds = 0;
  // A prompt step's fixed cost, seconds, beside its cost per token (1 / the rate a worker): the
  // measured workers' mean (router/prompt_step_fit.h).
  double step_seconds = 0;
  int workers = 0;       // those counted in tokens_per_second
  int idle_workers = 0;  // prefill workers with no prompt sent and unanswered
};

// KV pages of `page_size` tokens that `tokens` tokens take (page_size <= 0: one page).
int PagesFor(int tokens, int page_size);
// The pages `w` reserves for `request` when it takes it: prompt plus its lookahead (all of
// kv_tokens without one), within kv_tokens and its context.
int InitialKvPages(const WorkerLoad& w, const RouteRequest& request);
// Whether `w` has free pages, less those pending, for `request`'s initial KV now.
bool HasRoomFor(const WorkerLoad& w, const RouteRequest& request);

// Whether a prefill worker takes `request`'s prompt now: when idle, or when the prompt tokens
// sent to it and unanswered, with the ones of this prompt it would compute (past the blocks it
// holds), fit one of its steps. Beyond that a request waits
// in the admission queue, where it is ordered fairly and can be withdrawn, rather than behind a
// worker's queue (a request of another tenant would wait a whole step more per step queued
// there). A worker that did not say its step budget takes any.
bool HasPrefillRoomFor(const WorkerLoad& w, const RouteRequest& request);

class Router {
 public:
  virtual ~Router() = default;
  // The route for `request` among `workers`, or nullopt when none can take it now. A route
  // names only workers of the snapshot that are not draining, not excluded and in the request's
  // zones (when it names any), a decode (or colocated) worker only with room for the request's
  // KV (HasRoomFor), and a prefill worker only with room in its queue (HasPrefillRoomFor).
  virtual std::optional<Route> Pick(std::span<const WorkerLoad> workers,
                                    const RouteRequest& request) const = 0;
};

}  // namespace pdserve::router
