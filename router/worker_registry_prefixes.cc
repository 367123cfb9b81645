// WorkerRegistry's prefix-cache side: what it learns of the workers' cached KV blocks (their
// KvEvents and snapshots, or, for workers that publish nothing, where it routed which prompts)
// and the matches it hands the router. See worker_registry.h and prefix_index.h.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

#include "common/block_key.h"
#include "router/worker_registry.h"

namespace pdserve::router {

void WorkerRegistry::JoinPrefixIndexLocked(const Worker& w, Actions& actions) {
  const size_t max_blocks = static_cast<size_t>(std::max(0, w.info.kv_pages()));
  if (w.info.kv_events()) {
    kv_index_.AddWorker(w.id, max_blocks);
    proto::Envelope resync;
    resync.mutable_kv_resync();
    actions.sends.emplace_back(w.conn, std::move(resync));  // after its RegisterReply
  } else {
    routed_prefixes_.AddWorker(w.id, max_blocks);
  }
}

void WorkerRegistry::LeavePrefixIndexLocked(uint64_t worker) {
  kv_index_.RemoveWorker(worker);
  routed_prefixes_.RemoveWorker(worker);
}

void WorkerRegistry::HandleKvEventsLocked(Worker& w, const proto::KvEvents& events,
                                          Actions& actions) {
  if (kv_index_.Apply(w.id, events) != KvEventsOutcome::kGap) return;
  spdlog::warn("worker {} ({}) sent KV events out of order (seq {}); asking for its full list",
               w.id, w.info.name(), events.seq());
  proto::Envelope resync;
  resync.mutable_kv_resync();
  actions.sends.emplace_back(w.conn, std::move(resync));
}

void WorkerRegistry::HandleKvSnapshotLocked(Worker& w, const proto::KvSnapshot& snapshot) {
  if (!kv_index_.ApplySnapshot(w.id, snapshot)) {
    spdlog::warn("worker {} ({}) sent a KV snapshot nobody asked for; ignored", w.id,
                 w.info.name());
  }
}

WorkerRegistry::PromptKeys WorkerRegistry::PromptKeysLocked(const std::vector<int32_t>& prompt,
                                                            RouteRequest& request) const {
  // One chain per KV identity (layout hash and page size) among the workers: workers of another
  // layout hold other keys for the same tokens.
  std::map<std::pair<uint64_t, int>, std::vector<uint64_t>> by_layout;
  for (const auto& [id, w] : workers_) {
    if (w.registered && w.info.page_size() > 0) {
      by_layout[{w.info.layout_hash(), w.info.page_size()}].push_back(id);
    }
  }
  PromptKeys keys_of;
  const PrefixIndex* const indexes[] = {&kv_index_, &routed_prefixes_};
  for (const auto& [layout, ids] : by_layout) {
    std::vector<BlockKey> keys = PromptBlockKeys(layout.first, prompt, layout.second);
    if (keys.empty()) continue;
    const std::vector<int> matched = MatchedBlocks(indexes, keys, ids);
    for (size_t i = 0; i < ids.size(); ++i) {
      if (matched[i] > 0) request.matched_blocks[ids[i]] = matched[i];
    }
    keys_of.emplace(layout, std::move(keys));
  }
  return keys_of;
}

void WorkerRegistry::RecordRoutedLocked(const Route& route, const PromptKeys& keys_of) {
  for (uint64_t worker : {route.prefill_worker, route.decode_worker}) {
    auto w = workers_.find(worker);
    if (w == workers_.end() || w->second.info.kv_events()) continue;  // indexed by its events
    auto keys = keys_of.find({w->second.info.layout_hash(), w->second.info.page_size()});
    if (keys != keys_of.end()) routed_prefixes_.Routed(worker, keys->second);
  }
}

PrefixIndexStats WorkerRegistry::PrefixStats() const {
  std::lock_guard lock(mu_);
  const KvIndexStats kv = kv_index_.Stats();
  return {kv.blocks, routed_prefixes_.Size(), kv.resyncs, kv.gaps};
}

int64_t WorkerRegistry::CachedPromptTokens(const std::vector<int32_t>& prompt) const {
  std::lock_guard lock(mu_);
  RouteRequest request;
  PromptKeysLocked(prompt, request);
  int64_t longest = 0;
  for (const auto& [id, blocks] : request.matched_blocks) {
    auto w = workers_.find(id);
    if (w == workers_.end() || !w->second.registered || w->second.info.role() == "decode") {
      continue;
    }
    longest = std::max<int64_t>(longest, int64_t{blocks} * w->second.info.page_size());
  }
  return std::min<int64_t>(longest, static_cast<int64_t>(prompt.size()));
}

}  // namespace pdserve::router
