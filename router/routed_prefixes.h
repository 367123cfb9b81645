// RoutedPrefixes: the approximate prefix index, for workers that publish no KV events
// (Register.kv_events false). The router records where it sent which prompt (Routed: the
// prompt's block keys, on each worker that computed or received its KV) and believes a worker
// holds those blocks for `ttl` after it last sent them there, within a bound per worker: past
// `max_blocks` records, the least recently routed ones are forgotten first (LRU), and within a
// prompt its later blocks before its earlier ones, as a prefix is only useful from its start.
// It answers the same query as KvIndex (prefix_index.h); its answers are hints, and a worker
// that evicted sooner only costs a recompute.
//
// Cost: per worker a list in routing order and a hash map from key to its record, about 80
// bytes a record; Routed costs one lookup per key, MatchedBlocks one per matched key plus one
// per candidate. Expired records are pruned from the oldest end at each Routed of their worker
// and at Prune.
//
// Threads: no lock; one caller at a time (the registry, under its mutex). The clock is
// injected, so tests drive time.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <list>
#include <span>
#include <unordered_map>
#include <vector>

#include "common/block_key.h"
#include "router/prefix_index.h"

namespace pdserve::router {

struct RoutedPrefixOptions {
  // How long blocks count as cached on a worker after a prompt holding them was last routed
  // there (default 120 s): about how long a worker's cache keeps a prefix nobody uses. > 0.
  std::chrono::milliseconds ttl{120000};
};

class RoutedPrefixes final : public PrefixIndex {
 public:
  using Clock = std::function<std::chrono::steady_clock::time_point()>;

  explicit RoutedPrefixes(RoutedPrefixOptions options = {},
                          Clock clock = &std::chrono::steady_clock::now);

  // `worker` registered: nothing recorded, at most `max_blocks` records (its KV pages). Adding
  // a worker already added starts it over.
  void AddWorker(uint64_t worker, size_t max_blocks);
  void RemoveWorker(uint64_t worker);
  // A prompt with block keys `prompt` was routed to `worker` now. Ignored for a worker not added.
  void Routed(uint64_t worker, std::span<const BlockKey> prompt);
  // Drops every worker's expired records (Routed drops only its worker's).
  void Prune();

  // Records younger than the ttl only.
  std::vector<int> MatchedBlocks(std::span<const BlockKey> prompt,
                                 std::span<const uint64_t> workers) const override;
  // Records not yet pruned, summed over workers.
  size_t Size() const override { return records_; }

 private:
  using Time = std::chrono::steady_clock::time_point;
  struct Record {
    BlockKey key;
    Time routed;
  };
  struct Worker {
    size_t max_blocks = 0;
    std::list<Record> by_recency;  // most recently routed first: also the oldest time last
    std::unordered_map<BlockKey, std::list<Record>::iterator> records;
  };

  void PruneExpired(Worker& w, Time now);
  void DropOldest(Worker& w);

  RoutedPrefixOptions options_;
  Clock clock_;
  std::unordered_map<uint64_t, Worker> workers_;  // added, by worker id
  size_t records_ = 0;
};

}  // namespace pdserve::router
