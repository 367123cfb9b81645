// GatewayLink with several gateways (stand-ins on loopback): it registers with each, answers a
// request to the gateway that sent it and reports load to all; a lost gateway's requests are
// cancelled at once while the others are served, and it is dialled again in the background.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <thread>
#include <vector>

#include "tests/eventually.h"
#include "tests/fakes/fake_gateway.h"
#include "worker/gateway_link.h"

namespace pdserve::worker {
namespace {

using pdserve::testing::Eventually;
using testing::FakeGateway;
using namespace std::chrono_literals;

GatewayLinkOptions Both(const FakeGateway& a, uint16_t b_port) {
  GatewayLinkOptions o;
  o.port = a.port();
  o.more_gateways = {{"127.0.0.1", b_port}};
  o.keepalive = 0ms;
  o.silence_timeout = 0ms;
  return o;
}

proto::Envelope Generate(uint64_t id, int n = 1) {
  proto::Envelope m;
  m.mutable_generate()->set_request_id(id);
  m.mutable_generate()->mutable_sampling()->set_n(n);
  return m;
}

proto::Envelope Tokens(uint64_t id, const std::string& finish = "") {
  proto::Envelope m;
  m.mutable_tokens()->set_request_id(id);
  m.mutable_tokens()->add_tokens(7);
  m.mutable_tokens()->set_finish_reason(finish);
  return m;
}

// The request ids of the TokenBatches a gateway got.
std::vector<uint64_t> TokenIds(FakeGateway& g) {
  std::vector<uint64_t> ids;
  for (const auto& m : g.messages()) {
    if (m.has_tokens()) ids.push_back(m.tokens().request_id());
  }
  return ids;
}

// The engine thread's side: what the link queued, waited for up to 2 s.
std::vector<proto::Envelope> Take(GatewayLink& link, size_t n) {
  std::vector<proto::Envelope> got;
  const auto end = std::chrono::steady_clock::now() + 2s;
  while (got.size() < n && std::chrono::steady_clock::now() < end) {
    std::deque<proto::Envelope> inbox;
    link.WaitForMessages(&inbox, std::chrono::steady_clock::now() + 100ms);
    got.insert(got.end(), inbox.begin(), inbox.end());
  }
  return got;
}

TEST(GatewayLinkSeveralTest, AnswersEachRequestToItsGatewayAndReportsLoadToAll) {
  FakeGateway a, b;
  auto link = GatewayLink::Connect(Both(a, b.port()), proto::Register());
  ASSERT_TRUE(link.ok()) << link.status().ToString();
  EXPECT_EQ((*link)->gateways(), 2u);
  ASSERT_TRUE(Eventually([&] { return a.registers() == 1 && b.registers() == 1; }));
  a.Send(Generate(1));
  b.Send(Generate(2, /*n=*/2));
  ASSERT_EQ(Take(**link, 2).size(), 2u);
  proto::Envelope load;
  load.mutable_load()->set_free_pages(9);
  (*link)->HoldSends();  // as the engine thread's turn: held, then flushed per gateway
  (*link)->Send(load);
  (*link)->Send(Tokens(1));
  (*link)->Send(Tokens(2, "stop"));  // one of its two choices ends: it still goes to b
  (*link)->Send(Tokens(2, "length"));
  (*link)->Send(Tokens(1, "stop"));
  (*link)->ReleaseSends();
  (*link)->Send(Tokens(2));  // after every choice ended: to no gateway
  ASSERT_TRUE(Eventually([&] { return TokenIds(a).size() == 2 && TokenIds(b).size() == 2; }));
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(TokenIds(a), (std::vector<uint64_t>{1, 1}));
  EXPECT_EQ(TokenIds(b), (std::vector<uint64_t>{2, 2}));
  EXPECT_EQ(a.loads(), std::vector<int>{9});
  EXPECT_EQ(b.loads(), std::vector<int>{9});
}

TEST(GatewayLinkSeveralTest, ALostGatewaysRequestsAreCancelledWhileTheOtherIsServed) {
  FakeGateway b;
  auto a = std::make_unique<FakeGateway>();
  auto link = GatewayLink::Connect(Both(*a, b.port()), proto::Register());
  ASSERT_TRUE(link.ok()) << link.status().ToString();
  ASSERT_TRUE(Eventually([&] { return a->registers() == 1 && b.registers() == 1; }));
  a->Send(Generate(10));
  a->Send(Generate(11));
  b.Send(Generate(20));
  ASSERT_EQ(Take(**link, 3).size(), 3u);
  const uint16_t a_port = a->port();
  a.reset();  // gateway a dies: its port closes
  const auto cancels = Take(**link, 2);
  std::vector<uint64_t> cancelled;
  for (const auto& m : cancels) {
    if (m.has_cancel()) cancelled.push_back(m.cancel().request_id());
  }
  std::sort(cancelled.begin(), cancelled.end());
  EXPECT_EQ(cancelled, (std::vector<uint64_t>{10, 11}));
  EXPECT_TRUE((*link)->LostStatus().ok()) << "one gateway of two lost the whole link";
  EXPECT_EQ((*link)->connected(), 1u);
  (*link)->Send(Tokens(10, "cancelled"));  // the cancelled request's end: to no gateway
  (*link)->Send(Tokens(20));
  ASSERT_TRUE(Eventually([&] { return TokenIds(b).size() == 1; }));
  EXPECT_EQ(TokenIds(b), std::vector<uint64_t>{20});

  // It comes back on its port: the link registers with it again, in the background.
  FakeGateway again(false, a_port);
  ASSERT_TRUE(Eventually([&] { return again.registers() == 1; }, 10s));
  ASSERT_TRUE(Eventually([&] { return (*link)->connected() == 2; }));
  again.Send(Generate(30));
  ASSERT_EQ(Take(**link, 1).size(), 1u);
  (*link)->Send(Tokens(30));
  ASSERT_TRUE(Eventually([&] { return TokenIds(again).size() == 1; }));
}

TEST(GatewayLinkSeveralTest, OnlyWhenEveryGatewayIsLostIsTheLinkLostAndReconnectMendsIt) {
  auto a = std::make_unique<FakeGateway>();
  auto b = std::make_unique<FakeGateway>();
  const uint16_t a_port = a->port();
  auto link = GatewayLink::Connect(Both(*a, b->port()), proto::Register());
  ASSERT_TRUE(link.ok()) << link.status().ToString();
  ASSERT_TRUE(Eventually([&] { return (*link)->connected() == 2; }));
  a.reset();
  ASSERT_TRUE(Eventually([&] { return (*link)->connected() == 1; }));
  EXPECT_TRUE((*link)->LostStatus().ok());
  b.reset();
  ASSERT_TRUE(Eventually([&] { return !(*link)->LostStatus().ok(); }));
  FakeGateway back(false, a_port);
  Status s = (*link)->Reconnect(std::chrono::steady_clock::now() + 10s, [] { return false; });
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE((*link)->LostStatus().ok());
  EXPECT_TRUE(Eventually([&] { return back.registers() == 1; }));
}

TEST(GatewayLinkSeveralTest, OneGatewayDownAtStartIsDialledOnceTheOtherAnswers) {
  FakeGateway a;
  uint16_t b_port;
  {
    FakeGateway probe;  // a free port, closed again
    b_port = probe.port();
  }
  auto link = GatewayLink::Connect(Both(a, b_port), proto::Register());
  ASSERT_TRUE(link.ok()) << link.status().ToString();
  EXPECT_EQ((*link)->connected(), 1u);
  FakeGateway b(false, b_port);
  ASSERT_TRUE(Eventually([&] { return b.registers() == 1; }, 10s));
}

}  // namespace
}  // namespace pdserve::worker
