// The prefix cache's index: keys to pages, duplicates skipped, idle pages evicted least recently
// used first, and the events it records numbered in order, stored before removed.
#include "model/prefix_cache.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace pdserve::model {
namespace {

std::vector<BlockKey> Keys(const std::vector<KvCacheEvent>& events, bool stored) {
  std::vector<BlockKey> keys;
  for (const auto& e : events) {
    if (stored) {
      for (const auto& b : e.stored) keys.push_back(b.key);
    } else {
      keys.insert(keys.end(), e.removed.begin(), e.removed.end());
    }
  }
  return keys;
}

TEST(PrefixCacheTest, StoresChainsAndSkipsPagesOrKeysAlreadyCached) {
  PrefixCache cache(8);
  EXPECT_EQ(cache.Store(std::vector<int32_t>{2, 5}, std::vector<BlockKey>{11, 12}, 0), 2);
  EXPECT_EQ(cache.Find(11), 2);
  EXPECT_EQ(cache.Find(12), 5);
  EXPECT_EQ(cache.Find(13), -1);
  EXPECT_TRUE(cache.IsCached(5));
  EXPECT_FALSE(cache.IsCached(3));
  // Page 2 again under its key: nothing new. Key 12 on another page: the page stays uncached.
  EXPECT_EQ(cache.Store(std::vector<int32_t>{2, 3, 4}, std::vector<BlockKey>{11, 12, 13}, 0), 1);
  EXPECT_FALSE(cache.IsCached(3));
  EXPECT_EQ(cache.Find(12), 5);
  EXPECT_EQ(cache.Find(13), 4);
  EXPECT_EQ(cache.cached_pages(), 3);

  const auto events = cache.TakeEvents();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].seq, 1u);
  EXPECT_EQ(events[1].seq, 2u);
  ASSERT_EQ(events[0].stored.size(), 2u);
  EXPECT_EQ(events[0].stored[0].key, 11u);
  EXPECT_EQ(events[0].stored[0].parent, 0u);
  EXPECT_EQ(events[0].stored[1].parent, 11u);  // each block's parent is the one before it
  ASSERT_EQ(events[1].stored.size(), 1u);
  EXPECT_EQ(events[1].stored[0].key, 13u);
  EXPECT_EQ(events[1].stored[0].parent, 12u);
  EXPECT_TRUE(cache.TakeEvents().empty());
}

TEST(PrefixCacheTest, EvictsIdlePagesLeastRecentlyUsedFirstAndRecordsTheirRemoval) {
  PrefixCache cache(8);
  ASSERT_EQ(cache.Store(std::vector<int32_t>{0, 1, 2}, std::vector<BlockKey>{10, 20, 30}, 0), 3);
  for (int32_t p : {2, 1, 0}) cache.MakeIdle(p);
  EXPECT_EQ(cache.idle_pages(), 3);
  cache.MakeReferenced(2);  // in use again: not evictable
  cache.MakeIdle(2);        // released again: now the most recently used
  cache.MakeReferenced(0);  // in use: Evict passes it by
  EXPECT_EQ(cache.idle_pages(), 2);

  EXPECT_EQ(cache.Evict(1), std::vector<int32_t>{1});
  EXPECT_EQ(cache.Find(20), -1);
  EXPECT_FALSE(cache.IsCached(1));
  EXPECT_EQ(cache.Evict(5), std::vector<int32_t>{2});  // no more than are idle
  EXPECT_EQ(cache.idle_pages(), 0);
  EXPECT_TRUE(cache.Evict(1).empty());
  EXPECT_EQ(cache.Find(10), 0);  // the referenced page stays

  const auto events = cache.TakeEvents();
  ASSERT_EQ(events.size(), 3u);
  for (size_t i = 0; i < events.size(); ++i) EXPECT_EQ(events[i].seq, i + 1);
  EXPECT_EQ(Keys(events, true), (std::vector<BlockKey>{10, 20, 30}));
  EXPECT_EQ(Keys(events, false), (std::vector<BlockKey>{20, 30}));
  EXPECT_TRUE(events[1].stored.empty());
}

TEST(PrefixCacheTest, SnapshotHoldsEveryCachedBlockAsOfTheLastEvent) {
  PrefixCache cache(4);
  EXPECT_EQ(cache.Snapshot().seq, 0u);
  cache.Store(std::vector<int32_t>{0, 1}, std::vector<BlockKey>{7, 8}, 0);
  cache.MakeIdle(1);
  cache.Evict(1);
  cache.Store(std::vector<int32_t>{3}, std::vector<BlockKey>{9}, 8);
  KvCacheSnapshot s = cache.Snapshot();
  EXPECT_EQ(s.seq, 3u);
  std::sort(s.blocks.begin(), s.blocks.end());
  EXPECT_EQ(s.blocks, (std::vector<BlockKey>{7, 9}));
}

// An owner that never takes the events loses the oldest: the numbers then skip, which tells a
// consumer to resync from the snapshot.
TEST(PrefixCacheTest, EventLogIsBoundedAndDroppedEventsLeaveAGap) {
  PrefixCache cache(1);
  const size_t n = PrefixCache::kMaxEvents + 10;
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(cache.Store(std::vector<int32_t>{0}, std::vector<BlockKey>{1000 + i}, 0), 1);
    cache.MakeIdle(0);
    ASSERT_EQ(cache.Evict(1).size(), 1u);
  }
  const auto events = cache.TakeEvents();
  ASSERT_EQ(events.size(), PrefixCache::kMaxEvents);
  EXPECT_EQ(events.back().seq, 2 * n);
  EXPECT_EQ(events.front().seq, 2 * n - PrefixCache::kMaxEvents + 1);
  for (size_t i = 1; i < events.size(); ++i) EXPECT_EQ(events[i].seq, events[i - 1].seq + 1);
}

}  // namespace
}  // namespace pdserve::model
