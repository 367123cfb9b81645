// The approximate prefix index with a fake clock: a routed prompt's blocks count on its worker
// until the ttl passes since it was last routed there, a refresh moves only the blocks routed
// again, and the bound per worker forgets the least recently routed blocks first, a prompt's
// later blocks before its earlier ones.
#include "router/routed_prefixes.h"

#include <gtest/gtest.h>

#include <vector>

namespace pdserve::router {
namespace {

using namespace std::chrono_literals;
using Time = std::chrono::steady_clock::time_point;

class RoutedPrefixesTest : public ::testing::Test {
 protected:
  int Match(uint64_t worker, std::vector<BlockKey> prompt) const {
    const uint64_t workers[] = {worker};
    return index_.MatchedBlocks(prompt, workers)[0];
  }
  Time now_ = Time(1000s);
  RoutedPrefixes index_{RoutedPrefixOptions{120s}, [this] { return now_; }};
};

TEST_F(RoutedPrefixesTest, BlocksCountUntilTheTtlPasses) {
  index_.AddWorker(1, 100);
  index_.AddWorker(2, 100);
  const std::vector<BlockKey> prompt = {1, 2, 3, 4};
  index_.Routed(1, prompt);
  EXPECT_EQ(Match(1, prompt), 4);
  EXPECT_EQ(Match(2, prompt), 0);
  EXPECT_EQ(Match(1, {1, 2, 9, 4}), 2);
  now_ += 119s;
  EXPECT_EQ(Match(1, prompt), 4);
  now_ += 1s;
  EXPECT_EQ(Match(1, prompt), 0);
  EXPECT_EQ(index_.Size(), 4u);  // not pruned yet
  index_.Prune();
  EXPECT_EQ(index_.Size(), 0u);
}

TEST_F(RoutedPrefixesTest, RoutingAgainRefreshesOnlyTheBlocksRoutedAgain) {
  index_.AddWorker(1, 100);
  index_.Routed(1, std::vector<BlockKey>{1, 2, 3, 4});
  now_ += 100s;
  // A later turn shares the first two blocks only.
  index_.Routed(1, std::vector<BlockKey>{1, 2, 7});
  now_ += 50s;
  EXPECT_EQ(Match(1, {1, 2, 3, 4}), 2);
  EXPECT_EQ(Match(1, {1, 2, 7}), 3);
  // Routed prunes the expired 3 and 4.
  index_.Routed(1, std::vector<BlockKey>{8});
  EXPECT_EQ(index_.Size(), 4u);
}

TEST_F(RoutedPrefixesTest, TheBoundForgetsTheLeastRecentlyRoutedFirst) {
  index_.AddWorker(1, 4);
  index_.Routed(1, std::vector<BlockKey>{1, 2, 3});
  now_ += 1s;
  index_.Routed(1, std::vector<BlockKey>{11, 12, 13});
  // Six records over a bound of four: the older prompt keeps its first block.
  EXPECT_EQ(index_.Size(), 4u);
  EXPECT_EQ(Match(1, {11, 12, 13}), 3);
  EXPECT_EQ(Match(1, {1, 2, 3}), 1);
  // A prompt longer than the bound keeps its leading blocks.
  index_.Routed(1, std::vector<BlockKey>{21, 22, 23, 24, 25, 26});
  EXPECT_EQ(Match(1, {21, 22, 23, 24, 25, 26}), 4);
  EXPECT_EQ(Match(1, {11}), 0);
  EXPECT_EQ(index_.Size(), 4u);
}

TEST_F(RoutedPrefixesTest, WorkersNotAddedRecordNothing) {
  index_.Routed(5, std::vector<BlockKey>{1, 2});
  EXPECT_EQ(Match(5, {1, 2}), 0);
  EXPECT_EQ(index_.Size(), 0u);
  index_.AddWorker(5, 10);
  index_.Routed(5, std::vector<BlockKey>{1, 2});
  index_.RemoveWorker(5);
  EXPECT_EQ(Match(5, {1, 2}), 0);
  EXPECT_EQ(index_.Size(), 0u);
  // Added again, it starts with nothing.
  index_.AddWorker(5, 10);
  index_.Routed(5, std::vector<BlockKey>{1});
  index_.AddWorker(5, 10);
  EXPECT_EQ(Match(5, {1}), 0);
}

}  // namespace
}  // namespace pdserve::router
