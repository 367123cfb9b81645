// KvIndex: the KV blocks each worker that publishes KV events holds, as the gateway last heard
// (proto/control.proto: KvEvents, KvSnapshot, KvResyncRequest), for cache-aware routing. The
// registry feeds it what the protocol says: a worker registered (AddWorker: it starts knowing
// nothing of it and asks a snapshot), its KvEvents (Apply) and KvSnapshot (ApplySnapshot), and
// that it left (RemoveWorker). A worker that registers again is a new worker: it starts empty.
//
// Ordering: each worker's KvEvents carry seq 1, 2, ... after its registration, and S + 1, S + 2,
// ... after a KvSnapshot with seq S. A message with any other seq (a gap, a repeat) drops the
// worker's blocks and says kGap: the caller sends KvResyncRequest. Until the snapshot comes, the
// worker's events are ignored (kAwaitingResync) and it is believed to hold nothing; events it
// sent before the snapshot arrive before it on the one ordered connection, and its snapshot
// covers them.
//
// Trust: a worker is believed to hold at most the blocks its pool holds (`max_blocks`, its
// registered KV pages); stored blocks past that are ignored and counted. What the index says is
// a hint (prefix_index.h): a block it counts that is gone costs a recompute, never an error.
//
// Layout and cost: one hash map from block key to the set of workers holding it, a bitset over
// dense worker slots (slots 0-63 in the entry itself, higher ones in a vector beside it). With
// K distinct keys and W slots, memory is about K * (72 + W / 8) bytes on 64-bit Linux: 256
// workers of 10,000 blocks each, with no key shared, take about 270 MB, and shared keys (a
// system prompt every worker holds) are stored once. MatchedBlocks costs a lookup per
// candidate, then, for all candidates at once, one hash lookup and W / 64 word operations per
// key until no candidate matches: a prompt of L cached blocks over 256 workers is about L
// lookups and 4 * L word operations. Apply costs one
// lookup per key in the message. Forgetting a worker's blocks (RemoveWorker, a gap, a snapshot)
// walks all K keys.
// StoredBlock.parent is not needed here: a match walks the prompt's own chain of keys.
//
// Threads: no lock; one caller at a time (the registry, under its mutex).
#pragma once

#include <cstdint>
#include <set>
#include <span>
#include <unordered_map>
#include <vector>

#include "common/block_key.h"
#include "proto/control.pb.h"
#include "router/prefix_index.h"

namespace pdserve::router {

enum class KvEventsOutcome {
  kApplied,         // in order: the worker's blocks changed
  kGap,             // not the next seq: its blocks were dropped; send it KvResyncRequest
  kAwaitingResync,  // ignored: its snapshot was asked and has not come yet
  kUnknownWorker,   // ignored: not added, or removed
};

struct KvIndexStats {
  size_t blocks = 0;           // keys held, summed over workers (Size())
  size_t distinct_blocks = 0;  // keys at least one worker holds
  uint64_t resyncs = 0;        // snapshots asked: one per AddWorker and per gap
  uint64_t gaps = 0;           // KvEvents out of order
  uint64_t over_capacity = 0;  // stored blocks ignored because their worker held max_blocks
};

class KvIndex final : public PrefixIndex {
 public:
  // `worker` registered: it starts with no blocks and awaits a snapshot (the caller sends it
  // KvResyncRequest). It is believed to hold at most `max_blocks`. Adding a worker already
  // added starts it over.
  void AddWorker(uint64_t worker, size_t max_blocks);
  // It left: its blocks are forgotten.
  void RemoveWorker(uint64_t worker);
  // Its next KvEvents.
  KvEventsOutcome Apply(uint64_t worker, const proto::KvEvents& events);
  // Its KvSnapshot replaces its blocks (the first max_blocks of them) and sets its next seq to
  // snapshot.seq + 1, asked for or not. False (ignored) for a worker not added.
  bool ApplySnapshot(uint64_t worker, const proto::KvSnapshot& snapshot);

  std::vector<int> MatchedBlocks(std::span<const BlockKey> prompt,
                                 std::span<const uint64_t> workers) const override;
  size_t Size() const override { return blocks_; }

  // The blocks `worker` is believed to hold (0 when not added).
  size_t BlocksOf(uint64_t worker) const;
  // Whether its snapshot was asked and has not come yet (false when not added).
  bool AwaitingResync(uint64_t worker) const;
  KvIndexStats Stats() const;

 private:
  // The workers holding one key: slots 0-63 in `low`, slot 64 * (i + 1) + b in bit b of high[i].
  struct Holders {
    uint64_t low = 0;
    std::vector<uint64_t> high;
    uint64_t Word(size_t i) const { return i == 0 ? low : i - 1 < high.size() ? high[i - 1] : 0; }
    bool Has(int slot) const { return (Word(slot / 64) >> (slot % 64)) & 1; }
    void Set(int slot);
    void Clear(int slot);
    bool Empty() const;
  };
  struct Worker {
    int slot = 0;
    size_t max_blocks = 0;
    size_t blocks = 0;  // keys it holds
    uint64_t next_seq = 1;
    bool awaiting_resync = true;
  };

  // Forgets every block of `w`.
  void Forget(Worker& w);
  // `w` holds `key` now, unless it holds max_blocks already.
  void Store(Worker& w, BlockKey key);
  void Remove(Worker& w, BlockKey key);

  std::unordered_map<uint64_t, Worker> workers_;   // added, by worker id
  std::unordered_map<BlockKey, Holders> holders_;  // keys some worker holds
  std::set<int> free_slots_;                       // below slot_count_, not in use
  int slot_count_ = 0;                             // slots ever handed out
  size_t blocks_ = 0;                              // sum of workers' blocks
  uint64_t resyncs_ = 0, gaps_ = 0, over_capacity_ = 0;
};

}  // namespace pdserve::router
