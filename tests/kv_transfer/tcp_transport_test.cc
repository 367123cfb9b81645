// The TCP transport between two real processes (fork) on loopback: bit-exact delivery over
// many layers, pages and concurrent requests; a killed sender or receiver; a flipped bit; a
// layout mismatch; garbage from a peer. After each test the receiver's used pages are zero.
#include "kv_transfer/tcp_transport.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>

#include <algorithm>
#include <random>
#include <thread>

#include "tests/common/unanswered_port.h"
#include "tests/kv_transfer/kv_test_util.h"

namespace pdserve::kv_transfer {
namespace {

using namespace std::chrono_literals;
using testing::FillPage;
using testing::HostKvPool;
using testing::PageMatches;
using testing::SmallLayout;
using testing::WaitChild;
using testing::WordPipe;

// Child process: connects, pushes every request's layers (from `threads` threads), waits for
// every ack. `stall_after_layers` >= 0: push that many layers, then hang (to be killed).
[[noreturn]] void RunSender(WordPipe& pipe, const KvLayout& layout, int pool_pages, int threads,
                            size_t max_chunk_bytes, int stall_after_layers,
                            bool splice_payloads = true) {
  uint64_t port = 0, n_requests = 0;
  if (!pipe.Read(&port) || !pipe.Read(&n_requests)) _exit(10);
  std::vector<uint64_t> ids(n_requests);
  std::vector<std::vector<int32_t>> dst(n_requests);
  std::vector<TransferSecret> secrets(n_requests);
  for (uint64_t r = 0; r < n_requests; ++r) {
    uint64_t n = 0;
    if (!pipe.Read(&ids[r]) || !pipe.Read(&n)) _exit(11);
    dst[r].resize(n);
    for (auto& p : dst[r]) {
      uint64_t w;
      if (!pipe.Read(&w)) _exit(12);
      p = static_cast<int32_t>(w);
    }
    if (!pipe.ReadSecret(&secrets[r])) _exit(15);
  }
  HostKvPool pool(layout, pool_pages);
  std::mt19937_64 rng(1234);
  std::vector<std::vector<int32_t>> src(n_requests);
  std::vector<int32_t> free_pages(pool_pages);
  for (int i = 0; i < pool_pages; ++i) free_pages[i] = i;
  std::shuffle(free_pages.begin(), free_pages.end(), rng);
  size_t next = 0;
  for (uint64_t r = 0; r < n_requests; ++r) {
    src[r].assign(free_pages.begin() + next, free_pages.begin() + next + dst[r].size());
    std::sort(src[r].begin(), src[r].end());
    next += dst[r].size();
    for (int l = 0; l < layout.n_layers; ++l)
      for (size_t i = 0; i < dst[r].size(); ++i)
        FillPage(pool.page(l, src[r][i]), layout.page_bytes(), ids[r], l, i);
  }
  TcpTransportOptions o;
  o.port = static_cast<uint16_t>(port);
  o.max_chunk_bytes = max_chunk_bytes;
  // These layers are small: splice them all the same, or copy them all.
  o.splice_min_layer_bytes = splice_payloads ? 0 : kNeverSplice;
  auto t = TcpTransport::Connect(layout, pool.const_bases(), pool_pages, o);
  if (!t.ok()) _exit(13);
  for (uint64_t r = 0; r < n_requests; ++r) {
    if (!(*t)->Open({ids[r], src[r], dst[r], Clock::now() + 60s, secrets[r]}).ok()) _exit(14);
  }
  if (stall_after_layers >= 0) {
    for (int l = 0; l < stall_after_layers; ++l) (void)(*t)->PushLayer(ids[0], l);
    pipe.Write(1);  // unused direction; the parent polls the receiver's state instead
    for (;;) pause();
  }
  std::atomic<int> failures{0};
  std::vector<std::thread> workers;
  for (int w = 0; w < threads; ++w) {
    workers.emplace_back([&, w] {
      for (uint64_t r = w; r < n_requests; r += threads) {
        for (int l = 0; l < layout.n_layers; ++l) {
          if (!(*t)->PushLayer(ids[r], l).ok()) ++failures;
        }
      }
      for (uint64_t r = w; r < n_requests; r += threads) {
        if (!(*t)->Wait(ids[r]).ok()) ++failures;
      }
    });
  }
  for (auto& w : workers) w.join();
  _exit(failures == 0 ? 0 : 20);
}

struct Shape {
  int layers;
  int pages_per_request;
  int requests;
  int pool_pages;
  size_t max_chunk_bytes;
  model::DType dtype;
  bool splice_payloads = true;     // false: payloads copied into the socket (sendmsg)
  bool offload_checksums = false;  // the listener checks CRCs on its worker pool
};

class TcpBitExact : public ::testing::TestWithParam<Shape> {};

TEST_P(TcpBitExact, RandomPagesArriveBitExactFromAnotherProcess) {
  const Shape s = GetParam();
  const KvLayout layout = SmallLayout(s.layers, s.dtype);
  WordPipe pipe;
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    RunSender(pipe, layout, s.pool_pages, 8, s.max_chunk_bytes, -1, s.splice_payloads);
  }

  HostKvPool recv(layout, s.pool_pages);
  {
    KvReceiver receiver(layout, recv.pool, recv.bases());
    TcpKvListenerOptions lo;
    lo.offload_tcp_checksums = s.offload_checksums;
    auto listener = TcpKvListener::Start(receiver, lo);
    ASSERT_TRUE(listener.ok()) << listener.status().ToString();
    // Fragment the receiver's free list so reservations are not one run.
    std::mt19937_64 rng(s.layers * 7919 + s.requests);
    auto all = recv.pool.Allocate(s.pool_pages);
    ASSERT_TRUE(all.ok());
    std::shuffle(all->begin(), all->end(), rng);
    recv.pool.Free(*all);
    pipe.Write((*listener)->port());
    pipe.Write(s.requests);
    std::vector<Reservation> reservations;
    for (int r = 0; r < s.requests; ++r) {
      auto res = receiver.Reserve(1000 + r, s.pages_per_request, Clock::now() + 60s);
      ASSERT_TRUE(res.ok()) << res.status().ToString();
      pipe.Write(res->request_id);
      pipe.Write(res->pages.size());
      for (int32_t p : res->pages) pipe.Write(static_cast<uint64_t>(p));
      pipe.WriteSecret(res->secret);
      reservations.push_back(*res);
    }
    for (const Reservation& res : reservations) {
      ASSERT_TRUE(receiver.Wait(res.request_id).ok()) << receiver.Wait(res.request_id).ToString();
      for (int l = 0; l < layout.n_layers; ++l) {
        for (size_t i = 0; i < res.pages.size(); ++i) {
          ASSERT_TRUE(
              PageMatches(recv.page(l, res.pages[i]), layout.page_bytes(), res.request_id, l, i))
              << "request " << res.request_id << " layer " << l << " page " << i;
        }
      }
      auto pages = receiver.TakePages(res.request_id);
      ASSERT_TRUE(pages.ok());
      recv.pool.Free(*pages);
    }
    EXPECT_EQ(WaitChild(child), 0);
  }
  EXPECT_EQ(recv.pool.used_pages(), 0);
}

INSTANTIATE_TEST_SUITE_P(Shapes, TcpBitExact,
                         ::testing::Values(Shape{1, 1, 1, 4, 8 << 20, model::DType::kF32},
                                           Shape{80, 40, 2, 96, 8 << 20, model::DType::kBF16},
                                           Shape{2, 10000, 1, 12000, 8 << 20, model::DType::kF32},
                                           Shape{3, 10000, 1, 10000, 4096, model::DType::kF16},
                                           Shape{4, 30, 64, 2048, 8 << 20, model::DType::kF32},
                                           Shape{4, 30, 64, 2048, 8 << 20, model::DType::kF32,
                                                 /*splice_payloads=*/false},
                                           // The listener in pool mode; these runs of pages are
                                           // short (both pools are shuffled), so each chunk's CRC
                                           // is taken in Finish on the I/O thread. The pool's own
                                           // spans: FlippedBitIsCaughtWhenTheWorkerPoolChecks...
                                           Shape{2, 10000, 1, 12000, 8 << 20, model::DType::kF32,
                                                 true, /*offload_checksums=*/true},
                                           Shape{4, 30, 64, 2048, 8 << 20, model::DType::kF32, true,
                                                 /*offload_checksums=*/true}));

TEST(TcpTransport, SenderKilledMidTransferFailsTheRequestAndFreesPages) {
  const KvLayout layout = SmallLayout(4);
  WordPipe pipe;
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) RunSender(pipe, layout, 64, 1, 8 << 20, /*stall_after_layers=*/2);
  HostKvPool recv(layout, 64);
  KvReceiver receiver(layout, recv.pool, recv.bases());
  auto listener = TcpKvListener::Start(receiver, {});
  ASSERT_TRUE(listener.ok());
  auto res = receiver.Reserve(7, 16, Clock::now() + 10s);
  ASSERT_TRUE(res.ok());
  pipe.Write((*listener)->port());
  pipe.Write(1);
  pipe.Write(7);
  pipe.Write(16);
  for (int32_t p : res->pages) pipe.Write(static_cast<uint64_t>(p));
  pipe.WriteSecret(res->secret);
  const auto give_up = Clock::now() + 10s;
  while (receiver.State(7) != TransferState::kReceiving && Clock::now() < give_up) {
    std::this_thread::sleep_for(2ms);
  }
  ASSERT_EQ(receiver.State(7), TransferState::kReceiving);
  const auto killed = Clock::now();
  ::kill(child, SIGKILL);
  Status s = receiver.Wait(7);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
  EXPECT_LT(Clock::now() - killed, 5s);  // peer loss, well before the 10 s deadline
  EXPECT_EQ(recv.pool.used_pages(), 0);
  WaitChild(child);
}

TEST(TcpTransport, ReceiverKilledFailsTheSendersRequest) {
  const KvLayout layout = SmallLayout(4);
  WordPipe pipe;
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    HostKvPool recv(layout, 64);
    KvReceiver receiver(layout, recv.pool, recv.bases());
    auto listener = TcpKvListener::Start(receiver, {});
    if (!listener.ok()) _exit(1);
    auto res = receiver.Reserve(9, 8, Clock::now() + 60s);
    if (!res.ok()) _exit(2);
    pipe.Write((*listener)->port());
    for (int32_t p : res->pages) pipe.Write(static_cast<uint64_t>(p));
    pipe.WriteSecret(res->secret);
    for (;;) pause();
  }
  uint64_t port = 0;
  ASSERT_TRUE(pipe.Read(&port));
  std::vector<int32_t> dst(8);
  for (auto& p : dst) {
    uint64_t w;
    ASSERT_TRUE(pipe.Read(&w));
    p = static_cast<int32_t>(w);
  }
  TransferSecret secret;
  ASSERT_TRUE(pipe.ReadSecret(&secret));
  HostKvPool send(layout, 64);
  TcpTransportOptions o;
  o.port = static_cast<uint16_t>(port);
  auto t = TcpTransport::Connect(layout, send.const_bases(), 64, o);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_TRUE((*t)->Open({9, {0, 1, 2, 3, 4, 5, 6, 7}, dst, Clock::now() + 10s, secret}).ok());
  ASSERT_TRUE((*t)->PushLayer(9, 0).ok());
  ::kill(child, SIGKILL);
  const auto killed = Clock::now();
  WaitChild(child);
  Status s = (*t)->Wait(9);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
  EXPECT_LT(Clock::now() - killed, 5s);
  EXPECT_FALSE((*t)->connected());
  EXPECT_EQ((*t)->Open({10, {0}, {0}, Clock::now() + 1s}).code(), StatusCode::kUnavailable);
}

// In one process from here on: the listener and the transport talk over loopback TCP.
struct LoopbackPair {
  explicit LoopbackPair(KvLayout sender_layout, TcpTransportOptions o = {},
                        TcpKvListenerOptions lo = {})
      : layout(SmallLayout(3)),
        send(sender_layout, 64),
        recv(layout, 64),
        receiver(layout, recv.pool, recv.bases()),
        listener(TcpKvListener::Start(receiver, lo).value()) {
    o.port = listener->port();
    connected = TcpTransport::Connect(sender_layout, send.const_bases(), 64, o);
  }
  KvLayout layout;
  HostKvPool send, recv;
  KvReceiver receiver;
  std::unique_ptr<TcpKvListener> listener;
  Result<std::unique_ptr<TcpTransport>> connected = Internal("not yet");
};

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
