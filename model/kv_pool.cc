#include "model/kv_pool.h"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace pdserve::model {

KvPagePool::KvPagePool(int num_pages)
    : num_pages_(num_pages), refs_(num_pages, 0), cache_(num_pages) {
  free_list_.reserve(num_pages);
  for (int i = num_pages - 1; i >= 0; --i) free_list_.push_back(i);
}

Result<std::vector<int32_t>> KvPagePool::Allocate(int n) {
  if (n < 0) return InvalidArgument("cannot allocate a negative number of pages");
  std::lock_guard lock(mu_);
  const size_t empty = free_list_.size();
  if (static_cast<size_t>(n) > empty + cache_.idle_pages()) {
    return ResourceExhausted("need " + std::to_string(n) + " KV pages, " +
                             std::to_string(empty + cache_.idle_pages()) + " of " +
                             std::to_string(num_pages_) + " free");
  }
  // Taken from the top of the stack (recently freed, likely still in cache), in ascending order:
  // a fresh pool hands out 0, 1, 2, ... and a freed request's pages come back as they went, so a
  // request's pages form runs that KV transfer moves as one chunk instead of page by page.
  const size_t from_empty = std::min(empty, static_cast<size_t>(n));
  std::vector<int32_t> pages(free_list_.rbegin(), free_list_.rbegin() + from_empty);
  free_list_.resize(empty - from_empty);
  if (from_empty < static_cast<size_t>(n)) {
    std::vector<int32_t> evicted = cache_.Evict(n - static_cast<int>(from_empty));
    pages.insert(pages.end(), evicted.begin(), evicted.end());
  }
  if (!std::is_sorted(pages.begin(), pages.end())) std::sort(pages.begin(), pages.end());
  for (int32_t p : pages) refs_[p] = 1;
  used_.fetch_add(n, std::memory_order_relaxed);
  return pages;
}

Status KvPagePool::EnsureCapacity(std::vector<int32_t>& table, int tokens, int page_size) {
  const int need = PagesForTokens(tokens, page_size) - static_cast<int>(table.size());
  if (need <= 0) return Status::Ok();
  PDSERVE_ASSIGN_OR_RETURN(auto pages, Allocate(need));
  table.insert(table.end(), pages.begin(), pages.end());
  return Status::Ok();
}

void KvPagePool::Free(std::span<const int32_t> pages) {
  std::lock_guard lock(mu_);
  // Last page first: the stack's top then reads uncached pages in their original order, and a
  // sequence's first cached block becomes the most recently used, so its tail is evicted before
  // its head (a block is found only after every block before it).
  for (auto it = pages.rbegin(); it != pages.rend(); ++it) {
    const int32_t p = *it;
    if (p < 0 || p >= num_pages_ || refs_[p] == 0) {
      spdlog::error("KvPagePool: refusing to free page {} (not allocated)", p);
      continue;
    }
    if (--refs_[p] > 0) continue;
    used_.fetch_sub(1, std::memory_order_relaxed);
    if (cache_.IsCached(p)) {
      cache_.MakeIdle(p);
    } else {
      free_list_.push_back(p);
    }
  }
}

int KvPagePool::MatchPrefix(std::span<const BlockKey> keys) const {
  std::lock_guard lock(mu_);
  int n = 0;
  while (n < static_cast<int>(keys.size()) && cache_.Find(keys[n]) >= 0) ++n;
  return n;
}

std::vector<int32_t> KvPagePool::AcquirePrefix(std::span<const BlockKey> keys) {
  std::lock_guard lock(mu_);
  std::vector<int32_t> pages;
  for (BlockKey key : keys) {
    const int32_t p = cache_.Find(key);
    if (p < 0) break;
    if (refs_[p]++ == 0) {
      cache_.MakeReferenced(p);
      used_.fetch_add(1, std::memory_order_relaxed);
    }
    pages.push_back(p);
  }
  return pages;
}

void KvPagePool::CacheBlocks(std::span<const int32_t> pages, std::span<const BlockKey> keys,
                             BlockKey parent) {
  std::lock_guard lock(mu_);
  for (int32_t p : pages) {
    if (p < 0 || p >= num_pages_ || refs_[p] == 0) {
      spdlog::error("KvPagePool: refusing to cache page {} (not allocated)", p);
      return;
    }
  }
  cache_.Store(pages, keys, parent);
}

std::vector<KvCacheEvent> KvPagePool::TakeKvEvents() {
  std::lock_guard lock(mu_);
  return cache_.TakeEvents();
}

KvCacheSnapshot KvPagePool::CachedBlocks() const {
  std::lock_guard lock(mu_);
  return cache_.Snapshot();
}

int KvPagePool::cached_pages() const {
  std::lock_guard lock(mu_);
  return cache_.cached_pages();
}

int KvPagePool::idle_cached_pages() const {
  std::lock_guard lock(mu_);
  return cache_.idle_pages();
}

}  // namespace pdserve::model
