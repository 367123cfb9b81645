// KvReceiver's state machine and validation, driven through FakeTransport and raw headers.
#include "kv_transfer/kv_receiver.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <thread>

#include "tests/fakes/fake_transport.h"
#include "tests/kv_transfer/kv_test_util.h"

namespace pdserve::kv_transfer {
namespace {

using namespace std::chrono_literals;
using testing::FillPage;
using testing::HostKvPool;
using testing::PageMatches;
using testing::SmallLayout;

struct Pair {
  explicit Pair(int layers = 3, int pages = 64)
      : layout(SmallLayout(layers)),
        send(layout, pages),
        recv(layout, pages),
        receiver(layout, recv.pool, recv.bases()),
        transport(layout, send.const_bases(), pages, receiver) {}
  // Reserves n pages for `id` on the receiver and opens the request on the sender.
  Reservation Start(uint64_t id, int n, Clock::duration timeout = 10s) {
    auto r = receiver.Reserve(id, n, Clock::now() + timeout);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    auto src = send.pool.Allocate(n);
    EXPECT_TRUE(src.ok());
    for (int l = 0; l < layout.n_layers; ++l) {
      for (int i = 0; i < n; ++i) {
        FillPage(send.page(l, (*src)[i]), layout.page_bytes(), id, l, i);
      }
    }
    EXPECT_TRUE(transport.Open({id, *src, r->pages, Clock::now() + timeout, r->secret}).ok());
    return *r;
  }
  KvLayout layout;
  HostKvPool send, recv;
  KvReceiver receiver;
  FakeTransport transport;
};

TEST(KvReceiver, MovesForwardToDoneAndHandsPagesOver) {
  Pair p;
  Reservation r = p.Start(1, 5);
  EXPECT_EQ(p.receiver.State(1), TransferState::kReserved);
  ASSERT_TRUE(p.transport.PushLayer(1, 0).ok());
  EXPECT_EQ(p.receiver.State(1), TransferState::kReceiving);
  ASSERT_TRUE(p.transport.PushLayer(1, 1).ok());
  ASSERT_TRUE(p.transport.PushLayer(1, 2).ok());
  ASSERT_TRUE(p.receiver.Wait(1).ok());
  ASSERT_TRUE(p.transport.Wait(1).ok());
  for (int l = 0; l < 3; ++l) {
    for (int i = 0; i < 5; ++i) {
      EXPECT_TRUE(PageMatches(p.recv.page(l, r.pages[i]), p.layout.page_bytes(), 1, l, i));
    }
  }
  EXPECT_FALSE(p.transport.PushLayer(1, 0).ok());  // forgotten after Wait
  auto pages = p.receiver.TakePages(1);
  ASSERT_TRUE(pages.ok());
  EXPECT_EQ(*pages, r.pages);
  p.recv.pool.Free(*pages);
  EXPECT_EQ(p.recv.pool.used_pages(), 0);
}

// A decode worker reserves room for the generated tokens too; only the prompt's pages arrive.
TEST(KvReceiver, DoneWhenTheFilledPagesArriveAndRefusesChunksPastThem) {
  Pair p;
  auto r = p.receiver.Reserve(9, 6, Clock::now() + 10s, /*filled_pages=*/2);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto src = p.send.pool.Allocate(2);
  ASSERT_TRUE(src.ok());
  std::vector<int32_t> dst(r->pages.begin(), r->pages.begin() + 2);
  ASSERT_TRUE(p.transport.Open({9, *src, dst, Clock::now() + 10s, r->secret}).ok());
  for (int l = 0; l < 3; ++l) ASSERT_TRUE(p.transport.PushLayer(9, l).ok());
  ASSERT_TRUE(p.receiver.Wait(9).ok());
  EXPECT_EQ(p.receiver.State(9), TransferState::kDone);
  auto pages = p.receiver.TakePages(9);
  ASSERT_TRUE(pages.ok());
  EXPECT_EQ(pages->size(), 6u);  // the whole reservation passes to the engine
  p.recv.pool.Free(*pages);

  auto again = p.receiver.Reserve(10, 4, Clock::now() + 10s, 1);
  ASSERT_TRUE(again.ok());
  FrameHeader h;
  h.layout_hash = p.layout.hash;
  h.request_id = 10;
  h.layer = 0;
  h.secret = again->secret;
  h.first_page = again->pages[1];  // the second page: room for generated tokens, not KV
  h.page_count = 1;
  h.byte_count = p.layout.page_bytes();
  auto refused = p.receiver.BeginChunk(p.receiver.AddPeer({}), h);
  EXPECT_EQ(refused.status().code(), StatusCode::kOutOfRange) << refused.status().ToString();
  EXPECT_FALSE(p.receiver.Reserve(11, 2, Clock::now() + 10s, 3).ok());
  p.receiver.Cancel(10, "test over");
}

// A chunk is a run of pages: every page must be in the reservation, once a layer. The pool is
// fragmented first so that the reservation has a gap for a run to fall into.
TEST(KvReceiver, RefusesRunsOverUnreservedPagesAndPagesSentTwice) {
  Pair p;
  ASSERT_TRUE(p.receiver.Reserve(20, 2, Clock::now() + 10s).ok());
  ASSERT_TRUE(p.receiver.Reserve(21, 1, Clock::now() + 10s).ok());
  ASSERT_TRUE(p.receiver.Reserve(22, 2, Clock::now() + 10s).ok());
  p.receiver.Cancel(21, "make a hole");
  auto r = p.receiver.Reserve(23, 3, Clock::now() + 10s);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const std::vector<int32_t>& pages = r->pages;
  size_t gap = 0;  // pages[gap] + 1 is not reserved
  while (gap + 1 < pages.size() && pages[gap + 1] == pages[gap] + 1) ++gap;
  ASSERT_LT(gap + 1, pages.size()) << "the reservation has no gap to test";
  const KvReceiver::PeerId peer = p.receiver.AddPeer({});
  auto chunk = [&](int32_t first, uint32_t count) {
    FrameHeader h;
    h.layout_hash = p.layout.hash;
    h.request_id = 23;
    h.secret = r->secret;
    h.layer = 1;
    h.first_page = first;
    h.page_count = count;
    h.byte_count = count * p.layout.page_bytes();
    return h;
  };
  auto across = p.receiver.BeginChunk(peer, chunk(pages[gap], 2));
  EXPECT_EQ(across.status().code(), StatusCode::kOutOfRange) << across.status().ToString();
  EXPECT_NE(across.status().message().find(fmt::format("page {} is not", pages[gap] + 1)),
            std::string::npos)
      << across.status().ToString();
  // A reserved page alone is taken; the same page again, alone or in a run, is refused.
  const FrameHeader first = chunk(pages[gap + 1], 1);
  ASSERT_TRUE(p.receiver.BeginChunk(peer, first).ok());
  ASSERT_TRUE(p.receiver.EndChunk(peer, first, Status::Ok()).ok());
  if (gap + 2 < pages.size() && pages[gap + 2] == pages[gap + 1] + 1) {
    auto twice = p.receiver.BeginChunk(peer, chunk(pages[gap + 1], 2));
    EXPECT_EQ(twice.status().code(), StatusCode::kAlreadyExists) << twice.status().ToString();
  }
  auto again = p.receiver.BeginChunk(peer, first);
  EXPECT_EQ(again.status().code(), StatusCode::kAlreadyExists) << again.status().ToString();
  EXPECT_NE(again.status().message().find(fmt::format("page {} of request 23", pages[gap + 1])),
            std::string::npos)
      << again.status().ToString();
  for (uint64_t id : {20, 22, 23}) p.receiver.Cancel(id, "test over");
}

TEST(KvReceiver, DeadlineFailsAndFreesPages) {
  Pair p;
  p.Start(2, 4, 200ms);
  ASSERT_TRUE(p.transport.PushLayer(2, 0).ok());  // the other layers never come
  const auto t0 = Clock::now();
  Status s = p.receiver.Wait(2);
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded) << s.ToString();
  EXPECT_LT(Clock::now() - t0, 2s);
  EXPECT_EQ(p.receiver.State(2), TransferState::kFailed);
  EXPECT_EQ(p.transport.Wait(2).code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(p.recv.pool.used_pages(), 0);
  EXPECT_FALSE(p.receiver.TakePages(2).ok());
}

TEST(KvReceiver, CancelOnEitherSideFailsBoth) {
  Pair p;
  p.Start(3, 4);
  p.Start(4, 4);
  ASSERT_TRUE(p.transport.PushLayer(3, 0).ok());  // binds request 3 to the fake's connection
  p.receiver.Cancel(3, "client went away");
  EXPECT_EQ(p.transport.Wait(3).code(), StatusCode::kCancelled);
  p.transport.Cancel(4, "prefill aborted");
  EXPECT_EQ(p.receiver.Wait(4).code(), StatusCode::kCancelled);
  EXPECT_EQ(p.recv.pool.used_pages(), 0);
  // Failed is final: later chunks are refused.
  EXPECT_EQ(p.receiver.State(3), TransferState::kFailed);
}

TEST(KvReceiver, ConnectionLossFailsThatPeersRequests) {
  Pair p;
  p.Start(5, 4);
  p.Start(6, 4);
  ASSERT_TRUE(p.transport.PushLayer(5, 0).ok());
  p.transport.DropConnection();
  EXPECT_EQ(p.receiver.Wait(5).code(), StatusCode::kUnavailable);
  EXPECT_EQ(p.transport.Wait(5).code(), StatusCode::kUnavailable);
  EXPECT_EQ(p.transport.Wait(6).code(), StatusCode::kUnavailable);
  // Request 6 was never bound to the peer: it fails at its deadline or on Cancel.
  p.receiver.Cancel(6, "test over");
  EXPECT_EQ(p.recv.pool.used_pages(), 0);
}

TEST(KvReceiver, CorruptChunkFailsTheRequest) {
  Pair p;
  p.Start(7, 4);
  p.transport.FailChunksAfter(0);
  ASSERT_TRUE(p.transport.PushLayer(7, 0).ok());
  EXPECT_EQ(p.receiver.Wait(7).code(), StatusCode::kDataLoss);
  EXPECT_EQ(p.transport.Wait(7).code(), StatusCode::kDataLoss);
  EXPECT_EQ(p.recv.pool.used_pages(), 0);
}

// Only the reservation's secret opens it: a chunk with another gets the answer of a request that
// does not exist, word for word, and changes nothing; so does a cancel.
TEST(KvReceiver, AChunkOrCancelWithoutTheSecretIsTheAnswerToNoReservation) {
  Pair p;
  Reservation r = p.Start(8, 4);
  Reservation other = p.Start(9, 2);
  EXPECT_NE(r.secret, other.secret);
  EXPECT_NE(r.secret, TransferSecret{});
  const auto peer = p.receiver.AddPeer({});
  FrameHeader h;
  h.type = FrameType::kChunk;
  h.request_id = 8;
  h.layout_hash = p.layout.hash;
  h.first_page = r.pages[0];
  h.page_count = 1;
  h.byte_count = p.layout.page_bytes();
  h.secret = other.secret;  // a real secret, of another reservation
  const auto wrong = p.receiver.BeginChunk(peer, h);
  h.request_id = 12345;  // no such reservation
  const auto unknown = p.receiver.BeginChunk(peer, h);
  ASSERT_FALSE(wrong.ok());
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(wrong.status().code(), unknown.status().code());
  EXPECT_EQ(wrong.status().message(), unknown.status().message());
  EXPECT_EQ(wrong.status().message().find("8"), std::string::npos) << wrong.status().message();
  EXPECT_EQ(p.receiver.State(8), TransferState::kReserved);
  p.receiver.FailFromPeer(peer, 8, other.secret, Status(StatusCode::kCancelled, "a spray"));
  p.receiver.FailFromPeer(peer, 8, TransferSecret{}, Status(StatusCode::kCancelled, "a spray"));
  EXPECT_EQ(p.receiver.State(8), TransferState::kReserved);
  p.receiver.FailFromPeer(peer, 8, r.secret, Status(StatusCode::kCancelled, "the sender gave up"));
  EXPECT_EQ(p.receiver.State(8), TransferState::kFailed);
  p.receiver.Cancel(9, "test over");
  EXPECT_EQ(p.recv.pool.used_pages(), 0);
}

TEST(KvReceiver, RefusesEveryBadHeaderField) {
  Pair p;
  Reservation r = p.Start(8, 4);
  const auto peer = p.receiver.AddPeer({});
  const auto other = p.receiver.AddPeer({});
  auto chunk = [&](uint64_t id, uint32_t layer, int32_t first, uint32_t count) {
    FrameHeader h;
    h.type = FrameType::kChunk;
    h.request_id = id;
    h.secret = r.secret;
    h.layout_hash = p.layout.hash;
    h.layer = layer;
    h.first_page = first;
    h.page_count = count;
    h.byte_count = count * p.layout.page_bytes();
    return h;
  };
  FrameHeader h = chunk(8, 0, r.pages[0], 1);
  h.layout_hash ^= 1;
  EXPECT_EQ(p.receiver.BeginChunk(peer, h).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(p.receiver.BeginChunk(peer, chunk(99, 0, r.pages[0], 1)).status().code(),
            StatusCode::kNotFound);
  EXPECT_FALSE(p.receiver.BeginChunk(peer, chunk(8, 3, r.pages[0], 1)).ok());    // layer
  EXPECT_FALSE(p.receiver.BeginChunk(peer, chunk(8, 0, -1, 1)).ok());            // negative
  EXPECT_FALSE(p.receiver.BeginChunk(peer, chunk(8, 0, 63, 2)).ok());            // past pool
  EXPECT_FALSE(p.receiver.BeginChunk(peer, chunk(8, 0, r.pages[0], 0)).ok());    // empty
  EXPECT_FALSE(p.receiver.BeginChunk(peer, chunk(8, 0, r.pages[0], 100)).ok());  // too many
  h = chunk(8, 0, r.pages[0], 1);
  h.byte_count += 1;
  EXPECT_FALSE(p.receiver.BeginChunk(peer, h).ok());  // byte count
  // A page of the pool that is not in this reservation.
  int32_t foreign = 0;
  while (std::find(r.pages.begin(), r.pages.end(), foreign) != r.pages.end()) ++foreign;
  EXPECT_FALSE(p.receiver.BeginChunk(peer, chunk(8, 0, foreign, 1)).ok());
  EXPECT_EQ(p.receiver.State(8), TransferState::kReserved);  // nothing above touched it
  // A good chunk binds the request to `peer`; another peer's chunks are refused; no page twice.
  auto t = p.receiver.BeginChunk(peer, chunk(8, 0, r.pages[0], 1));
  ASSERT_TRUE(t.ok());
  EXPECT_FALSE(p.receiver.BeginChunk(other, chunk(8, 1, r.pages[0], 1)).ok());
  EXPECT_FALSE(p.receiver.BeginChunk(peer, chunk(8, 0, r.pages[0], 1)).ok());
  // A failure while a chunk is being written defers freeing until the write ends.
  p.receiver.Cancel(8, "test");
  EXPECT_EQ(p.recv.pool.used_pages(), 4);
  EXPECT_FALSE(p.receiver.EndChunk(peer, chunk(8, 0, r.pages[0], 1), Status::Ok()).ok());
  EXPECT_EQ(p.recv.pool.used_pages(), 0);
  p.transport.Cancel(8, "test over");  // the fake's side never heard of the raw peer's chunk
  EXPECT_EQ(p.transport.Wait(8).code(), StatusCode::kCancelled);
}

// A chunk whose write fails after the request already failed (a sender that stalled mid-chunk
// past the deadline, then broke off): the pages still come back.
TEST(KvReceiver, ChunkFailingAfterTheRequestFailedStillFreesItsPages) {
  Pair p;
  Reservation r = p.Start(9, 4, 100ms);
  const auto peer = p.receiver.AddPeer({});
  FrameHeader h;
  h.type = FrameType::kChunk;
  h.request_id = 9;
  h.secret = r.secret;
  h.layout_hash = p.layout.hash;
  h.layer = 0;
  h.first_page = r.pages[0];
  h.page_count = 1;
  h.byte_count = p.layout.page_bytes();
  ASSERT_TRUE(p.receiver.BeginChunk(peer, h).ok());
  EXPECT_EQ(p.receiver.Wait(9).code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(p.recv.pool.used_pages(), 4);  // the chunk may still be writing
  EXPECT_EQ(p.receiver.EndChunk(peer, h, Unavailable("peer closed mid-payload")).code(),
            StatusCode::kUnavailable);
  EXPECT_EQ(p.recv.pool.used_pages(), 0);
  EXPECT_EQ(p.receiver.State(9), TransferState::kFailed);
  p.transport.Cancel(9, "test over");
}

// With a sender that writes before its headers (CUDA IPC), a Failed request's pages stay out of
// the pool for the hold (a request a chunk has reached), or until the hold past its deadline
// (one no chunk has reached, whose sender cannot be told), so that no other request, nor the
// engine, gets pages that a late copy may still land in. A Done request's pages pass to the
// engine as ever.
TEST(KvReceiver, HeldPagesOfFailedRequestsReturnAfterTheHold) {
  Pair p(2, 10);
  p.receiver.HoldFailedPages(300ms);
  p.Start(1, 4);
  p.Start(2, 2);
  const auto reserved_3 = Clock::now();
  p.Start(3, 3, 1500ms);
  ASSERT_TRUE(p.transport.PushLayer(2, 0).ok());
  ASSERT_TRUE(p.transport.PushLayer(2, 1).ok());
  ASSERT_TRUE(p.receiver.Wait(2).ok());
  ASSERT_TRUE(p.receiver.TakePages(2).ok());      // now the caller's: the pool counts them used
  ASSERT_TRUE(p.transport.PushLayer(1, 0).ok());  // binds request 1 to its sender
  const auto failed_at = Clock::now();
  p.receiver.Cancel(1, "client went away");
  p.receiver.Cancel(3, "client went away");  // unbound: held past its deadline
  EXPECT_EQ(p.receiver.held_pages(), 7);
  EXPECT_EQ(p.recv.pool.used_pages(), 9);
  // A reservation meanwhile cannot have them.
  EXPECT_EQ(p.receiver.Reserve(4, 2, Clock::now() + 1s).status().code(),
            StatusCode::kResourceExhausted);
  // The watchdog returns them once their hold has passed, with no other call.
  auto wait_for_held = [&](int pages) {
    while (p.receiver.held_pages() > pages && Clock::now() - failed_at < 5s) {
      std::this_thread::sleep_for(10ms);
    }
    return p.receiver.held_pages();
  };
  EXPECT_EQ(wait_for_held(3), 3);
  EXPECT_GE(Clock::now() - failed_at, 300ms);
  EXPECT_EQ(p.recv.pool.used_pages(), 5);
  EXPECT_EQ(wait_for_held(0), 0);
  EXPECT_GE(Clock::now() - reserved_3, 1800ms);  // its deadline, then the hold
  EXPECT_EQ(p.recv.pool.used_pages(), 2);
  EXPECT_TRUE(p.receiver.Reserve(4, 3, Clock::now() + 1s).ok());
  p.receiver.Cancel(4, "test over");
  p.transport.Cancel(1, "test over");
  p.transport.Cancel(3, "test over");
}

TEST(KvReceiver, ReserveRefusals) {
  Pair p(1, 8);
  EXPECT_FALSE(p.receiver.Reserve(1, 0, Clock::now() + 1s).ok());
  EXPECT_FALSE(p.receiver.Reserve(1, 2, Clock::now() - 1s).ok());
  ASSERT_TRUE(p.receiver.Reserve(1, 6, Clock::now() + 1s).ok());
  EXPECT_EQ(p.receiver.Reserve(1, 1, Clock::now() + 1s).status().code(),
            StatusCode::kAlreadyExists);
  EXPECT_EQ(p.receiver.Reserve(2, 3, Clock::now() + 1s).status().code(),
            StatusCode::kResourceExhausted);
  // The id the receiver's watchdog uses for held pages.
  EXPECT_EQ(p.receiver.Reserve(~uint64_t{0}, 1, Clock::now() + 1s).status().code(),
            StatusCode::kInvalidArgument);
  p.receiver.Cancel(1, "test");
  EXPECT_EQ(p.recv.pool.used_pages(), 0);
}

TEST(KvReceiver, LayoutMismatchRefusedBeforeAnyByte) {
  KvLayout mine = SmallLayout(2);
  KvLayout theirs = SmallLayout(2, model::DType::kF32, /*page_size=*/4);
  HostKvPool recv(mine, 8), send(theirs, 8);
  KvReceiver receiver(mine, recv.pool, recv.bases());
  FakeTransport t(theirs, send.const_bases(), 8, receiver);
  auto r = receiver.Reserve(1, 2, Clock::now() + 5s);
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(t.Open({1, {0, 1}, r->pages, Clock::now() + 5s, r->secret}).ok());
  EXPECT_EQ(t.PushLayer(1, 0).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(receiver.State(1), TransferState::kReserved);
  receiver.Cancel(1, "test");
  EXPECT_EQ(recv.pool.used_pages(), 0);
}

}  // namespace
}  // namespace pdserve::kv_transfer
