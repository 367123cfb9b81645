// The publisher's numbering: nothing before the gateway's resync, a snapshot answering it from the
// registration's wire seq, engine events after it on consecutive wire seqs whatever the engine's
// own numbers, and a gap in the engine's numbers showing as a gap on the wire.
#include "worker/kv_event_publisher.h"

#include <gtest/gtest.h>

namespace pdserve::worker {
namespace {

model::KvCacheEvent Stored(uint64_t seq, BlockKey key, BlockKey parent = 0) {
  model::KvCacheEvent e;
  e.seq = seq;
  e.stored.push_back({key, parent});
  return e;
}

model::KvCacheEvent Removed(uint64_t seq, BlockKey key) {
  model::KvCacheEvent e;
  e.seq = seq;
  e.removed.push_back(key);
  return e;
}

std::vector<uint64_t> WireSeqs(const std::vector<proto::Envelope>& out) {
  std::vector<uint64_t> seqs;
  for (const auto& m : out) {
    EXPECT_TRUE(m.has_kv_events());
    seqs.push_back(m.kv_events().seq());
  }
  return seqs;
}

TEST(KvEventPublisherTest, NothingBeforeTheGatewaysResync) {
  KvEventPublisher p;
  p.Restart();
  EXPECT_TRUE(p.Publish({Stored(1, 11), Stored(2, 12, 11)}).empty());
}

TEST(KvEventPublisherTest, ResyncAnswersWithTheBlocksAndEventsContinueFromIt) {
  KvEventPublisher p;
  p.Restart();
  // The engine started long ago: its events are numbered from 40.
  const proto::Envelope snap = p.Resync({41, {11, 12}});
  ASSERT_TRUE(snap.has_kv_snapshot());
  EXPECT_EQ(snap.kv_snapshot().seq(), 0u);
  EXPECT_EQ(
      std::vector<uint64_t>(snap.kv_snapshot().blocks().begin(), snap.kv_snapshot().blocks().end()),
      (std::vector<uint64_t>{11, 12}));
  // 40 and 41 are in the snapshot; 42 and 43 are the registration's first events.
  auto out = p.Publish({Stored(40, 11), Stored(41, 12, 11), Stored(42, 13, 12), Removed(43, 11)});
  EXPECT_EQ(WireSeqs(out), (std::vector<uint64_t>{1, 2}));
  ASSERT_EQ(out[0].kv_events().stored_size(), 1);
  EXPECT_EQ(out[0].kv_events().stored(0).key(), 13u);
  EXPECT_EQ(out[0].kv_events().stored(0).parent(), 12u);
  ASSERT_EQ(out[1].kv_events().removed_size(), 1);
  EXPECT_EQ(out[1].kv_events().removed(0), 11u);
  EXPECT_EQ(WireSeqs(p.Publish({Stored(44, 14)})), (std::vector<uint64_t>{3}));
}

TEST(KvEventPublisherTest, ASecondResyncContinuesTheWireSeq) {
  KvEventPublisher p;
  p.Restart();
  (void)p.Resync({0, {}});
  EXPECT_EQ(WireSeqs(p.Publish({Stored(1, 11), Stored(2, 12)})), (std::vector<uint64_t>{1, 2}));
  const proto::Envelope snap = p.Resync({3, {11, 12, 13}});
  EXPECT_EQ(snap.kv_snapshot().seq(), 2u);  // the next KvEvents is 3
  EXPECT_EQ(WireSeqs(p.Publish({Stored(3, 13), Stored(4, 14)})), (std::vector<uint64_t>{3}));
}

TEST(KvEventPublisherTest, ReregistrationStartsTheWireSeqAgain) {
  KvEventPublisher p;
  p.Restart();
  (void)p.Resync({0, {}});
  EXPECT_EQ(WireSeqs(p.Publish({Stored(1, 11), Stored(2, 12)})), (std::vector<uint64_t>{1, 2}));
  p.Restart();
  EXPECT_TRUE(p.Publish({Stored(3, 13)}).empty());
  EXPECT_EQ(p.Resync({3, {11, 12, 13}}).kv_snapshot().seq(), 0u);
  EXPECT_EQ(WireSeqs(p.Publish({Stored(4, 14)})), (std::vector<uint64_t>{1}));
}

TEST(KvEventPublisherTest, ASkippedEngineSeqSkipsAWireSeqAndTheResyncMendsIt) {
  KvEventPublisher p;
  p.Restart();
  (void)p.Resync({0, {}});
  EXPECT_EQ(WireSeqs(p.Publish({Stored(1, 11)})), (std::vector<uint64_t>{1}));
  // Events 2..9 were dropped by the engine's full log: the wire skips 2, so the gateway asks.
  EXPECT_EQ(WireSeqs(p.Publish({Stored(10, 20), Stored(11, 21)})), (std::vector<uint64_t>{3, 4}));
  const proto::Envelope snap = p.Resync({12, {11, 20, 21, 22}});
  EXPECT_EQ(snap.kv_snapshot().seq(), 4u);
  EXPECT_EQ(WireSeqs(p.Publish({Stored(12, 22), Stored(13, 23)})), (std::vector<uint64_t>{5}));
}

}  // namespace
}  // namespace pdserve::worker
