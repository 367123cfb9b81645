// The TCP transport's checksums, in one process over loopback: a bit flipped on the wire after
// its CRC fails that request with a CRC error and the connection carries on, whether the CRCs
// are computed on the I/O threads or on the sender's and the listener's worker pools; a peer
// lost mid-payload while the pool checks its spans frees the pages.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>

#include <thread>

#include "kv_transfer/tcp_transport.h"
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

TEST(TcpTransport, FlippedBitIsACrcErrorAndFailsTheRequest) {
  TcpTransportOptions o;
  o.flip_bit_in_chunk = 1;
  LoopbackPair p(SmallLayout(3), o);
  ASSERT_TRUE(p.connected.ok()) << p.connected.status().ToString();
  auto& t = *p.connected;
  auto res = p.receiver.Reserve(1, 8, Clock::now() + 10s);
  ASSERT_TRUE(res.ok());
  ASSERT_TRUE(
      t->Open({1, {0, 1, 2, 3, 4, 5, 6, 7}, res->pages, Clock::now() + 10s, res->secret}).ok());
  for (int l = 0; l < 3; ++l) {
    // The receiver's CRC error may come back before the last layer is pushed; that push then
    // reports the failure.
    Status pushed = t->PushLayer(1, l);
    ASSERT_TRUE(pushed.ok() || (l == 2 && pushed.code() == StatusCode::kDataLoss))
        << "layer " << l << ": " << pushed.ToString();
  }
  EXPECT_EQ(p.receiver.Wait(1).code(), StatusCode::kDataLoss);
  Status s = t->Wait(1);
  EXPECT_EQ(s.code(), StatusCode::kDataLoss) << s.ToString();
  EXPECT_NE(s.message().find("CRC"), std::string::npos) << s.message();
  EXPECT_EQ(p.recv.pool.used_pages(), 0);
  // The connection survives: the next request goes through.
  auto res2 = p.receiver.Reserve(2, 4, Clock::now() + 10s);
  ASSERT_TRUE(res2.ok());
  ASSERT_TRUE(t->Open({2, {8, 9, 10, 11}, res2->pages, Clock::now() + 10s, res2->secret}).ok());
  for (int l = 0; l < 3; ++l) ASSERT_TRUE(t->PushLayer(2, l).ok());
  EXPECT_TRUE(t->Wait(2).ok());
  p.recv.pool.Free(*p.receiver.TakePages(2));
  EXPECT_EQ(p.recv.pool.used_pages(), 0);
}

// Two requests over one connection with 64 KiB pages, `pages` to a request and one chunk a
// layer: the chunk `flip_chunk` (of the first request) has a bit flipped on the wire after its
// CRC, which fails that request with a CRC error; the second arrives bit-exact, so the CRCs the
// two ends compute agree; every page comes back.
void ExpectAFlippedBitCaughtAndTheNextRequestIntact(TcpKvListenerOptions lo, TcpTransportOptions o,
                                                    int pages, int64_t flip_chunk) {
  const KvLayout layout = SmallLayout(2, model::DType::kF32, /*page_size=*/2048);
  ASSERT_EQ(layout.page_bytes(), 64u << 10);
  const int pool_pages = 2 * pages;
  HostKvPool send(layout, pool_pages), recv(layout, pool_pages);
  for (int l = 0; l < 2; ++l)
    for (int i = 0; i < pool_pages; ++i) FillPage(send.page(l, i), layout.page_bytes(), 7, l, i);
  KvReceiver receiver(layout, recv.pool, recv.bases());
  auto listener = TcpKvListener::Start(receiver, lo);
  ASSERT_TRUE(listener.ok()) << listener.status().ToString();
  o.port = (*listener)->port();
  o.flip_bit_in_chunk = flip_chunk;
  o.lead_chunk_bytes = 0;  // one chunk a layer
  auto t = TcpTransport::Connect(layout, send.const_bases(), pool_pages, o);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  std::vector<int32_t> src(pages);
  for (int i = 0; i < pages; ++i) src[i] = i;
  auto bad = receiver.Reserve(1, pages, Clock::now() + 10s);
  ASSERT_TRUE(bad.ok());
  ASSERT_TRUE((*t)->Open({1, src, bad->pages, Clock::now() + 10s, bad->secret}).ok());
  for (int l = 0; l <= flip_chunk; ++l) {
    Status pushed = (*t)->PushLayer(1, l);
    ASSERT_TRUE(pushed.ok()) << pushed.ToString();
  }
  Status s = (*t)->Wait(1);
  EXPECT_EQ(s.code(), StatusCode::kDataLoss) << s.ToString();
  EXPECT_NE(s.message().find("CRC"), std::string::npos) << s.message();
  EXPECT_EQ(receiver.Wait(1).code(), StatusCode::kDataLoss);
  auto good = receiver.Reserve(2, pages, Clock::now() + 10s);
  ASSERT_TRUE(good.ok());
  for (int i = 0; i < pages; ++i) src[i] = pages + i;
  ASSERT_TRUE((*t)->Open({2, src, good->pages, Clock::now() + 10s, good->secret}).ok());
  for (int l = 0; l < 2; ++l) ASSERT_TRUE((*t)->PushLayer(2, l).ok());
  Status ok = (*t)->Wait(2);
  ASSERT_TRUE(ok.ok()) << ok.ToString();
  for (int l = 0; l < 2; ++l)
    for (int i = 0; i < pages; ++i)
      ASSERT_TRUE(PageMatches(recv.page(l, good->pages[i]), layout.page_bytes(), 7, l, pages + i))
          << "layer " << l << " page " << i;
  recv.pool.Free(*receiver.TakePages(2));
  EXPECT_EQ(recv.pool.used_pages(), 0);
}

bool OneCpu() {
  cpu_set_t cpus;
  return sched_getaffinity(0, sizeof cpus, &cpus) == 0 && CPU_COUNT(&cpus) < 2;
}

// Each 1 MiB chunk is checked in spans on the listener's pool.
TEST(TcpTransport, FlippedBitIsCaughtWhenTheWorkerPoolChecksTheCrc) {
  if (OneCpu()) GTEST_SKIP() << "one CPU: the listener checks CRCs on its I/O thread, not its pool";
  TcpKvListenerOptions lo;
  lo.offload_tcp_checksums = true;
  ExpectAFlippedBitCaughtAndTheNextRequestIntact(lo, {}, /*pages=*/16, /*flip_chunk=*/0);
}

// Each 2 MiB chunk's CRC is computed by the sender's pool in four spans; the bit is flipped in
// the second layer's chunk, after the first layer's went through whole.
TEST(TcpTransport, SenderChecksumsOnItsPoolArriveIntactAndAFlippedBitIsCaught) {
  if (OneCpu()) GTEST_SKIP() << "one CPU: the sender computes CRCs on its writing thread";
  TcpTransportOptions o;
  o.offload_checksums = true;
  ExpectAFlippedBitCaughtAndTheNextRequestIntact({}, o, /*pages=*/32, /*flip_chunk=*/1);
}

TEST(TcpTransport, PeerLostMidPayloadWhileThePoolChecksSpansFreesThePages) {
  if (OneCpu()) GTEST_SKIP() << "one CPU: the listener checks CRCs on its I/O thread, not its pool";
  const KvLayout layout = SmallLayout(2, model::DType::kF32, /*page_size=*/2048);  // 64 KiB pages
  HostKvPool recv(layout, 32);
  KvReceiver receiver(layout, recv.pool, recv.bases());
  TcpKvListenerOptions lo;
  lo.offload_tcp_checksums = true;
  auto listener = TcpKvListener::Start(receiver, lo);
  ASSERT_TRUE(listener.ok()) << listener.status().ToString();
  auto res = receiver.Reserve(5, 16, Clock::now() + 30s);
  ASSERT_TRUE(res.ok());
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons((*listener)->port());
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  FrameHeader hello;
  hello.type = FrameType::kHello;
  hello.layout_hash = layout.hash;
  const HeaderBytes hb = EncodeHeader(hello);
  ASSERT_EQ(::send(fd, hb.data(), hb.size(), MSG_NOSIGNAL), static_cast<ssize_t>(kHeaderBytes));
  // A 1 MiB chunk into the reserved pages, of which 600 KiB arrive: two spans go to the pool.
  FrameHeader chunk;
  chunk.type = FrameType::kChunk;
  chunk.request_id = 5;
  chunk.secret = res->secret;
  chunk.layout_hash = layout.hash;
  chunk.first_page = res->pages[0];
  chunk.page_count = 16;
  chunk.byte_count = 16 * layout.page_bytes();
  chunk.payload_crc = 0x12345678;
  const HeaderBytes cb = EncodeHeader(chunk);
  ASSERT_EQ(::send(fd, cb.data(), cb.size(), MSG_NOSIGNAL), static_cast<ssize_t>(kHeaderBytes));
  const std::vector<unsigned char> part(600 << 10, 0xab);
  for (size_t sent = 0; sent < part.size();) {
    const ssize_t n = ::send(fd, part.data() + sent, part.size() - sent, MSG_NOSIGNAL);
    ASSERT_GT(n, 0);
    sent += static_cast<size_t>(n);
  }
  const auto give_up = Clock::now() + 10s;
  while (receiver.State(5) != TransferState::kReceiving && Clock::now() < give_up) {
    std::this_thread::sleep_for(1ms);
  }
  ::close(fd);
  EXPECT_EQ(receiver.Wait(5).code(), StatusCode::kUnavailable);
  // Pinned while the pool reads the spans, then freed.
  while (recv.pool.used_pages() != 0 && Clock::now() < give_up) {
    std::this_thread::sleep_for(1ms);
  }
  EXPECT_EQ(recv.pool.used_pages(), 0);
}

}  // namespace
}  // namespace pdserve::kv_transfer
