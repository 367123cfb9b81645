#include "model/kv_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <thread>

namespace pdserve::model {
namespace {

TEST(KvPagePoolTest, AllocatesAllOrNothingAndCountsUsedPages) {
  KvPagePool pool(10);
  auto a = pool.Allocate(4);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(*a, (std::vector<int32_t>{0, 1, 2, 3}));  // ascending: contiguous runs
  EXPECT_EQ(pool.used_pages(), 4);
  auto b = pool.Allocate(7);
  EXPECT_EQ(b.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(pool.used_pages(), 4);
  auto c = pool.Allocate(6);
  ASSERT_TRUE(c.ok());
  std::set<int32_t> all(a->begin(), a->end());
  all.insert(c->begin(), c->end());
  EXPECT_EQ(all.size(), 10u);
  pool.Free(*a);
  pool.Free(*c);
  EXPECT_EQ(pool.used_pages(), 0);
  EXPECT_EQ(pool.free_pages(), 10);
}

// A request's pages are handed out ascending even after churn, so KV transfer can move them as
// one run: freed pages come back in their order, and a mix of freed requests comes back sorted.
TEST(KvPagePoolTest, ReusedPagesStayAscending) {
  KvPagePool pool(64);
  auto a = pool.Allocate(16);
  ASSERT_TRUE(a.ok());
  pool.Free(*a);
  auto again = pool.Allocate(16);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *a);
  auto b = pool.Allocate(8);  // 16..23
  ASSERT_TRUE(b.ok());
  pool.Free(*again);
  pool.Free(*b);
  auto mixed = pool.Allocate(20);  // 16..23 from the top, then 0..11
  ASSERT_TRUE(mixed.ok());
  EXPECT_TRUE(std::is_sorted(mixed->begin(), mixed->end()));
  EXPECT_EQ(std::set<int32_t>(mixed->begin(), mixed->end()).size(), 20u);
  EXPECT_EQ(mixed->front(), 0);
  EXPECT_EQ(mixed->back(), 23);
}

TEST(KvPagePoolTest, DoubleFreeAndUnknownPagesAreRefused) {
  KvPagePool pool(4);
  auto a = pool.Allocate(2);
  ASSERT_TRUE(a.ok());
  pool.Free(*a);
  pool.Free(*a);
  const std::vector<int32_t> bogus = {-1, 4, 100};
  pool.Free(bogus);
  EXPECT_EQ(pool.used_pages(), 0);
  EXPECT_TRUE(pool.Allocate(4).ok());
  EXPECT_EQ(pool.free_pages(), 0);
}

TEST(KvPagePoolTest, EnsureCapacityGrowsATable) {
  KvPagePool pool(8);
  std::vector<int32_t> table;
  ASSERT_TRUE(pool.EnsureCapacity(table, 17, 16).ok());
  EXPECT_EQ(table.size(), 2u);
  ASSERT_TRUE(pool.EnsureCapacity(table, 32, 16).ok());
  EXPECT_EQ(table.size(), 2u);
  EXPECT_FALSE(pool.EnsureCapacity(table, 16 * 9, 16).ok());
  EXPECT_EQ(table.size(), 2u);
  EXPECT_EQ(pool.used_pages(), 2);
}

TEST(KvPagePoolTest, ConcurrentAllocateAndFreeKeepTheCount) {
  KvPagePool pool(64);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 2000; ++i) {
        auto p = pool.Allocate(1 + i % 5);
        if (p.ok()) pool.Free(*p);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(pool.used_pages(), 0);
}

// A cached page is shared by reference: each holder's Free drops one, and the page is neither
// handed out again nor evicted while anyone holds it.
TEST(KvPagePoolTest, ACachedPageSharedByReferenceIsNeverFreedWhileReferenced) {
  KvPagePool pool(4);
  auto a = pool.Allocate(2);
  ASSERT_TRUE(a.ok());
  pool.CacheBlocks(*a, std::vector<BlockKey>{101, 102}, 0);
  EXPECT_EQ(pool.cached_pages(), 2);
  const std::vector<BlockKey> keys = {101, 102, 103};
  EXPECT_EQ(pool.MatchPrefix(keys), 2);
  const auto shared = pool.AcquirePrefix(keys);  // a second holder
  EXPECT_EQ(shared, *a);
  pool.Free(*a);  // the first holder ends: the second still reads them
  EXPECT_EQ(pool.used_pages(), 2);
  EXPECT_EQ(pool.free_pages(), 2);
  EXPECT_EQ(pool.idle_cached_pages(), 0);
  EXPECT_FALSE(pool.Allocate(3).ok());
  auto rest = pool.Allocate(2);
  ASSERT_TRUE(rest.ok());
  for (int32_t p : *rest) EXPECT_EQ(std::count(shared.begin(), shared.end(), p), 0) << p;
  pool.Free(*rest);
  pool.Free(shared);  // the last holder: the pages stay cached, idle, and count as free
  EXPECT_EQ(pool.used_pages(), 0);
  EXPECT_EQ(pool.free_pages(), 4);
  EXPECT_EQ(pool.idle_cached_pages(), 2);
  EXPECT_EQ(pool.MatchPrefix(keys), 2);
  pool.Free(shared);  // a third Free is a double free: refused
  EXPECT_EQ(pool.used_pages(), 0);
  EXPECT_EQ(pool.idle_cached_pages(), 2);
}

// Allocate takes empty pages first, then evicts idle cached pages least recently released
// first, a sequence's last block before its first; it refuses only when neither suffice.
TEST(KvPagePoolTest, AllocateEvictsIdleCachedPagesLeastRecentlyUsedFirst) {
  KvPagePool pool(6);
  const std::vector<BlockKey> older = {11, 12}, newer = {21, 22};
  auto a = pool.Allocate(2);
  ASSERT_TRUE(a.ok());
  pool.CacheBlocks(*a, older, 0);
  pool.Free(*a);
  auto b = pool.Allocate(2);
  ASSERT_TRUE(b.ok());
  pool.CacheBlocks(*b, newer, 0);
  pool.Free(*b);
  EXPECT_EQ(pool.free_pages(), 6);
  EXPECT_EQ(pool.idle_cached_pages(), 4);
  pool.TakeKvEvents();

  auto c = pool.Allocate(3);  // the two empty pages, then the older sequence's last block
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(pool.MatchPrefix(older), 1);
  EXPECT_EQ(pool.MatchPrefix(newer), 2);
  auto d = pool.Allocate(1);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(pool.MatchPrefix(older), 0);  // evicted: a query misses
  EXPECT_TRUE(pool.AcquirePrefix(older).empty());
  EXPECT_EQ(pool.Allocate(3).status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(pool.MatchPrefix(newer), 2);  // a refused Allocate evicts nothing
  const auto events = pool.TakeKvEvents();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].removed, std::vector<BlockKey>{12});
  EXPECT_EQ(events[1].removed, std::vector<BlockKey>{11});
  EXPECT_EQ(events[1].seq, events[0].seq + 1);
}

// The decode worker's network thread allocates (and evicts) while the engine thread caches,
// acquires and frees: the counts and the index stay consistent (run under TSan and ASan).
TEST(KvPagePoolTest, ConcurrentCachingAcquiringAndEvictingKeepTheCounts) {
  KvPagePool pool(32);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 2000; ++i) {
        const BlockKey k = 1 + (t * 7 + i) % 24;
        const std::vector<BlockKey> keys = {k, k + 100};
        auto held = pool.AcquirePrefix(keys);
        auto p = pool.Allocate(2 - static_cast<int>(held.size()));
        if (!p.ok()) {
          pool.Free(held);
          continue;
        }
        held.insert(held.end(), p->begin(), p->end());
        if (i % 3 != 0) pool.CacheBlocks(held, keys, 0);
        pool.MatchPrefix(keys);
        pool.Free(held);
        if (i % 50 == 0) pool.TakeKvEvents();
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(pool.used_pages(), 0);
  EXPECT_EQ(pool.free_pages(), 32);
  EXPECT_EQ(pool.idle_cached_pages(), pool.cached_pages());
  EXPECT_EQ(static_cast<int>(pool.CachedBlocks().blocks.size()), pool.cached_pages());
  EXPECT_TRUE(pool.Allocate(32).ok());
  EXPECT_EQ(pool.cached_pages(), 0);
}

TEST(KvCacheShapeTest, OffsetsFollowTheArchitectureLayout) {
  KvCacheShape s{2, 10, 16, 4, 8, DType::kF32};
  EXPECT_EQ(s.kv_dim(), 32);
  EXPECT_EQ(s.page_elems(), 2u * 16 * 32);
  EXPECT_EQ(s.Offset(0, 0, 0), 0u);
  EXPECT_EQ(s.Offset(0, 1, 0), 16u * 32);      // V follows K within the page
  EXPECT_EQ(s.Offset(1, 0, 0), 2u * 16 * 32);  // pages are contiguous K+V blocks
  EXPECT_EQ(s.Offset(3, 1, 5), (3u * 2 + 1) * 16 * 32 + 5 * 32);
  EXPECT_EQ(PagesForTokens(0, 16), 0);
  EXPECT_EQ(PagesForTokens(16, 16), 1);
  EXPECT_EQ(PagesForTokens(17, 16), 2);
}

}  // namespace
}  // namespace pdserve::model
