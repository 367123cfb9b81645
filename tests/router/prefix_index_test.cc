// Routing asks both indexes at once: a worker that publishes events is found in the KvIndex,
// one that does not in RoutedPrefixes, and each gets its longer match.
#include "router/prefix_index.h"

#include <gtest/gtest.h>

#include "router/kv_index.h"
#include "router/routed_prefixes.h"

namespace pdserve::router {
namespace {

TEST(PrefixIndexTest, EachWorkerGetsTheLongestMatchOfAnyIndex) {
  KvIndex events;
  events.AddWorker(1, 100);
  proto::KvSnapshot snapshot;
  for (BlockKey key : {1, 2, 3}) snapshot.add_blocks(key);
  ASSERT_TRUE(events.ApplySnapshot(1, snapshot));
  RoutedPrefixes routed;
  routed.AddWorker(2, 100);
  routed.Routed(2, std::vector<BlockKey>{1, 2});
  const PrefixIndex* indexes[] = {&events, &routed};
  const std::vector<BlockKey> prompt = {1, 2, 3, 4};
  const std::vector<uint64_t> workers = {2, 1, 3};
  EXPECT_EQ(MatchedBlocks(indexes, prompt, workers), (std::vector<int>{2, 3, 0}));
}

}  // namespace
}  // namespace pdserve::router
