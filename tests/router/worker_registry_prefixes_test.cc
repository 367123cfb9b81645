// The registry's prefix-cache side (router/worker_registry_prefixes.cc), against workers stood in
// for on loopback: a worker that publishes KV events is asked for its full list when it joins,
// again after a gap in its events and again when it comes back; its blocks reach the router as
// matches; a worker that publishes nothing is matched by where its prompts were routed.
#include <gtest/gtest.h>

#include <vector>

#include "common/block_key.h"
#include "router/worker_registry.h"
#include "tests/router/registry_test_support.h"

namespace pdserve::router {
namespace {

using namespace pdserve::router::test_support;

constexpr uint64_t kLayout = 42;  // Decode()'s layout hash
constexpr int kPageSize = 16;     // and page size

std::vector<int32_t> Prompt(int tokens, int first = 1000) {
  std::vector<int32_t> p(tokens);
  for (int i = 0; i < tokens; ++i) p[i] = first + i;
  return p;
}

proto::Register Publishing(proto::Register r) {
  r.set_kv_events(true);
  return r;
}

proto::Envelope Snapshot(uint64_t seq, const std::vector<BlockKey>& blocks) {
  proto::Envelope m;
  m.mutable_kv_snapshot()->set_seq(seq);
  for (BlockKey b : blocks) m.mutable_kv_snapshot()->add_blocks(b);
  return m;
}

proto::Envelope Events(uint64_t seq, const std::vector<BlockKey>& stored) {
  proto::Envelope m;
  m.mutable_kv_events()->set_seq(seq);
  BlockKey parent = 0;
  for (BlockKey b : stored) {
    auto* s = m.mutable_kv_events()->add_stored();
    s->set_key(b);
    s->set_parent(parent);
    parent = b;
  }
  return m;
}

class PrefixRoutingTest : public RoutingTest {
 protected:
  // What the router is told the worker holds of `prompt` when it is dispatched now.
  int MatchedNow(uint64_t worker, const std::vector<int32_t>& prompt) {
    router_->Answer(std::nullopt);  // nothing is sent: only the router's view is wanted
    (void)registry_->Dispatch(next_attempt_++, prompt, proto::Sampling(),
                              std::make_shared<NullSink>());
    const auto requests = router_->requests();
    return requests.empty() ? -1 : requests.back().Matched(worker);
  }
  size_t Resyncs(WorkerStandIn& w) { return w.Received(proto::Envelope::kKvResync).size(); }
  uint64_t next_attempt_ = 1;
};

TEST_F(PrefixRoutingTest, APublishingWorkerIsAskedForItsListAndItsBlocksAreMatched) {
  WorkerStandIn& w = Join(Publishing(Colocated()), 100);
  ASSERT_TRUE(Eventually([&] { return Resyncs(w) == 1; }));
  const auto prompt = Prompt(5 * kPageSize + 3);
  const auto keys = PromptBlockKeys(kLayout, prompt, kPageSize);
  ASSERT_EQ(keys.size(), 5u);
  EXPECT_EQ(MatchedNow(1, prompt), 0);
  w.Send(Snapshot(0, {keys[0], keys[1]}));
  ASSERT_TRUE(Eventually([&] { return MatchedNow(1, prompt) == 2; }));
  w.Send(Events(1, {keys[2], keys[3]}));
  ASSERT_TRUE(Eventually([&] { return MatchedNow(1, prompt) == 4; }));
  // Another prompt with the same first block shares only that one.
  auto other = prompt;
  other[kPageSize + 1] = 7;
  EXPECT_EQ(MatchedNow(1, other), 1);
  EXPECT_EQ(registry_->PrefixStats().published_blocks, 4u);
}

TEST_F(PrefixRoutingTest, AGapInTheEventsForgetsTheBlocksAndAsksAgain) {
  WorkerStandIn& w = Join(Publishing(Colocated()), 100);
  ASSERT_TRUE(Eventually([&] { return Resyncs(w) == 1; }));
  const auto prompt = Prompt(4 * kPageSize);
  const auto keys = PromptBlockKeys(kLayout, prompt, kPageSize);
  w.Send(Snapshot(0, {}));
  w.Send(Events(1, {keys[0], keys[1]}));
  ASSERT_TRUE(Eventually([&] { return MatchedNow(1, prompt) == 2; }));
  w.Send(Events(3, {keys[2]}));  // seq 2 never came
  ASSERT_TRUE(Eventually([&] { return Resyncs(w) == 2; }));
  EXPECT_EQ(MatchedNow(1, prompt), 0) << "what it held before the gap is not trusted";
  EXPECT_EQ(registry_->PrefixStats().gaps, 1u);
  w.Send(Events(4, {keys[3]}));  // ignored until the list comes
  w.Send(Snapshot(3, {keys[0], keys[1], keys[2]}));
  ASSERT_TRUE(Eventually([&] { return MatchedNow(1, prompt) == 3; }));
}

TEST_F(PrefixRoutingTest, AWorkerThatComesBackStartsEmptyAndIsAskedAgain) {
  WorkerStandIn& first = Join(Publishing(Colocated()), 100);
  ASSERT_TRUE(Eventually([&] { return Resyncs(first) == 1; }));
  const auto prompt = Prompt(3 * kPageSize);
  const auto keys = PromptBlockKeys(kLayout, prompt, kPageSize);
  first.Send(Snapshot(0, keys));
  ASSERT_TRUE(Eventually([&] { return MatchedNow(1, prompt) == 3; }));
  first.Close();
  ASSERT_TRUE(Eventually([&] { return registry_->Workers().empty(); }));
  EXPECT_EQ(registry_->PrefixStats().published_blocks, 0u);
  WorkerStandIn& again = Join(Publishing(Colocated()), 100);  // a new connection: worker 2
  ASSERT_TRUE(Eventually([&] { return Resyncs(again) == 1; }));
  EXPECT_EQ(MatchedNow(2, prompt), 0);
  again.Send(Snapshot(0, {keys[0]}));
  ASSERT_TRUE(Eventually([&] { return MatchedNow(2, prompt) == 1; }));
}

TEST_F(PrefixRoutingTest, AWorkerThatPublishesNothingIsMatchedByWhereItsPromptsWent) {
  WorkerStandIn& w = Join(Colocated(), 100);
  const auto prompt = Prompt(3 * kPageSize + 5);
  EXPECT_EQ(MatchedNow(1, prompt), 0);
  router_->Answer(Route{1, 1, false});
  ASSERT_TRUE(
      registry_->Dispatch(100, prompt, proto::Sampling(), std::make_shared<NullSink>()).ok());
  EXPECT_EQ(MatchedNow(1, prompt), 3);
  EXPECT_EQ(Resyncs(w), 0u) << "a worker that publishes nothing is never asked";
  EXPECT_EQ(registry_->PrefixStats().routed_blocks, 3u);
}

}  // namespace
}  // namespace pdserve::router
