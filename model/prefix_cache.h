// PrefixCache: the index of a KV page pool's cached pages. A cached page holds the KV of one full
// block of page_size tokens, named by its block key (common/block_key.h: the key covers every
// token up to the block's end), so a sequence whose prompt starts with those tokens reads the page
// instead of computing it (vLLM's automatic prefix caching). The index maps keys to pages, keeps
// the cached pages that no sequence references in least-recently-released order for eviction, and
// records what it stores and evicts as KV events with consecutive sequence numbers, which a worker
// publishes so that the router knows where each block is.
// Reference counts live in KvPagePool (model/kv_pool.h); this class knows only whether a cached
// page is referenced (in use) or idle (evictable). Not thread-safe: KvPagePool owns one and calls
// it only under its own mutex.
#pragma once

#include <cstdint>
#include <deque>
#include <span>
#include <unordered_map>
#include <vector>

#include "common/block_key.h"

namespace pdserve::model {

// A block that became cached, with the key of the block before it in its sequence (0: the first).
struct StoredBlock {
  BlockKey key = 0;
  BlockKey parent = 0;
};

// One change to the cache: blocks stored, or blocks removed (evicted), never both.
struct KvCacheEvent {
  uint64_t seq = 0;  // 1, 2, 3, ...: a skipped number means events were lost (resync)
  std::vector<StoredBlock> stored;
  std::vector<BlockKey> removed;
};

// Every cached block, as of the event numbered `seq` (0: before any): a consumer resyncs by
// replacing its view with `blocks` and applying only events after `seq`.
struct KvCacheSnapshot {
  uint64_t seq = 0;
  std::vector<BlockKey> blocks;
};

class PrefixCache {
 public:
  // Events kept for the owner to take; older ones are dropped (their numbers then skip).
  static constexpr size_t kMaxEvents = 4096;

  explicit PrefixCache(int num_pages);

  // The page holding `key`, or -1.
  int32_t Find(BlockKey key) const;
  bool IsCached(int32_t page) const { return key_of_[page] != 0; }
  // Names referenced pages by their blocks' keys: pages[i] holds keys[i], whose parent is
  // keys[i - 1] (`parent` for the first). A page already cached under that key is skipped, and so
  // is a key another page already holds (two sequences computed the same block: the second page
  // stays uncached). Records one event for the blocks newly stored; returns how many.
  int Store(std::span<const int32_t> pages, std::span<const BlockKey> keys, BlockKey parent);
  // A cached page's last reference was dropped: it becomes the most recently used idle page.
  void MakeIdle(int32_t page);
  // An idle cached page is referenced again: it leaves the eviction order.
  void MakeReferenced(int32_t page);
  // Takes the n least recently used idle pages out of the cache (n <= idle_pages()), records one
  // event with their keys, and returns them, no longer cached.
  std::vector<int32_t> Evict(int n);

  int idle_pages() const { return idle_count_; }
  int cached_pages() const { return static_cast<int>(page_of_.size()); }
  std::vector<KvCacheEvent> TakeEvents();
  KvCacheSnapshot Snapshot() const;

 private:
  void Record(KvCacheEvent event);

  std::vector<BlockKey> key_of_;  // [num_pages]; 0: not cached
  std::unordered_map<BlockKey, int32_t> page_of_;
  // Idle cached pages as a doubly linked list over page ids, least recently used at lru_head_.
  std::vector<int32_t> prev_, next_;  // [num_pages]; -1: none
  std::vector<uint8_t> idle_;         // [num_pages]
  int32_t lru_head_ = -1, lru_tail_ = -1;
  int idle_count_ = 0;
  std::deque<KvCacheEvent> events_;
  uint64_t last_seq_ = 0;
};

}  // namespace pdserve::model
