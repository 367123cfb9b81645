#include "router/routers.h"

#include "router/cache_aware_scoring.h"

#include <algorithm>
#include <climits>
#include <limits>
#include <vector>

namespace pdserve::router {
namespace {

// Of `role`, serving, allowed for `request`; room not checked.
bool Eligible(const WorkerLoad& w, const std::string& role, const RouteRequest& request) {
  return w.role == role && !w.draining && !request.exclude.count(w.id) &&
         (request.zones.empty() || request.zones.count(w.zone));
}

bool Usable(const WorkerLoad& w, const std::string& role, const RouteRequest& request) {
  return Eligible(w, role, request) &&
         (role == "prefill" ? HasPrefillRoomFor(w, request) : HasRoomFor(w, request));
}

// The best worker by `score` among the usable ones of `role` (and `layout_hash`, when not 0);
// the first in the snapshot on ties.
template <typename Score>
const WorkerLoad* Best(std::span<const WorkerLoad> workers, const std::string& role,
                       const RouteRequest& request, uint64_t layout_hash, Score score) {
  const WorkerLoad* best = nullptr;
  int64_t best_score = INT64_MIN;
  for (const WorkerLoad& w : workers) {
    if (!Usable(w, role, request) || (layout_hash != 0 && w.layout_hash != layout_hash)) continue;
    const int64_t s = score(w);
    if (!best || s > best_score) {
      best_score = s;
      best = &w;
    }
  }
  return best;
}

// Most free KV pages, a block of the prompt it holds counting as one (it takes no new page and
// no transfer), then the fewest sequences running or routed to it.
int64_t RoomForDecoding(const WorkerLoad& w, const RouteRequest& request) {
  return int64_t{w.free_pages - w.pending_pages + request.Matched(w.id)} * 1024 -
         (w.attempts + w.running);
}

// Conditional disaggregation's inputs for decode worker `d` against the prefill `candidates`
// (`p`: PickPrefill's choice among them, nullopt when none has room).
PlacementInputs PlacementInputsOf(const WorkerLoad& d, const RouteRequest& request,
                                  std::span<const PrefillCandidate> candidates,
                                  std::optional<size_t> p, const PrefillJob& job) {
  // D's prompt rate: measured when it has prefilled, else the prefill workers' mean (the same
  // layout: the same model on like devices); 0 when none is measured.
  const double local_rate =
      d.prefill_tokens_per_second > 0 ? d.prefill_tokens_per_second : MeanMeasuredRate(candidates);
  PlacementInputs in;
  in.uncached_tokens = UncachedTokens(request.prompt_tokens, request.Matched(d.id), job.page_size);
  in.local_tokens_per_second = local_rate;
  if (local_rate > 0) {
    in.local_queue_seconds =
        static_cast<double>(std::max<int64_t>(0, d.sent_prompt_tokens)) / local_rate;
  }
  // The pair's first token: the chosen prefill worker's; with none free, the soonest of any, as
  // waiting for one's room takes at least its queue. A prefill worker with no rate measured yet
  // counts at the local one (the same layout: like devices).
  PrefillJob pair_job = job;
  pair_job.default_tokens_per_second = local_rate;
  in.pair.queue_seconds = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (p && i != *p) continue;
    const PrefillEstimate e =
        PredictPrefill(candidates[i], pair_job, PrefillRate(candidates[i], candidates, pair_job));
    if (e.ttft_seconds() < in.pair.ttft_seconds()) in.pair = e;
  }
  return in;
}

}  // namespace

int PagesFor(int tokens, int page_size) {
  if (page_size <= 0) return 1;
  return std::max(1, (tokens + page_size - 1) / page_size);
}

bool HasPrefillRoomFor(const WorkerLoad& w, const RouteRequest& request) {
  if (w.max_batch_tokens <= 0 || w.sent_prompt_tokens <= 0) return true;
  return w.sent_prompt_tokens +
             UncachedTokens(request.prompt_tokens, request.Matched(w.id), w.page_size) <=
         int64_t{w.max_batch_tokens};
}

int InitialKvPages(const WorkerLoad& w, const RouteRequest& request) {
  int64_t tokens = request.kv_tokens;
  if (w.kv_lookahead_tokens > 0) {
    tokens = std::min<int64_t>(tokens, int64_t{request.prompt_tokens} + w.kv_lookahead_tokens);
  }
  if (w.max_context > 0) tokens = std::min<int64_t>(tokens, w.max_context);
  return PagesFor(static_cast<int>(tokens), w.page_size);
}

bool HasRoomFor(const WorkerLoad& w, const RouteRequest& request) {
  if (request.kv_tokens <= 0) return true;
  return w.free_pages - w.pending_pages >= InitialKvPages(w, request);
}

std::optional<Route> PdPairRouter::Pick(std::span<const WorkerLoad> workers,
                                        const RouteRequest& request) const {
  const WorkerLoad* d = Best(workers, "decode", request, 0,
                             [&](const WorkerLoad& w) { return RoomForDecoding(w, request); });
  if (!d) return std::nullopt;
  // The prefill worker of D's layout that scores best: its queue plus the prompt tokens it lacks,
  // weighted, at its prompt rate (cache_aware_scoring.h).
  std::vector<const WorkerLoad*> prefill;
  std::vector<PrefillCandidate> candidates;
  for (const WorkerLoad& w : workers) {
    if (!Eligible(w, "prefill", request) || w.layout_hash != d->layout_hash) continue;
    prefill.push_back(&w);
    PrefillCandidate c = PrefillCandidateOf(w, request.Matched(w.id), w.prefill_tokens_per_second);
    c.has_room = HasPrefillRoomFor(w, request);
    c.queue_limit_tokens = int64_t{routing_.affinity.queue_steps} * std::max(0, w.max_batch_tokens);
    candidates.push_back(c);
  }
  const PrefillJob job{.prompt_tokens = request.prompt_tokens,
                       .page_size = d->page_size > 0 ? d->page_size : 16,
                       .work_weight = routing_.affinity.work_weight};
  const std::optional<size_t> p = PickPrefill(candidates, job);
  auto pair = [&](std::string reason) -> std::optional<Route> {
    if (!p) return std::nullopt;  // it waits for a prefill worker's room
    return Route{prefill[*p]->id, d->id, true, "pair", std::move(reason)};
  };
  auto local = [&](std::string reason) {
    return Route{d->id, d->id, false, "local", std::move(reason)};
  };
  if (request.one_worker) return local("choices");
  switch (routing_.disaggregation) {
    case Disaggregation::kAlways:
      return pair("always");
    case Disaggregation::kNever:
      return local("never");
    case Disaggregation::kConditional:
      break;
  }
  if (candidates.empty()) return local("no_prefill_worker");
  const PlacementInputs in = PlacementInputsOf(*d, request, candidates, p, job);
  Placement placement = ChoosePlacement(in, routing_.placement);
  if (placement.local) return local(std::move(placement.reason));
  return pair(std::move(placement.reason));
}

std::optional<Route> ColocatedRouter::Pick(std::span<const WorkerLoad> workers,
                                           const RouteRequest& request) const {
  const WorkerLoad* b = Best(workers, "both", request, 0,
                             [&](const WorkerLoad& w) { return RoomForDecoding(w, request); });
  if (!b) return std::nullopt;
  return Route{b->id, b->id, false, "colocated", ""};
}

std::optional<Route> RoundRobinRouter::Pick(std::span<const WorkerLoad> workers,
                                            const RouteRequest& request) const {
  const uint64_t turn = turn_.fetch_add(1, std::memory_order_relaxed);
  auto nth_usable = [&](const std::string& role, uint64_t layout_hash) -> const WorkerLoad* {
    std::vector<const WorkerLoad*> usable;
    for (const WorkerLoad& w : workers) {
      if (Usable(w, role, request) && (layout_hash == 0 || w.layout_hash == layout_hash)) {
        usable.push_back(&w);
      }
    }
    return usable.empty() ? nullptr : usable[turn % usable.size()];
  };
  if (const WorkerLoad* d = nth_usable("decode", 0)) {
    if (request.one_worker) return Route{d->id, d->id, false, "local", "choices"};
    if (const WorkerLoad* p = nth_usable("prefill", d->layout_hash)) {
      return Route{p->id, d->id, true, "pair", "round_robin"};
    }
  }
  if (const WorkerLoad* b = nth_usable("both", 0)) {
    return Route{b->id, b->id, false, "colocated", "round_robin"};
  }
  return std::nullopt;
}

FallbackRouter::FallbackRouter(std::vector<std::unique_ptr<Router>> routers)
    : routers_(std::move(routers)) {}

std::optional<Route> FallbackRouter::Pick(std::span<const WorkerLoad> workers,
                                          const RouteRequest& request) const {
  for (const auto& r : routers_) {
    if (auto route = r->Pick(workers, request)) return route;
  }
  return std::nullopt;
}

const char* ToString(Disaggregation d) {
  switch (d) {
    case Disaggregation::kConditional:
      return "conditional";
    case Disaggregation::kAlways:
      return "always";
    case Disaggregation::kNever:
      return "never";
  }
  return "conditional";
}

Result<Disaggregation> ParseDisaggregation(const std::string& name) {
  for (Disaggregation d :
       {Disaggregation::kConditional, Disaggregation::kAlways, Disaggregation::kNever}) {
    if (name == ToString(d)) return d;
  }
  return InvalidArgument("unknown disaggregation '" + name + "' (conditional, always or never)");
}

std::unique_ptr<Router> MakeDefaultRouter(PairRouting pair) {
  std::vector<std::unique_ptr<Router>> chain;
  chain.push_back(std::make_unique<PdPairRouter>(pair));
  chain.push_back(std::make_unique<ColocatedRouter>());
  return std::make_unique<FallbackRouter>(std::move(chain));
}

Result<std::unique_ptr<Router>> MakeRouter(const std::string& routing, PairRouting pair) {
  if (!(pair.affinity.work_weight >= 0) || pair.affinity.queue_steps < 0) {
    return InvalidArgument("the cache affinity's work weight and queue steps must be >= 0");
  }
  if (pair.placement.short_uncached_tokens < 0 || !(pair.placement.local_slowdown >= 1)) {
    return InvalidArgument(
        "local prefill's short prompt must be >= 0 tokens and its slowdown >= 1");
  }
  if (routing == "cache-aware") return MakeDefaultRouter(pair);
  if (routing == "round-robin")
    return std::unique_ptr<Router>(std::make_unique<RoundRobinRouter>());
  return InvalidArgument("unknown routing '" + routing + "' (cache-aware or round-robin)");
}

}  // namespace pdserve::router
