// The TCP transport between two real processes (fork) on loopback: bit-exact delivery over
// many layers, pages and concurrent requests, copied or spliced; a killed sender or receiver.
// After each test the receiver's used pages are zero. In one process over loopback:
// tcp_transport_checksum_test.cc (flipped bits, CRCs on worker pools) and
// tcp_transport_refusal_test.cc (what either end refuses or fails).
#include "kv_transfer/tcp_transport.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <random>
#include <thread>

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
                                           // spans: tcp_transport_checksum_test.cc.
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

}  // namespace
}  // namespace pdserve::kv_transfer
