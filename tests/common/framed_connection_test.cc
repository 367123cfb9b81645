#include "common/framed_connection.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tests/common/unanswered_port.h"

namespace pdserve {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;

// A loopback pair: an accepted server socket and a connected client socket.
struct Pair {
  asio::io_context io;
  tcp::socket server{io};
  tcp::socket client{io};
  Pair() {
    tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::address_v4::loopback(), 0));
    client.connect(acceptor.local_endpoint());
    acceptor.accept(server);
  }
};

TEST(FramedConnectionTest, MessagesArriveInOrderBothWays) {
  Pair p;
  auto a = FramedConnection::Create(std::move(p.server));
  auto b = FramedConnection::Create(std::move(p.client));
  std::vector<uint64_t> got;
  std::promise<void> done;
  a->Start(
      [&](proto::Envelope&& m) {
        got.push_back(m.cancel().request_id());
        if (got.size() == 100) {
          proto::Envelope reply;
          reply.mutable_register_reply()->set_accepted(true);
          a->Send(reply);
        }
      },
      [](const Status&) {});
  b->Start(
      [&](proto::Envelope&& m) {
        EXPECT_TRUE(m.register_reply().accepted());
        done.set_value();
      },
      [](const Status&) {});
  for (uint64_t i = 0; i < 100; ++i) {
    proto::Envelope m;
    m.mutable_cancel()->set_request_id(i);
    b->Send(m);
  }
  std::thread runner([&] { p.io.run_for(std::chrono::seconds(10)); });
  ASSERT_EQ(done.get_future().wait_for(std::chrono::seconds(10)), std::future_status::ready);
  a->Close(Status::Ok());
  b->Close(Status::Ok());
  runner.join();
  ASSERT_EQ(got.size(), 100u);
  for (uint64_t i = 0; i < 100; ++i) EXPECT_EQ(got[i], i);
}

Status ServeBytes(const std::string& bytes, size_t max_frame) {
  Pair p;
  auto a = FramedConnection::Create(std::move(p.server), max_frame);
  std::promise<Status> closed;
  bool got_message = false;
  a->Start([&](proto::Envelope&&) { got_message = true; },
           [&](const Status& s) { closed.set_value(s); });
  asio::write(p.client, asio::buffer(bytes));
  std::thread runner([&] { p.io.run_for(std::chrono::seconds(10)); });
  auto f = closed.get_future();
  EXPECT_EQ(f.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  p.io.stop();
  runner.join();
  EXPECT_FALSE(got_message);
  return f.get();
}

// CloseAfterFlush with messages still queued: the peer gets every one, then the end of the
// connection (a draining worker's last tokens, then its exit; before, the close never came and
// the worker waited out its 10 s bound).
// Frames as the wire may cut them: a byte at a time, many in one segment, one larger than a read.
TEST(FramedConnectionTest, FramesArriveWholeHoweverTheBytesAreCut) {
  std::vector<std::string> texts = {"a", "", std::string(1 << 20, 'x'), "b"};
  for (int i = 0; i < 200; ++i) texts.push_back("small " + std::to_string(i));
  std::string bytes;
  for (const std::string& text : texts) {
    proto::Envelope m;
    m.mutable_error()->set_message(text);
    const std::string body = m.SerializeAsString();
    const uint32_t n = static_cast<uint32_t>(body.size());
    bytes += {static_cast<char>(n >> 24), static_cast<char>(n >> 16), static_cast<char>(n >> 8),
              static_cast<char>(n)};
    bytes += body;
  }
  Pair p;
  auto a = FramedConnection::Create(std::move(p.server));
  std::vector<std::string> got;
  std::promise<void> done;
  a->Start(
      [&](proto::Envelope&& m) {
        got.push_back(m.error().message());
        if (got.size() == texts.size()) done.set_value();
      },
      [](const Status&) {});
  std::thread runner([&] { p.io.run_for(std::chrono::seconds(20)); });
  // The first frames a byte at a time, then the rest in segments of 100 KB.
  size_t at = 0;
  for (; at < 40; ++at) {
    asio::write(p.client, asio::buffer(bytes.data() + at, 1));
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  for (; at < bytes.size(); at += std::min<size_t>(100000, bytes.size() - at)) {
    asio::write(p.client,
                asio::buffer(bytes.data() + at, std::min<size_t>(100000, bytes.size() - at)));
  }
  ASSERT_EQ(done.get_future().wait_for(std::chrono::seconds(20)), std::future_status::ready);
  a->Close(Status::Ok());
  runner.join();
  EXPECT_EQ(got, texts);
}

TEST(FramedConnectionTest, CloseAfterFlushWritesWhatIsQueuedThenCloses) {
  Pair p;
  auto a = FramedConnection::Create(std::move(p.server));
  auto b = FramedConnection::Create(std::move(p.client));
  std::atomic<int> got{0};
  std::promise<Status> a_closed, b_closed;
  a->Start([](proto::Envelope&&) {}, [&](const Status& why) { a_closed.set_value(why); });
  b->Start([&](proto::Envelope&&) { ++got; }, [&](const Status& why) { b_closed.set_value(why); });
  proto::Envelope m;
  m.mutable_error()->set_message(std::string(64 << 10, 'x'));  // more than a socket buffer holds
  for (int i = 0; i < 100; ++i) a->Send(m);
  a->CloseAfterFlush(Status::Ok());
  std::thread runner([&] { p.io.run_for(std::chrono::seconds(10)); });
  auto closed = b_closed.get_future();
  ASSERT_EQ(closed.wait_for(std::chrono::seconds(5)), std::future_status::ready)
      << "the flushed connection was never closed";
  EXPECT_EQ(got, 100);
  auto mine = a_closed.get_future();
  ASSERT_EQ(mine.wait_for(std::chrono::seconds(1)), std::future_status::ready);
  EXPECT_TRUE(mine.get().ok());
  p.io.stop();
  runner.join();
}

// Sends from several threads at once, single and batched, to a slow reader (so that some are
// written at once by their thread and others wait on the strand behind a full socket buffer):
// every message arrives, and each thread's in the order it sent them.
TEST(FramedConnectionTest, SendsFromManyThreadsArriveInEachThreadsOrder) {
  Pair p;
  auto a = FramedConnection::Create(std::move(p.server));
  auto b = FramedConnection::Create(std::move(p.client));
  constexpr int kThreads = 4, kPerThread = 600;
  std::mutex mu;
  std::vector<std::vector<uint64_t>> got(kThreads);
  std::promise<void> all;
  int total = 0;
  a->Start([](proto::Envelope&&) {}, [](const Status&) {});
  b->Start(
      [&](proto::Envelope&& m) {
        std::lock_guard lock(mu);
        got[m.error().request_id() >> 32].push_back(m.error().request_id() & 0xffffffff);
        if (++total == kThreads * kPerThread) all.set_value();
        // A slow reader: the socket buffer fills and drains again and again while they send.
        if (total % 64 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      },
      [](const Status&) {});
  std::thread runner([&] {
    auto guard = asio::make_work_guard(p.io);
    p.io.run_for(std::chrono::seconds(20));
  });
  std::vector<std::thread> senders;
  for (int t = 0; t < kThreads; ++t) {
    senders.emplace_back([&, t] {
      std::vector<proto::Envelope> batch;
      for (int i = 0; i < kPerThread; ++i) {
        proto::Envelope m;
        m.mutable_error()->set_request_id(static_cast<uint64_t>(t) << 32 | i);
        m.mutable_error()->set_message(std::string(4 << 10, 'x'));
        if (i % 3 == 0) {
          a->Send(m);
        } else {
          batch.push_back(std::move(m));
          if (batch.size() == 2) {
            a->SendAll(batch);
            batch.clear();
          }
        }
      }
      if (!batch.empty()) a->SendAll(batch);
    });
  }
  for (auto& s : senders) s.join();  // 9.6 MB: more than the socket buffers hold
  const bool arrived =
      all.get_future().wait_for(std::chrono::seconds(15)) == std::future_status::ready;
  a->Close(Status::Ok());
  b->Close(Status::Ok());
  p.io.stop();
  runner.join();
  ASSERT_TRUE(arrived) << total << " of " << kThreads * kPerThread << " arrived";
  for (int t = 0; t < kThreads; ++t) {
    ASSERT_EQ(got[t].size(), static_cast<size_t>(kPerThread));
    for (int i = 0; i < kPerThread; ++i) ASSERT_EQ(got[t][i], static_cast<uint64_t>(i)) << t;
  }
}

// A peer that reads nothing while more than max_queued_bytes waits closes the connection, and
// says why.
TEST(FramedConnectionTest, APeerThatDoesNotReadIsClosedWithAClearReason) {
  Pair p;
  auto a = FramedConnection::Create(std::move(p.server), 64 << 20, /*max_queued_bytes=*/1 << 20);
  std::promise<Status> closed;
  a->Start([](proto::Envelope&&) {}, [&](const Status& why) { closed.set_value(why); });
  std::thread runner([&] {
    auto guard = asio::make_work_guard(p.io);
    p.io.run_for(std::chrono::seconds(10));
  });
  proto::Envelope m;
  m.mutable_error()->set_message(std::string(64 << 10, 'x'));
  for (int i = 0; i < 200; ++i) a->Send(m);  // 12.8 MB: more than buffers and the limit
  auto f = closed.get_future();
  ASSERT_EQ(f.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  const Status why = f.get();
  EXPECT_EQ(why.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(why.message().find("is not reading"), std::string::npos) << why.message();
  p.io.stop();
  runner.join();
}

TEST(FramedConnectionTest, OversizedFrameClosesWithAClearReason) {
  Status s = ServeBytes(std::string("\x7f\xff\xff\xff", 4), 1 << 20);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("exceeds the limit"), std::string::npos) << s.message();
}

TEST(FramedConnectionTest, GarbageClosesWithAClearReason) {
  Status s = ServeBytes(std::string("\x00\x00\x00\x04\xff\xff\xff\xff", 8), 1 << 20);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("unparseable"), std::string::npos) << s.message();
}

// DialTcp connects to a listener and keeps trying a port nobody listens on until its timeout.
TEST(FramedConnectionTest, DialTcpConnectsAndRetriesUntilItsTimeout) {
  using Clock = std::chrono::steady_clock;
  asio::io_context io;
  tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::address_v4::loopback(), 0));
  auto dialled =
      DialTcp(io, "127.0.0.1", acceptor.local_endpoint().port(), std::chrono::milliseconds(2000));
  ASSERT_TRUE(dialled.ok()) << dialled.status().ToString();
  EXPECT_EQ(dialled->remote_endpoint().port(), acceptor.local_endpoint().port());
  EXPECT_FALSE(dialled->non_blocking());  // as Asio's own blocking connect leaves it

  const uint16_t closed_port = acceptor.local_endpoint().port();
  acceptor.close();
  auto start = Clock::now();
  auto refused = DialTcp(io, "127.0.0.1", closed_port, std::chrono::milliseconds(500));
  EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable);
  EXPECT_GE(Clock::now() - start, std::chrono::milliseconds(450));  // tried again meanwhile
  EXPECT_LT(Clock::now() - start, std::chrono::milliseconds(1500));
}

// DialTcp gives up on time on an address that never answers (a dropped SYN would hold a
// blocking connect for minutes). Where the kernel answers a full accept queue instead, there is
// no such address to dial: skipped, saying so.
TEST(FramedConnectionTest, DialTcpGivesUpOnTimeOnAPeerThatNeverAnswers) {
  using Clock = std::chrono::steady_clock;
  asio::io_context io;
  testing::UnansweredPort silent;  // a peer that never answers
  if (!silent.unanswered()) {
    GTEST_SKIP() << "this kernel answers a full accept queue instead of dropping the SYN";
  }
  const auto start = Clock::now();
  auto unanswered = DialTcp(io, "127.0.0.1", silent.port(), std::chrono::milliseconds(500));
  EXPECT_EQ(unanswered.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(unanswered.status().message().find("timed out"), std::string::npos)
      << unanswered.status().ToString();
  EXPECT_LT(Clock::now() - start, std::chrono::milliseconds(1500));
}

}  // namespace
}  // namespace pdserve
