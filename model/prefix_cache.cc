#include "model/prefix_cache.h"

#include <spdlog/spdlog.h>

namespace pdserve::model {

PrefixCache::PrefixCache(int num_pages)
    : key_of_(num_pages, 0), prev_(num_pages, -1), next_(num_pages, -1), idle_(num_pages, 0) {}

int32_t PrefixCache::Find(BlockKey key) const {
  auto it = page_of_.find(key);
  return it == page_of_.end() ? -1 : it->second;
}

int PrefixCache::Store(std::span<const int32_t> pages, std::span<const BlockKey> keys,
                       BlockKey parent) {
  KvCacheEvent event;
  for (size_t i = 0; i < pages.size() && i < keys.size(); ++i) {
    const int32_t page = pages[i];
    const BlockKey key = keys[i];
    const BlockKey key_parent = i == 0 ? parent : keys[i - 1];
    if (key_of_[page] == key) continue;
    if (key_of_[page] != 0) {
      spdlog::error("PrefixCache: page {} is cached as block {:x}, not {:x}", page, key_of_[page],
                    key);
      continue;
    }
    if (!page_of_.try_emplace(key, page).second) continue;
    key_of_[page] = key;
    event.stored.push_back({key, key_parent});
  }
  const int stored = static_cast<int>(event.stored.size());
  if (stored > 0) Record(std::move(event));
  return stored;
}

void PrefixCache::MakeIdle(int32_t page) {
  if (idle_[page]) return;
  idle_[page] = 1;
  ++idle_count_;
  prev_[page] = lru_tail_;
  next_[page] = -1;
  if (lru_tail_ >= 0) next_[lru_tail_] = page;
  lru_tail_ = page;
  if (lru_head_ < 0) lru_head_ = page;
}

void PrefixCache::MakeReferenced(int32_t page) {
  if (!idle_[page]) return;
  idle_[page] = 0;
  --idle_count_;
  if (prev_[page] >= 0) next_[prev_[page]] = next_[page];
  if (next_[page] >= 0) prev_[next_[page]] = prev_[page];
  if (lru_head_ == page) lru_head_ = next_[page];
  if (lru_tail_ == page) lru_tail_ = prev_[page];
  prev_[page] = next_[page] = -1;
}

std::vector<int32_t> PrefixCache::Evict(int n) {
  std::vector<int32_t> pages;
  KvCacheEvent event;
  while (static_cast<int>(pages.size()) < n && lru_head_ >= 0) {
    const int32_t page = lru_head_;
    MakeReferenced(page);
    event.removed.push_back(key_of_[page]);
    page_of_.erase(key_of_[page]);
    key_of_[page] = 0;
    pages.push_back(page);
  }
  if (!pages.empty()) Record(std::move(event));
  return pages;
}

void PrefixCache::Record(KvCacheEvent event) {
  event.seq = ++last_seq_;
  events_.push_back(std::move(event));
  if (events_.size() > kMaxEvents) events_.pop_front();
}

std::vector<KvCacheEvent> PrefixCache::TakeEvents() {
  std::vector<KvCacheEvent> out(std::make_move_iterator(events_.begin()),
                                std::make_move_iterator(events_.end()));
  events_.clear();
  return out;
}

KvCacheSnapshot PrefixCache::Snapshot() const {
  KvCacheSnapshot s;
  s.seq = last_seq_;
  s.blocks.reserve(page_of_.size());
  for (const auto& [key, page] : page_of_) s.blocks.push_back(key);
  return s;
}

}  // namespace pdserve::model
