// Cache-aware scoring: which prefill and decode worker an attempt should use given the blocks of
// its prompt each one holds (prefix_index.h), and whether a decode worker should prefill the
// prompt itself (conditional disaggregation). Pure functions of plain inputs; the routers fill
// them from their snapshot (router.h: WorkerLoad, PrefillCapacity) and an index, and filter the
// candidates by room (HasPrefillRoomFor, HasRoomFor) first.
//
// Prefill: a candidate's predicted time to first token is its queue, the prompt tokens sent to
// it to compute and unanswered, plus the prompt tokens it lacks (past its matched blocks), both
// at its prompt rate:  ttft = (queued + uncached) / rate.  The pick weighs the uncached part
// more:  score = queued / rate + (1 + work_weight) * uncached / rate,  as the tokens it computes
// also delay every request queued behind this one; under load the workers' queues even out
// within a few steps, and what stays is the work each route adds. So a worker that holds the
// conversation so far keeps it while its queue is no longer than the others' by more than the
// weighted work it saves. A worker past its step budget (no room) takes a request only for a
// longer cached prefix than the least any candidate holds, and only up to its queue limit:
// affinity never overrides an overloaded worker.
//
// Decode: blocks the prefill worker must send (those the decode worker lacks) against the
// decode worker's batch:  cost = missing_blocks * seconds_per_block_sent
//                              + running * seconds_per_running_sequence.
//
// Matches are hints: a block counted as cached that the worker has lost is computed or sent
// again, which costs time and never fails the request.
//
// Threads: pure functions; safe from any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "router/router.h"

namespace pdserve::router {

struct PrefillCandidate {
  uint64_t worker = 0;
  int matched_blocks = 0;            // leading blocks of the prompt it holds
  double tokens_per_second = 0;      // its measured prompt rate; 0: not measured yet
  int64_t queued_prompt_tokens = 0;  // sent to it and unanswered (WorkerLoad::sent_prompt_tokens)
  bool has_room = true;              // within its step budget with this prompt (HasPrefillRoomFor)
  // Without room, the most prompt tokens to compute it may hold, this one's included, when it is
  // the best pick for its cached prefix. 0: none past its room.
  int64_t queue_limit_tokens = 0;
};

struct PrefillJob {
  int prompt_tokens = 0;
  int page_size = 16;  // tokens per block; > 0
  // The rate of a candidate with none measured (PrefillCapacity::tokens_per_second). 0: the
  // mean of the candidates' measured rates, or, with none measured, 1 (tokens are compared).
  double default_tokens_per_second = 0;
  // What a token computed weighs in the pick beyond its own time to first token (>= 0).
  double work_weight = 1.0;
};

struct PrefillEstimate {
  double queue_seconds = 0;    // the work already sent to it
  double compute_seconds = 0;  // the prompt tokens it lacks
  double ttft_seconds() const { return queue_seconds + compute_seconds; }
};

// Prompt tokens past `matched_blocks` full blocks of `page_size`: at least 1, as the last
// prompt token is run for the first token even when every block is cached.
int64_t UncachedTokens(int prompt_tokens, int matched_blocks, int page_size);

// `c`'s predicted time to first token at `tokens_per_second` (> 0).
PrefillEstimate PredictPrefill(const PrefillCandidate& c, const PrefillJob& job,
                               double tokens_per_second);

// The index in `candidates` of the smallest score among those with room, or of a better-scoring
// one without room for a longer cached prefix within its queue limit (see above); on ties the
// one with more matched blocks, then the first. nullopt when none may take it.
std::optional<size_t> PickPrefill(std::span<const PrefillCandidate> candidates,
                                  const PrefillJob& job);
// The rate PickPrefill uses for `c` among `candidates`.
double PrefillRate(const PrefillCandidate& c, std::span<const PrefillCandidate> candidates,
                   const PrefillJob& job);
// The mean prompt rate of the candidates with one measured; 0 when none is.
double MeanMeasuredRate(std::span<const PrefillCandidate> candidates);

struct DecodeCandidate {
  uint64_t worker = 0;
  int matched_blocks = 0;  // leading blocks of the prompt it holds: they are not sent
  int free_pages = 0;      // free less pending (WorkerLoad: free_pages - pending_pages)
  // Sequences in its batch or routed to it: the more of its Load's running and the registry's
  // attempts on it (which count the running ones too).
  int running = 0;
};

struct DecodeJob {
  int prompt_blocks = 0;  // the prompt's full blocks
  // KV transfer time of one block from the prefill worker (its bytes over the link's rate).
  double seconds_per_block_sent = 0;
  // What one more sequence in a decode worker's batch adds to this request's decoding: the
  // step time one sequence adds, times the tokens the request is expected to decode.
  double seconds_per_running_sequence = 0;
};

// missing_blocks * seconds_per_block_sent + running * seconds_per_running_sequence.
double DecodeCost(const DecodeCandidate& c, const DecodeJob& job);

// The index in `candidates` of the smallest DecodeCost; on ties the most free pages, then the
// first. nullopt when there is none.
std::optional<size_t> PickDecode(std::span<const DecodeCandidate> candidates, const DecodeJob& job);

// The candidates of a snapshot's worker `w` that holds `matched_blocks` of the prompt; a prefill
// candidate at its measured prompt rate `tokens_per_second` (0: not measured).
PrefillCandidate PrefillCandidateOf(const WorkerLoad& w, int matched_blocks,
                                    double tokens_per_second);
DecodeCandidate DecodeCandidateOf(const WorkerLoad& w, int matched_blocks);

// Conditional disaggregation: prefill on the decode worker itself (no KV transfer) or use a
// prefill worker.
// Local when its predicted time to first token is sooner than the pair's: its queued prompt
// work and the part it lacks at its prompt rate, times local_slowdown, against the pair's queue,
// compute and transfer. With no local rate to predict from, only a part of at most
// short_uncached_tokens goes local.
struct PlacementOptions {
  // With no prompt rate measured for the decode worker (nor any prefill worker), at most this
  // many uncached prompt tokens are prefilled there (default 512): a prefill that short shares a
  // step with the decode batch at little cost to it. >= 0.
  int64_t short_uncached_tokens = 512;
  // A longer local prefill counts this many times its predicted time (default 1.5): it delays
  // the tokens of the decode worker's running sequences as well. >= 1.
  double local_slowdown = 1.5;
};

struct PlacementInputs {
  int64_t uncached_tokens = 0;         // prompt tokens the decode worker lacks (UncachedTokens)
  double local_tokens_per_second = 0;  // its prompt rate; 0: unknown (only short ones go local)
  double local_queue_seconds = 0;      // prompt work already waiting on it
  // The chosen prefill worker's (PickPrefill, PredictPrefill); an infinite queue when no
  // prefill worker can take it.
  PrefillEstimate pair;
  double transfer_seconds = 0;  // sending the blocks the decode worker lacks
};

struct Placement {
  bool local = false;
  // "local_faster": local, the pair's predicted time to first token (its queue, compute and
  // transfer) is longer than local prefill's; "pair_faster": a prefill worker; "short_uncached":
  // local with no rate to predict from, the uncached part short. What the ledger row records.
  std::string reason;
  double local_seconds = 0;  // predicted local time to first token (with local_slowdown)
  double pair_seconds = 0;   // predicted pair time to first token
};

Placement ChoosePlacement(const PlacementInputs& in, const PlacementOptions& options = {});

}  // namespace pdserve::router
