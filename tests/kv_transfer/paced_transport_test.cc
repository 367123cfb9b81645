// PacedTransport: the wrapped transport moves the bytes, and Wait returns no sooner than the
// paced link would have carried the real model's bytes, layers queued one after another on the
// link; a transfer the link cannot finish by its deadline fails.
#include "kv_transfer/paced_transport.h"

#include <gtest/gtest.h>

#include "tests/fakes/fake_transport.h"
#include "tests/kv_transfer/kv_test_util.h"

namespace pdserve::kv_transfer {
namespace {

using namespace std::chrono_literals;
using testing::HostKvPool;
using testing::SmallLayout;

struct PacedPair {
  explicit PacedPair(PacedLink link)
      : layout(SmallLayout(/*n_layers=*/4)),
        send(layout, 64),
        recv(layout, 64),
        receiver(layout, recv.pool, recv.bases()),
        paced(std::make_unique<FakeTransport>(layout, send.const_bases(), 64, receiver), link) {}

  Status Open(uint64_t id, int pages, Clock::duration timeout) {
    auto r = receiver.Reserve(id, pages, Clock::now() + timeout);
    if (!r.ok()) return r.status();
    auto src = send.pool.Allocate(pages);
    if (!src.ok()) return src.status();
    return paced.Open({id, *src, r->pages, Clock::now() + timeout, r->secret});
  }
  Status PushAll(uint64_t id) {
    for (int l = 0; l < layout.n_layers; ++l) PDSERVE_RETURN_IF_ERROR(paced.PushLayer(id, l));
    return Status::Ok();
  }

  KvLayout layout;
  HostKvPool send, recv;
  KvReceiver receiver;
  PacedTransport paced;
};

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

TEST(PacedTransport, WaitTakesTheRealBytesTimeAtTheLinksBandwidth) {
  // 4 pages of 1 MB per layer at 100 MB/s: 40 ms a layer, 160 ms for the four.
  PacedPair p({/*bytes_per_page_layer=*/1e6, /*bytes_per_second=*/1e8});
  const auto start = Clock::now();
  ASSERT_TRUE(p.Open(1, 4, 10s).ok());
  ASSERT_TRUE(p.PushAll(1).ok());
  ASSERT_TRUE(p.paced.Wait(1).ok());
  EXPECT_GE(SecondsSince(start), 0.16);
  EXPECT_EQ(p.receiver.State(1), TransferState::kDone);  // the inner transport moved the bytes
}

TEST(PacedTransport, RequestsShareTheLinkOneAfterAnother) {
  PacedPair p({1e6, 1e8});  // 4 pages: 40 ms a layer
  const auto start = Clock::now();
  ASSERT_TRUE(p.Open(1, 4, 10s).ok());
  ASSERT_TRUE(p.Open(2, 4, 10s).ok());
  ASSERT_TRUE(p.PushAll(1).ok());
  ASSERT_TRUE(p.PushAll(2).ok());
  ASSERT_TRUE(p.paced.Wait(1).ok());
  EXPECT_GE(SecondsSince(start), 0.16);
  // The second request's layers wait behind the first's on the link.
  ASSERT_TRUE(p.paced.Wait(2).ok());
  EXPECT_GE(SecondsSince(start), 0.32);
}

TEST(PacedTransport, NoBandwidthMeansNoPacing) {
  PacedPair p({1e9, 0});
  const auto start = Clock::now();
  ASSERT_TRUE(p.Open(1, 4, 10s).ok());
  ASSERT_TRUE(p.PushAll(1).ok());
  ASSERT_TRUE(p.paced.Wait(1).ok());
  EXPECT_LT(SecondsSince(start), 5.0);  // far below the 16 s pacing at any rate would take
}

TEST(PacedTransport, ATransferTheLinkCannotFinishByItsDeadlineFails) {
  PacedPair p({1e6, 1e6});  // 4 s a layer
  ASSERT_TRUE(p.Open(1, 4, 200ms).ok());
  ASSERT_TRUE(p.PushAll(1).ok());
  const auto start = Clock::now();
  Status s = p.paced.Wait(1);
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded) << s.ToString();
  EXPECT_LT(SecondsSince(start), 2.0);  // gave up at the deadline, not after 16 s
}

}  // namespace
}  // namespace pdserve::kv_transfer
