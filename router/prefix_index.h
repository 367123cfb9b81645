// PrefixIndex: where the router believes a prompt's KV blocks (common/block_key.h) are cached,
// for cache-aware routing (cache_aware_scoring.h). Two implementations answer the same query:
// KvIndex (kv_index.h), fed by the workers' own KvEvents, and RoutedPrefixes
// (routed_prefixes.h), the router's record of where it sent which prompts, for workers that
// publish nothing. Routing code asks either, or both through MatchedBlocks below, and does not
// care which.
//
// The contract with the workers: what an index says is a hint. The worker decides what it
// actually holds; a block the index counted that the worker no longer has is computed again
// (prefill) or sent again (KV transfer), never an error. An index may so be wrong in either
// direction without harming correctness, only the routing's quality.
//
// Threads: implementations have no lock; one caller at a time (the registry, under its mutex).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "common/block_key.h"

namespace pdserve::router {

class PrefixIndex {
 public:
  virtual ~PrefixIndex() = default;
  // For each of `workers`, in order, how many leading keys of `prompt` (a prompt's block keys,
  // PromptBlockKeys) it is believed to hold: the match stops at the first key it lacks, even if
  // it holds later ones (their KV depends on the missing one). 0 for a worker the index does
  // not know.
  virtual std::vector<int> MatchedBlocks(std::span<const BlockKey> prompt,
                                         std::span<const uint64_t> workers) const = 0;
  // Keys held, summed over workers (a key two workers hold counts twice): the index's size.
  virtual size_t Size() const = 0;
};

// For each of `workers`, the longest match any of `indexes` finds (a worker that publishes
// events is in the KvIndex, one that does not in RoutedPrefixes, so each knows it in one).
std::vector<int> MatchedBlocks(std::span<const PrefixIndex* const> indexes,
                               std::span<const BlockKey> prompt, std::span<const uint64_t> workers);

}  // namespace pdserve::router
