// The paged KV cache's bookkeeping. KvCacheShape says how the pool's memory is laid out (see
// docs/architecture.md, "KV layout"): per layer [num_pages][2][page_size][n_kv_heads][head_dim], so
// one layer's K and V for one page are contiguous. KvPagePool hands out and takes back page ids;
// the memory itself belongs to the Backend (host memory on CPU, device memory on a GPU).
// Pages are counted by reference, and the pool holds the prefix cache's index
// (model/prefix_cache.h): a page named by a block key stays cached when its last reference is
// dropped, shared read-only by the sequences that acquire it, until Allocate evicts it (least
// recently used first) for want of an empty page. A page that no one references, cached or not,
// counts as free.
// Thread contract: KvPagePool is thread-safe; every method takes one mutex, which also guards the
// cache index, its eviction order and its event log. A decode worker reserves pages (Allocate,
// which may evict) from its network thread and a transport frees them from its own, while the
// engine thread caches, acquires and frees pages. A page's KV is written only by the one holder
// of a page that is not cached yet; a cached page is read-only.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <span>
#include <vector>

#include "common/status.h"
#include "model/dtype.h"
#include "model/prefix_cache.h"

namespace pdserve::model {

struct KvCacheShape {
  int n_layers = 0;
  int num_pages = 0;
  int page_size = 16;  // tokens per page
  int n_kv_heads = 0;
  int head_dim = 0;
  DType dtype = DType::kF32;

  int kv_dim() const { return n_kv_heads * head_dim; }
  // Elements of one page of one layer: K and V, page_size tokens each.
  size_t page_elems() const { return 2ull * page_size * kv_dim(); }
  size_t page_bytes() const { return page_elems() * DTypeSize(dtype); }
  size_t layer_elems() const { return page_elems() * num_pages; }
  size_t layer_bytes() const { return layer_elems() * DTypeSize(dtype); }
  // Offset, in elements within a layer, of the K (kv=0) or V (kv=1) row of token `slot` of `page`.
  size_t Offset(int page, int kv, int slot) const {
    return (static_cast<size_t>(page) * 2 + kv) * page_size * kv_dim() +
           static_cast<size_t>(slot) * kv_dim();
  }
};

inline int PagesForTokens(int tokens, int page_size) {
  return (tokens + page_size - 1) / page_size;
}

class KvPagePool {
 public:
  explicit KvPagePool(int num_pages);

  // All n pages or none, each with one reference: empty pages first, then idle cached pages
  // evicted least recently used first. ResourceExhausted when fewer than n are free.
  Result<std::vector<int32_t>> Allocate(int n);
  // Appends pages to `table` until it covers `tokens` tokens; all or none.
  Status EnsureCapacity(std::vector<int32_t>& table, int tokens, int page_size);
  // Drops one reference from each page; a page left with none becomes free (idle, if cached).
  // Freeing a page that has no reference, or an unknown id, is a broken invariant and is refused
  // (logged), never corrupts the free list.
  void Free(std::span<const int32_t> pages);

  // Prefix cache. How many of `keys`' leading blocks are cached; changes nothing.
  int MatchPrefix(std::span<const BlockKey> keys) const;
  // Takes a reference on the pages of `keys`' leading cached blocks and returns them, in order
  // (the holder reads them, never writes them, and Frees them like any page). May return fewer
  // than MatchPrefix said a moment before: another thread's Allocate may have evicted some.
  std::vector<int32_t> AcquirePrefix(std::span<const BlockKey> keys);
  // Names pages whose KV is complete for their whole block: pages[i] holds keys[i], parent of
  // keys[i + 1] (`parent`: the key before keys[0], 0 for a prompt's first). The caller holds a
  // reference on each. A page already cached, or a key held by another page, is skipped.
  void CacheBlocks(std::span<const int32_t> pages, std::span<const BlockKey> keys, BlockKey parent);
  // The stored and evicted blocks since the last call, in order (model/prefix_cache.h).
  std::vector<KvCacheEvent> TakeKvEvents();
  KvCacheSnapshot CachedBlocks() const;

  int num_pages() const { return num_pages_; }
  // Pages with a reference (held by a sequence, a reservation or a kept prefill).
  int used_pages() const { return used_.load(std::memory_order_relaxed); }
  // Pages Allocate may hand out: empty ones and idle cached ones (which it evicts).
  int free_pages() const { return num_pages_ - used_pages(); }
  // Pages named by a block key, referenced or idle.
  int cached_pages() const;
  // Cached pages that no one references (counted in free_pages()).
  int idle_cached_pages() const;

 private:
  const int num_pages_;
  mutable std::mutex mu_;
  std::vector<int32_t> free_list_;  // guarded by mu_; a stack, so recently freed pages are reused
  std::vector<int32_t> refs_;       // guarded by mu_; references per page
  PrefixCache cache_;               // guarded by mu_
  std::atomic<int> used_{0};
};

}  // namespace pdserve::model
