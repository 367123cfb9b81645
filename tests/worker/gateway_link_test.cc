// GatewayLink against a gateway stand-in on loopback: registration, the keepalive that repeats
// the last Load while the worker's engine thread is busy, and dialling again after a loss.
#include "worker/gateway_link.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <future>
#include <thread>
#include <vector>

#include "tests/eventually.h"
#include "tests/fakes/fake_gateway.h"

namespace pdserve::worker {
namespace {

using pdserve::testing::Eventually;

namespace asio = boost::asio;
using asio::ip::tcp;
using namespace std::chrono_literals;
using testing::FakeGateway;

GatewayLinkOptions OptionsFor(const FakeGateway& gateway, std::chrono::milliseconds keepalive,
                              std::chrono::milliseconds silence = 0ms) {
  GatewayLinkOptions o;
  o.port = gateway.port();
  o.keepalive = keepalive;
  o.silence_timeout = silence;  // the fake sends no heartbeats unless a test turns them on
  return o;
}

proto::Envelope Load(int free_pages) {
  proto::Envelope m;
  m.mutable_load()->set_free_pages(free_pages);
  return m;
}

TEST(GatewayLinkTest, RepeatsTheLastLoadWhileTheWorkerSendsNothing) {
  FakeGateway gateway;
  proto::Register hello;
  hello.set_role("decode");
  auto link = GatewayLink::Connect(OptionsFor(gateway, 100ms), hello);
  ASSERT_TRUE(link.ok()) << link.status().ToString();
  std::this_thread::sleep_for(300ms);
  EXPECT_TRUE(gateway.loads().empty());  // no Load yet: nothing to repeat
  (*link)->Send(Load(7));
  std::this_thread::sleep_for(1s);  // the engine thread "in a long step"
  const std::vector<int> first = gateway.loads();
  EXPECT_GE(first.size(), 4u);  // the Load, then about one repeat every 100 ms
  for (int pages : first) EXPECT_EQ(pages, 7);
  (*link)->Send(Load(9));
  std::this_thread::sleep_for(500ms);
  const std::vector<int> later = gateway.loads();
  ASSERT_GT(later.size(), first.size() + 1);
  // A repeat of 7 sent just before the 9 may still arrive after `first` was read; none may
  // arrive after the 9.
  const auto newest = std::find(later.begin(), later.end(), 9);
  ASSERT_NE(newest, later.end());
  EXPECT_GE(later.end() - newest, 2);  // the 9, then at least one repeat of it
  for (auto it = later.begin(); it != newest; ++it) EXPECT_EQ(*it, 7);
  for (auto it = newest; it != later.end(); ++it) EXPECT_EQ(*it, 9);  // never older
}

TEST(GatewayLinkTest, RepeatsNothingWhileTheWorkerKeepsSending) {
  FakeGateway gateway;
  // A keepalive far past the 100 ms between sends, even on a loaded machine.
  auto link = GatewayLink::Connect(OptionsFor(gateway, 1000ms), proto::Register());
  ASSERT_TRUE(link.ok()) << link.status().ToString();
  for (int i = 0; i < 10; ++i) {  // a heartbeat every 100 ms, as an idle worker sends them
    (*link)->Send(Load(i));
    std::this_thread::sleep_for(100ms);
  }
  std::this_thread::sleep_for(100ms);
  const std::vector<int> loads = gateway.loads();
  ASSERT_EQ(loads.size(), 10u);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(loads[i], i);
}

TEST(GatewayLinkTest, HeldSendsWaitForTheFlushAndOtherThreadsSendAtOnce) {
  FakeGateway gateway;
  auto link = GatewayLink::Connect(OptionsFor(gateway, 0ms), proto::Register());
  ASSERT_TRUE(link.ok()) << link.status().ToString();
  (*link)->HoldSends();
  (*link)->Send(Load(1));
  (*link)->Send(Load(2));
  std::thread([&] { (*link)->Send(Load(3)); }).join();  // not the holding thread: at once
  ASSERT_TRUE(Eventually([&] { return gateway.loads().size() == 1; }));
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(gateway.loads(), std::vector<int>({3}));  // the held two wait
  (*link)->FlushSends();
  ASSERT_TRUE(Eventually([&] { return gateway.loads().size() == 3; }));
  EXPECT_EQ(gateway.loads(), std::vector<int>({3, 1, 2}));  // in the order they were sent
  (*link)->Send(Load(4));                                   // still held
  (*link)->ReleaseSends();                                  // flushes, and ends the holding
  (*link)->Send(Load(5));
  ASSERT_TRUE(Eventually([&] { return gateway.loads().size() == 5; }));
  EXPECT_EQ(gateway.loads(), std::vector<int>({3, 1, 2, 4, 5}));
}

// Waits until the link knows it is lost, leaving its inbox as it is.
bool WaitUntilLost(GatewayLink& link) {
  return Eventually([&] { return !link.LostStatus().ok(); });
}

TEST(GatewayLinkTest, ReconnectRegistersAgainAndDropsWhatTheLostConnectionLeft) {
  FakeGateway gateway;
  auto link = GatewayLink::Connect(OptionsFor(gateway, 100ms), proto::Register());
  ASSERT_TRUE(link.ok()) << link.status().ToString();
  (*link)->Send(Load(5));
  ASSERT_TRUE(Eventually([&] { return (*link)->registered(); }));
  proto::Envelope stale;
  stale.mutable_cancel()->set_request_id(42);
  gateway.Send(stale);  // queued for the engine thread, which has not taken it yet
  std::this_thread::sleep_for(100ms);
  gateway.Drop();
  ASSERT_TRUE(WaitUntilLost(**link));
  EXPECT_FALSE((*link)->LostStatus().ok());
  const size_t loads_before = gateway.loads().size();

  Status again = (*link)->Reconnect(std::chrono::steady_clock::now() + 10s, [] { return false; });
  ASSERT_TRUE(again.ok()) << again.ToString();
  EXPECT_TRUE((*link)->LostStatus().ok());
  EXPECT_TRUE(Eventually([&] { return gateway.registers() == 2; }));
  EXPECT_TRUE(Eventually([&] { return (*link)->registered(); }));
  // Nothing of the lost connection: neither the Cancel it left unread nor its last Load.
  std::deque<proto::Envelope> inbox;
  EXPECT_TRUE((*link)->WaitForMessages(&inbox, std::chrono::steady_clock::now() + 300ms));
  EXPECT_TRUE(inbox.empty());
  EXPECT_EQ(gateway.loads().size(), loads_before);
  (*link)->Send(Load(6));  // the new connection carries what the worker sends now
  ASSERT_TRUE(Eventually([&] { return gateway.loads().size() > loads_before; }));
  EXPECT_EQ(gateway.loads().back(), 6);
}

TEST(GatewayLinkTest, ReconnectGivesUpAtItsDeadlineOrWhenStopped) {
  auto gateway = std::make_unique<FakeGateway>();
  auto link = GatewayLink::Connect(OptionsFor(*gateway, 1000ms), proto::Register());
  ASSERT_TRUE(link.ok()) << link.status().ToString();
  gateway.reset();  // gone, and nobody listens on its port
  ASSERT_TRUE(WaitUntilLost(**link));
  auto start = std::chrono::steady_clock::now();
  Status s = (*link)->Reconnect(start + 1500ms, [] { return false; });
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
  EXPECT_GE(std::chrono::steady_clock::now() - start, 1400ms);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  start = std::chrono::steady_clock::now();
  s = (*link)->Reconnect(start + 60s, [] { return true; });  // a drain arrived
  EXPECT_FALSE(s.ok());
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
}

TEST(GatewayLinkTest, ARefusedRegistrationIsNotDialledAgain) {
  FakeGateway gateway(/*refuse=*/true);
  auto link = GatewayLink::Connect(OptionsFor(gateway, 1000ms), proto::Register());
  ASSERT_TRUE(link.ok()) << link.status().ToString();
  ASSERT_TRUE(WaitUntilLost(**link));
  const auto start = std::chrono::steady_clock::now();
  Status s = (*link)->Reconnect(start + 10s, [] { return false; });
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s.ToString();
  EXPECT_NE(s.message().find("wrong cluster token"), std::string::npos) << s.message();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1s);
  EXPECT_EQ(gateway.registers(), 1);
}

// A gateway that stops sending (frozen, or behind a network that drops packets) while its
// connection stays open is lost once its silence passes the timeout; one that keeps sending
// heartbeats is not, and the heartbeats never reach the engine thread.
TEST(GatewayLinkTest, AGatewayThatGoesSilentIsLost) {
  FakeGateway gateway;
  gateway.SetHeartbeats(true);
  auto link =
      GatewayLink::Connect(OptionsFor(gateway, 1000ms, /*silence=*/400ms), proto::Register());
  ASSERT_TRUE(link.ok()) << link.status().ToString();
  std::deque<proto::Envelope> inbox;
  const auto alive_until = std::chrono::steady_clock::now() + 1500ms;
  while (std::chrono::steady_clock::now() < alive_until) {
    ASSERT_TRUE((*link)->WaitForMessages(&inbox, alive_until)) << (*link)->LostStatus().ToString();
  }
  EXPECT_TRUE(inbox.empty()) << inbox.size() << " messages, the first " << inbox[0].DebugString();
  EXPECT_TRUE((*link)->LostStatus().ok());
  EXPECT_TRUE((*link)->registered());

  gateway.SetHeartbeats(false);  // the connection stays open; nothing more arrives
  const auto silent_since = std::chrono::steady_clock::now();
  ASSERT_TRUE(WaitUntilLost(**link));
  EXPECT_GE(std::chrono::steady_clock::now() - silent_since, 300ms);
  EXPECT_LT(std::chrono::steady_clock::now() - silent_since, 5s);
  const Status lost = (*link)->LostStatus();
  EXPECT_EQ(lost.code(), StatusCode::kDeadlineExceeded) << lost.ToString();
  EXPECT_NE(lost.message().find("sent nothing for 400 ms"), std::string::npos) << lost.message();

  // Dialling again finds the same gateway, which registers the link anew.
  gateway.SetHeartbeats(true);
  Status again = (*link)->Reconnect(std::chrono::steady_clock::now() + 10s, [] { return false; });
  ASSERT_TRUE(again.ok()) << again.ToString();
  EXPECT_TRUE(Eventually([&] { return gateway.registers() == 2; }));
}

// A link with no silence timeout (0) waits on a quiet gateway for as long as its connection is
// open.
TEST(GatewayLinkTest, NoSilenceTimeoutWaitsOnAQuietGateway) {
  FakeGateway gateway;
  auto link = GatewayLink::Connect(OptionsFor(gateway, 100ms, /*silence=*/0ms), proto::Register());
  ASSERT_TRUE(link.ok()) << link.status().ToString();
  std::this_thread::sleep_for(800ms);
  EXPECT_TRUE((*link)->LostStatus().ok()) << (*link)->LostStatus().ToString();
}

// Liveness is the engine thread's progress, not a live socket: while the engine thread turns
// (MarkProgress) the keepalive repeats the last Load; once it has not turned for the stall
// timeout the repeats stop, so that the gateway drops a worker stuck in a step; they resume
// when it turns again.
TEST(GatewayLinkTest, AnEngineThreadThatStopsTurningStopsTheKeepalive) {
  FakeGateway gateway;
  GatewayLinkOptions o = OptionsFor(gateway, 50ms);
  o.stall_timeout = 500ms;
  auto link = GatewayLink::Connect(o, proto::Register());
  ASSERT_TRUE(link.ok()) << link.status().ToString();
  (*link)->Send(Load(3));
  for (int i = 0; i < 10; ++i) {  // turning: 1 s of repeats
    (*link)->MarkProgress();
    std::this_thread::sleep_for(100ms);
  }
  const size_t turning = gateway.loads().size();
  EXPECT_GE(turning, 8u);
  std::this_thread::sleep_for(1s);  // stuck: repeats for the stall timeout at most, then none
  const size_t stuck = gateway.loads().size();
  EXPECT_LE(stuck - turning, 14u);
  std::this_thread::sleep_for(500ms);
  EXPECT_EQ(gateway.loads().size(), stuck) << "repeats went on for a stuck engine thread";
  (*link)->MarkProgress();
  EXPECT_TRUE(Eventually([&] { return gateway.loads().size() > stuck; }));
}

TEST(GatewayLinkTest, DeadlinesFromTheGatewayDefaultAndAreBounded) {
  const auto now = std::chrono::steady_clock::now();
  auto given = DeadlineFromGateway(5);
  ASSERT_TRUE(given.ok());
  EXPECT_GE(*given, now + 5s);
  EXPECT_LT(*given, now + 6s);
  auto none = DeadlineFromGateway(0);  // none given: 30 s
  ASSERT_TRUE(none.ok());
  EXPECT_GE(*none, now + 30s);
  EXPECT_LT(*none, now + 31s);
  for (double bad : {std::nan(""), static_cast<double>(INFINITY), 1e300, 86401.0}) {
    auto d = DeadlineFromGateway(bad);
    ASSERT_FALSE(d.ok()) << bad;
    EXPECT_NE(d.status().message().find("at most a day"), std::string::npos);
  }
}

}  // namespace
}  // namespace pdserve::worker
