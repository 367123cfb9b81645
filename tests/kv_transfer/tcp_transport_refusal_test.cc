// What the TCP transport refuses or fails, in one process over loopback: a layout mismatch, a
// peer that does not answer, host bytes for GPU pages, zero chunk sizes, a congestion control
// the kernel lacks, deadlines and cancels, unknown requests, chunks without the reservation's
// secret, and garbage from a peer. After each test the receiver's used pages are zero.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <random>
#include <thread>

#include "kv_transfer/tcp_transport.h"
#include "tests/common/unanswered_port.h"
#include "tests/kv_transfer/kv_test_util.h"
#include "tests/kv_transfer/tcp_loopback_pair.h"

namespace pdserve::kv_transfer {
namespace {

using namespace std::chrono_literals;
using testing::FillPage;
using testing::HostKvPool;
using testing::LoopbackPair;
using testing::PageMatches;
using testing::SmallLayout;

TEST(TcpTransport, LayoutMismatchIsRefusedBeforeAnyData) {
  auto other = KvLayout::Make("another-model", model::DType::kF32, 3, 1, 4, 2);
  LoopbackPair p(*other);
  auto res = p.receiver.Reserve(1, 4, Clock::now() + 10s);
  ASSERT_TRUE(res.ok());
  ASSERT_FALSE(p.connected.ok());
  EXPECT_EQ(p.connected.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(p.connected.status().message().find("layout mismatch"), std::string::npos)
      << p.connected.status().ToString();
  // What it is told names the receiver's layout but not its hash (nor echoes the sender's).
  for (uint64_t hash : {p.layout.hash, other->hash}) {
    EXPECT_EQ(p.connected.status().message().find(fmt::format("{:016x}", hash)), std::string::npos)
        << p.connected.status().message();
  }
  EXPECT_EQ(p.receiver.State(1), TransferState::kReserved);  // not a byte arrived
  p.receiver.Cancel(1, "test over");
  EXPECT_EQ(p.recv.pool.used_pages(), 0);
}

// A peer that does not answer SYNs (here: a listener whose accept queue is full, so the kernel
// drops them) costs the dial timeout, not the whole connect timeout.
TEST(TcpTransport, DialGivesUpOnAPeerThatDoesNotAnswerWithinTheDialTimeout) {
  pdserve::testing::UnansweredPort silent;
  if (!silent.unanswered()) {
    GTEST_SKIP() << "this kernel answers a full accept queue instead of dropping the SYN";
  }
  auto layout = SmallLayout(2);
  HostKvPool pool(layout, 4);
  TcpTransportOptions o;
  o.port = silent.port();
  o.dial_timeout = 300ms;
  o.connect_timeout = 20s;
  const auto t0 = Clock::now();
  auto t = TcpTransport::Connect(layout, pool.const_bases(), 4, o);
  const auto took = Clock::now() - t0;
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kDeadlineExceeded) << t.status().ToString();
  EXPECT_NE(t.status().message().find("connect timed out"), std::string::npos)
      << t.status().ToString();
  EXPECT_GE(took, 250ms);
  EXPECT_LT(took, 5s);
}

TEST(TcpTransport, HostBytesAreRefusedByAReceiverWhosePagesAreOnAGpu) {
  TcpKvListenerOptions lo;
  lo.pools_on_device = true;  // refused at the hello, before the pools are touched
  LoopbackPair p(SmallLayout(3), {}, lo);
  ASSERT_FALSE(p.connected.ok());
  EXPECT_EQ(p.connected.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(p.connected.status().message().find("KV path tcp cannot reach this receiver"),
            std::string::npos)
      << p.connected.status().ToString();
  EXPECT_NE(p.connected.status().message().find("nccl or ipc"), std::string::npos);
}

TEST(TcpTransport, ZeroChunkSizesAreRefusedBeforeDialling) {
  for (bool device_piece : {false, true}) {
    TcpTransportOptions o;
    (device_piece ? o.device_piece_bytes : o.max_chunk_bytes) = 0;
    LoopbackPair p(SmallLayout(3), o);
    ASSERT_FALSE(p.connected.ok());
    EXPECT_EQ(p.connected.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(p.connected.status().message().find(device_piece ? "device_piece_bytes is 0"
                                                               : "max_chunk_bytes is 0"),
              std::string::npos)
        << p.connected.status().ToString();
  }
}

// Both ends set the congestion control they are given, and refuse one the kernel does not offer
// with a message naming it.
TEST(TcpTransport, CongestionControlIsSetOrClearlyRefused) {
  TcpTransportOptions o;
  o.congestion_control = "reno";
  TcpKvListenerOptions lo;
  lo.congestion_control = "reno";
  LoopbackPair p(SmallLayout(3), o, lo);
  ASSERT_TRUE(p.connected.ok()) << p.connected.status().ToString();

  KvLayout layout = SmallLayout(3);
  HostKvPool recv(layout, 4);
  KvReceiver receiver(layout, recv.pool, recv.bases());
  lo.congestion_control = "no-such-cc";
  auto refused = TcpKvListener::Start(receiver, lo);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("'no-such-cc'"), std::string::npos)
      << refused.status().ToString();
  o.congestion_control = "no-such-cc";
  o.port = p.listener->port();
  auto not_connected = TcpTransport::Connect(layout, p.send.const_bases(), 64, o);
  ASSERT_FALSE(not_connected.ok());
  EXPECT_NE(not_connected.status().message().find("'no-such-cc'"), std::string::npos)
      << not_connected.status().ToString();
}

TEST(TcpTransport, DeadlineAndCancelFailBothSides) {
  LoopbackPair p(SmallLayout(3));
  ASSERT_TRUE(p.connected.ok());
  auto& t = *p.connected;
  auto a = p.receiver.Reserve(1, 4, Clock::now() + 300ms);
  auto b = p.receiver.Reserve(2, 4, Clock::now() + 10s);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE(t->Open({1, {0, 1, 2, 3}, a->pages, Clock::now() + 10s, a->secret}).ok());
  ASSERT_TRUE(t->Open({2, {4, 5, 6, 7}, b->pages, Clock::now() + 10s, b->secret}).ok());
  ASSERT_TRUE(t->PushLayer(1, 0).ok());  // then stall: the receiver's deadline fires
  const auto t0 = Clock::now();
  EXPECT_EQ(p.receiver.Wait(1).code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(t->Wait(1).code(), StatusCode::kDeadlineExceeded);  // told by a cancel frame
  EXPECT_LT(Clock::now() - t0, 3s);
  ASSERT_TRUE(t->PushLayer(2, 0).ok());
  t->Cancel(2, "prefill aborted");
  EXPECT_EQ(p.receiver.Wait(2).code(), StatusCode::kCancelled);
  EXPECT_EQ(p.recv.pool.used_pages(), 0);
}

TEST(TcpTransport, UnknownRequestIsRefusedAndTheConnectionCarriesOn) {
  LoopbackPair p(SmallLayout(3));
  ASSERT_TRUE(p.connected.ok());
  auto& t = *p.connected;
  ASSERT_TRUE(t->Open({77, {0, 1}, {5, 6}, Clock::now() + 10s}).ok());
  ASSERT_TRUE(t->PushLayer(77, 0).ok());
  EXPECT_EQ(t->Wait(77).code(), StatusCode::kNotFound);
  EXPECT_TRUE(t->connected());
  EXPECT_EQ(p.recv.pool.used_pages(), 0);
}

// Another connection that knows a live request's id but not its reservation's secret (a scan of
// ids, a guess): its chunks and cancels change nothing, and a live id and an unknown one get the
// same answer. The sender the gateway named, with the secret, then moves the request as usual.
TEST(TcpTransport, ChunksAndCancelsWithoutTheSecretChangeNothingAndTellNothing) {
  LoopbackPair p(SmallLayout(3));
  ASSERT_TRUE(p.connected.ok()) << p.connected.status().ToString();
  auto res = p.receiver.Reserve(5, 4, Clock::now() + 10s);
  ASSERT_TRUE(res.ok());
  TcpTransportOptions o;
  o.port = p.listener->port();
  HostKvPool attacker_pool(p.layout, 64);
  for (int l = 0; l < 3; ++l) {
    for (int i = 0; i < 4; ++i)
      FillPage(attacker_pool.page(l, i), p.layout.page_bytes(), 666, l, i);
  }
  auto attacker = TcpTransport::Connect(p.layout, attacker_pool.const_bases(), 64, o);
  ASSERT_TRUE(attacker.ok()) << attacker.status().ToString();
  TransferSecret guess = res->secret;
  guess[7] ^= 1;  // one bit off: as wrong as any other guess
  std::string answers[2];
  for (uint64_t id : {uint64_t{5}, uint64_t{6}}) {  // live, and never reserved
    ASSERT_TRUE((*attacker)->Open({id, {0, 1, 2, 3}, res->pages, Clock::now() + 10s, guess}).ok());
    ASSERT_TRUE((*attacker)->PushLayer(id, 0).ok());
    const Status s = (*attacker)->Wait(id);
    EXPECT_EQ(s.code(), StatusCode::kNotFound) << s.ToString();
    answers[id - 5] = s.message();
  }
  EXPECT_EQ(answers[0], answers[1]) << "a live id is told apart from an unknown one";
  EXPECT_NE(answers[0].find("no reservation matches"), std::string::npos) << answers[0];
  // A cancel spray with the guess: ignored.
  ASSERT_TRUE((*attacker)->Open({5, {0}, {res->pages[0]}, Clock::now() + 10s, guess}).ok());
  (*attacker)->Cancel(5, "spray");
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(p.receiver.State(5), TransferState::kReserved);
  for (int l = 0; l < 3; ++l) {  // not a byte of the attacker's landed
    for (int32_t page : res->pages) {
      const unsigned char* b = p.recv.page(l, page);
      EXPECT_TRUE(std::all_of(b, b + p.layout.page_bytes(), [](unsigned char c) { return !c; }));
    }
  }
  // The named sender, with the secret.
  for (int l = 0; l < 3; ++l) {
    for (int i = 0; i < 4; ++i) FillPage(p.send.page(l, i), p.layout.page_bytes(), 5, l, i);
  }
  auto& t = *p.connected;
  ASSERT_TRUE(t->Open({5, {0, 1, 2, 3}, res->pages, Clock::now() + 10s, res->secret}).ok());
  for (int l = 0; l < 3; ++l) ASSERT_TRUE(t->PushLayer(5, l).ok());
  ASSERT_TRUE(t->Wait(5).ok());
  ASSERT_TRUE(p.receiver.Wait(5).ok());
  for (int l = 0; l < 3; ++l) {
    for (int i = 0; i < 4; ++i) {
      EXPECT_TRUE(PageMatches(p.recv.page(l, res->pages[i]), p.layout.page_bytes(), 5, l, i));
    }
  }
  p.recv.pool.Free(*p.receiver.TakePages(5));
  EXPECT_EQ(p.recv.pool.used_pages(), 0);
}

TEST(TcpTransport, GarbageFromAPeerClosesOnlyThatConnection) {
  LoopbackPair p(SmallLayout(3));
  ASSERT_TRUE(p.connected.ok());
  std::mt19937_64 rng(5);
  for (int round = 0; round < 20; ++round) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(p.listener->port());
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    HeaderBytes junk;
    for (auto& c : junk) c = static_cast<unsigned char>(rng());
    if (round % 2 == 1) {  // a well-formed hello, then a chunk header claiming a huge payload
      FrameHeader hello;
      hello.type = FrameType::kHello;
      hello.layout_hash = p.layout.hash;
      HeaderBytes hb = EncodeHeader(hello);
      ASSERT_EQ(::send(fd, hb.data(), hb.size(), 0), static_cast<ssize_t>(kHeaderBytes));
      FrameHeader chunk;
      chunk.type = FrameType::kChunk;
      chunk.layout_hash = p.layout.hash;
      chunk.request_id = rng();
      chunk.page_count = static_cast<uint32_t>(rng());
      chunk.first_page = static_cast<int32_t>(rng());
      chunk.byte_count = rng();
      junk = EncodeHeader(chunk);
    }
    (void)::send(fd, junk.data(), junk.size(), MSG_NOSIGNAL);
    char buf[256];
    // The listener answers (a hello reply at most) and closes: read until EOF, bounded.
    timeval tv{5, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ssize_t n;
    while ((n = ::recv(fd, buf, sizeof buf, 0)) > 0) {
    }
    EXPECT_EQ(n, 0) << "round " << round << ": the listener did not close the connection";
    ::close(fd);
  }
  // The well-behaved connection still works.
  auto& t = *p.connected;
  auto res = p.receiver.Reserve(3, 2, Clock::now() + 10s);
  ASSERT_TRUE(res.ok());
  ASSERT_TRUE(t->Open({3, {0, 1}, res->pages, Clock::now() + 10s, res->secret}).ok());
  for (int l = 0; l < 3; ++l) ASSERT_TRUE(t->PushLayer(3, l).ok());
  EXPECT_TRUE(t->Wait(3).ok());
  p.recv.pool.Free(*p.receiver.TakePages(3));
  EXPECT_EQ(p.recv.pool.used_pages(), 0);
}

}  // namespace
}  // namespace pdserve::kv_transfer
