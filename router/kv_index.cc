#include "router/kv_index.h"

#include <algorithm>
#include <bit>

namespace pdserve::router {

void KvIndex::Holders::Set(int slot) {
  const size_t word = slot / 64;
  const uint64_t bit = uint64_t{1} << (slot % 64);
  if (word == 0) {
    low |= bit;
    return;
  }
  if (high.size() < word) high.resize(word, 0);
  high[word - 1] |= bit;
}

void KvIndex::Holders::Clear(int slot) {
  const size_t word = slot / 64;
  const uint64_t bit = uint64_t{1} << (slot % 64);
  if (word == 0) {
    low &= ~bit;
  } else if (word - 1 < high.size()) {
    high[word - 1] &= ~bit;
  }
}

bool KvIndex::Holders::Empty() const {
  return low == 0 && std::all_of(high.begin(), high.end(), [](uint64_t w) { return w == 0; });
}

void KvIndex::AddWorker(uint64_t worker, size_t max_blocks) {
  RemoveWorker(worker);
  Worker w;
  if (!free_slots_.empty()) {
    w.slot = *free_slots_.begin();
    free_slots_.erase(free_slots_.begin());
  } else {
    w.slot = slot_count_++;
  }
  w.max_blocks = max_blocks;
  workers_.emplace(worker, w);
  ++resyncs_;
}

void KvIndex::RemoveWorker(uint64_t worker) {
  auto it = workers_.find(worker);
  if (it == workers_.end()) return;
  Forget(it->second);
  free_slots_.insert(it->second.slot);
  workers_.erase(it);
}

KvEventsOutcome KvIndex::Apply(uint64_t worker, const proto::KvEvents& events) {
  auto it = workers_.find(worker);
  if (it == workers_.end()) return KvEventsOutcome::kUnknownWorker;
  Worker& w = it->second;
  if (w.awaiting_resync) return KvEventsOutcome::kAwaitingResync;
  if (events.seq() != w.next_seq) {
    Forget(w);
    w.awaiting_resync = true;
    ++gaps_;
    ++resyncs_;
    return KvEventsOutcome::kGap;
  }
  ++w.next_seq;
  for (BlockKey key : events.removed()) Remove(w, key);
  for (const proto::StoredBlock& block : events.stored()) Store(w, block.key());
  return KvEventsOutcome::kApplied;
}

bool KvIndex::ApplySnapshot(uint64_t worker, const proto::KvSnapshot& snapshot) {
  auto it = workers_.find(worker);
  if (it == workers_.end()) return false;
  Worker& w = it->second;
  Forget(w);
  for (BlockKey key : snapshot.blocks()) Store(w, key);
  w.next_seq = snapshot.seq() + 1;
  w.awaiting_resync = false;
  return true;
}

std::vector<int> KvIndex::MatchedBlocks(std::span<const BlockKey> prompt,
                                        std::span<const uint64_t> workers) const {
  std::vector<int> matched(workers.size(), 0);
  const size_t words = (slot_count_ + 63) / 64;
  // The candidates still matching, as a bitset over slots; a slot leaves at the first key it
  // lacks, which is its match.
  std::vector<uint64_t> active(words, 0);
  std::vector<int> slot_of(workers.size(), -1);
  for (size_t j = 0; j < workers.size(); ++j) {
    auto it = workers_.find(workers[j]);
    if (it == workers_.end() || it->second.blocks == 0) continue;
    slot_of[j] = it->second.slot;
    active[slot_of[j] / 64] |= uint64_t{1} << (slot_of[j] % 64);
  }
  std::vector<int> matched_by_slot(slot_count_, 0);
  size_t depth = 0;
  bool any = std::any_of(active.begin(), active.end(), [](uint64_t a) { return a != 0; });
  for (; any && depth < prompt.size(); ++depth) {
    auto h = holders_.find(prompt[depth]);
    any = false;
    for (size_t i = 0; i < words; ++i) {
      const uint64_t kept = h == holders_.end() ? 0 : active[i] & h->second.Word(i);
      for (uint64_t left = active[i] & ~kept; left != 0; left &= left - 1) {
        matched_by_slot[i * 64 + std::countr_zero(left)] = static_cast<int>(depth);
      }
      active[i] = kept;
      any = any || kept != 0;
    }
  }
  for (size_t i = 0; i < words; ++i) {
    for (uint64_t left = active[i]; left != 0; left &= left - 1) {
      matched_by_slot[i * 64 + std::countr_zero(left)] = static_cast<int>(depth);
    }
  }
  for (size_t j = 0; j < workers.size(); ++j) {
    if (slot_of[j] >= 0) matched[j] = matched_by_slot[slot_of[j]];
  }
  return matched;
}

size_t KvIndex::BlocksOf(uint64_t worker) const {
  auto it = workers_.find(worker);
  return it == workers_.end() ? 0 : it->second.blocks;
}

bool KvIndex::AwaitingResync(uint64_t worker) const {
  auto it = workers_.find(worker);
  return it != workers_.end() && it->second.awaiting_resync;
}

KvIndexStats KvIndex::Stats() const {
  return {blocks_, holders_.size(), resyncs_, gaps_, over_capacity_};
}

void KvIndex::Forget(Worker& w) {
  if (w.blocks == 0) return;
  for (auto it = holders_.begin(); it != holders_.end();) {
    it->second.Clear(w.slot);
    it = it->second.Empty() ? holders_.erase(it) : std::next(it);
  }
  blocks_ -= w.blocks;
  w.blocks = 0;
}

void KvIndex::Store(Worker& w, BlockKey key) {
  auto it = holders_.find(key);
  if (it != holders_.end() && it->second.Has(w.slot)) return;
  if (w.blocks >= w.max_blocks) {
    ++over_capacity_;
    return;
  }
  if (it == holders_.end()) it = holders_.emplace(key, Holders{}).first;
  it->second.Set(w.slot);
  ++w.blocks;
  ++blocks_;
}

void KvIndex::Remove(Worker& w, BlockKey key) {
  auto it = holders_.find(key);
  if (it == holders_.end() || !it->second.Has(w.slot)) return;
  it->second.Clear(w.slot);
  if (it->second.Empty()) holders_.erase(it);
  --w.blocks;
  --blocks_;
}

}  // namespace pdserve::router
