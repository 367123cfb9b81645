#include "router/routed_prefixes.h"

#include <utility>

namespace pdserve::router {

RoutedPrefixes::RoutedPrefixes(RoutedPrefixOptions options, Clock clock)
    : options_(options), clock_(std::move(clock)) {}

void RoutedPrefixes::AddWorker(uint64_t worker, size_t max_blocks) {
  RemoveWorker(worker);
  workers_[worker].max_blocks = max_blocks;
}

void RoutedPrefixes::RemoveWorker(uint64_t worker) {
  auto it = workers_.find(worker);
  if (it == workers_.end()) return;
  records_ -= it->second.records.size();
  workers_.erase(it);
}

void RoutedPrefixes::Routed(uint64_t worker, std::span<const BlockKey> prompt) {
  auto it = workers_.find(worker);
  if (it == workers_.end()) return;
  Worker& w = it->second;
  const Time now = clock_();
  PruneExpired(w, now);
  // Last key first, so that the prompt's first block is the most recent and the last to go.
  for (auto key = prompt.rbegin(); key != prompt.rend(); ++key) {
    auto found = w.records.find(*key);
    if (found != w.records.end()) {
      found->second->routed = now;
      w.by_recency.splice(w.by_recency.begin(), w.by_recency, found->second);
      continue;
    }
    w.by_recency.push_front({*key, now});
    w.records.emplace(*key, w.by_recency.begin());
    ++records_;
  }
  while (w.records.size() > w.max_blocks) DropOldest(w);
}

void RoutedPrefixes::Prune() {
  const Time now = clock_();
  for (auto& [id, w] : workers_) PruneExpired(w, now);
}

std::vector<int> RoutedPrefixes::MatchedBlocks(std::span<const BlockKey> prompt,
                                               std::span<const uint64_t> workers) const {
  const Time now = clock_();
  std::vector<int> matched(workers.size(), 0);
  for (size_t j = 0; j < workers.size(); ++j) {
    auto it = workers_.find(workers[j]);
    if (it == workers_.end()) continue;
    const Worker& w = it->second;
    int n = 0;
    for (BlockKey key : prompt) {
      auto found = w.records.find(key);
      if (found == w.records.end() || now - found->second->routed >= options_.ttl) break;
      ++n;
    }
    matched[j] = n;
  }
  return matched;
}

void RoutedPrefixes::PruneExpired(Worker& w, Time now) {
  while (!w.by_recency.empty() && now - w.by_recency.back().routed >= options_.ttl) {
    DropOldest(w);
  }
}

void RoutedPrefixes::DropOldest(Worker& w) {
  w.records.erase(w.by_recency.back().key);
  w.by_recency.pop_back();
  --records_;
}

}  // namespace pdserve::router
