// The serve loop both workers run, against a gateway stood in for on loopback: Loads while idle,
// the gateway's messages to the role's handler, a drain that finishes and closes, a lost gateway,
// and the reconnect around it.
#include "worker/serve_loop.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "tests/eventually.h"
#include "tests/fakes/fake_gateway.h"

namespace pdserve::worker {
namespace {

using pdserve::testing::Eventually;

using namespace std::chrono_literals;
using testing::FakeGateway;

std::unique_ptr<GatewayLink> Connect(const FakeGateway& gateway) {
  GatewayLinkOptions o;
  o.port = gateway.port();
  o.keepalive = 0ms;        // only the loop's own Loads reach the gateway
  o.silence_timeout = 0ms;  // the fake sends no heartbeats
  auto link = GatewayLink::Connect(o, proto::Register());
  EXPECT_TRUE(link.ok()) << link.status().ToString();
  return link.ok() ? std::move(*link) : nullptr;
}

// A role that counts what the loop asks of it; its Loads carry a running number.
struct CountingRole {
  GatewayLink* link = nullptr;
  std::atomic<int> loads{0}, handled{0}, works{0}, announced{0};
  std::atomic<bool> busy{false}, drained{false};
  ServeTurn Turn() {
    ServeTurn t;
    t.handle = [this](proto::Envelope& m) { handled += m.has_cancel() ? 1 : 0; };
    t.busy = [this] { return busy.load(); };
    t.work = [this] { ++works; };
    t.drained = [this] { return drained.load(); };
    t.send_load = [this] {
      proto::Envelope m;
      m.mutable_load()->set_free_pages(++loads);
      link->Send(m);
    };
    t.announce_drain = [this] { ++announced; };
    return t;
  }
};

TEST(ServeLoopTest, AnIdleWorkerSendsLoadsHandlesMessagesAndDrainsWhenDone) {
  FakeGateway gateway;
  auto link = Connect(gateway);
  ASSERT_TRUE(link);
  CountingRole role;
  role.link = link.get();
  std::atomic<bool> draining{false};
  Status served;
  std::thread loop([&] { served = ServeUntilDrainedOrLost(*link, 0.1, draining, role.Turn()); });
  ASSERT_TRUE(Eventually([&] { return gateway.loads().size() >= 5; }))
      << "a Load every 0.1 s while idle";
  proto::Envelope cancel;
  cancel.mutable_cancel()->set_request_id(9);
  gateway.Send(cancel);
  ASSERT_TRUE(Eventually([&] { return role.handled == 1; }));

  draining = true;
  link->Wake();
  std::this_thread::sleep_for(300ms);  // not drained yet: the loop goes on
  EXPECT_EQ(role.announced, 1);
  EXPECT_TRUE(loop.joinable());
  const int loads_before_end = role.loads;
  role.drained = true;
  link->Wake();
  loop.join();
  EXPECT_TRUE(served.ok()) << served.ToString();
  EXPECT_EQ(role.announced, 1);
  EXPECT_GT(role.loads, loads_before_end) << "a last Load before closing";
  // Flushed before the close: the gateway has every Load, the last one last.
  ASSERT_TRUE(Eventually([&] { return static_cast<int>(gateway.loads().size()) == role.loads; }));
  EXPECT_EQ(gateway.loads().back(), role.loads.load());
}

TEST(ServeLoopTest, ABusyWorkerTurnsWithoutWaitingAndALostGatewayEndsTheLoop) {
  FakeGateway gateway;
  auto link = Connect(gateway);
  ASSERT_TRUE(link);
  CountingRole role;
  role.link = link.get();
  role.busy = true;
  std::atomic<bool> draining{false};
  Status served;
  std::thread loop([&] { served = ServeUntilDrainedOrLost(*link, 10, draining, role.Turn()); });
  // A 10 s heartbeat: only a loop that does not wait turns this often.
  EXPECT_TRUE(Eventually([&] { return role.works > 1000; })) << role.works;
  gateway.Drop();
  loop.join();
  EXPECT_FALSE(served.ok());
  EXPECT_EQ(served.code(), StatusCode::kUnavailable) << served.ToString();
  EXPECT_EQ(role.announced, 0);
}

TEST(ServeLoopTest, ServeWithReconnectsAbandonsTheLostGatewaysRequestsAndServesAgain) {
  FakeGateway gateway;
  auto link = Connect(gateway);
  ASSERT_TRUE(link);
  ASSERT_TRUE(Eventually([&] { return gateway.registers() == 1; }));
  int serves = 0, abandons = 0;
  auto serve = [&]() -> Status {
    if (++serves == 1) {  // the first connection is lost under it
      gateway.Drop();
      std::deque<proto::Envelope> inbox;
      while (link->WaitForMessages(&inbox, std::chrono::steady_clock::now() + 100ms)) {
      }
      return link->LostStatus();
    }
    return Status::Ok();  // drained on the second
  };
  Status s = ServeWithReconnects(
      *link, 10, serve, [&] { ++abandons; }, [] { return false; });
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(serves, 2);
  EXPECT_EQ(abandons, 1);
  EXPECT_TRUE(Eventually([&] { return gateway.registers() == 2; }));

  // Without a reconnect window the loss ends it at once, and nothing is abandoned here: the
  // process exits with its requests.
  serves = abandons = 0;
  s = ServeWithReconnects(
      *link, 0, serve, [&] { ++abandons; }, [] { return false; });
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(serves, 1);
  EXPECT_EQ(abandons, 0);
}

// A worker started before its gateway (a pod whose gateway is still starting) dials again until
// the gateway is up; a name that does not resolve is dialled again too, and a stop ends it.
TEST(ServeLoopTest, TheFirstDialWaitsForAGatewayThatIsNotUpYet) {
  uint16_t port = 0;
  {
    FakeGateway probe;  // a free port, closed again
    port = probe.port();
  }
  GatewayLinkOptions o;
  o.port = port;
  o.connect_timeout = 300ms;  // each dial gives up soon: the loop, not one long dial, waits
  o.keepalive = 0ms;
  o.silence_timeout = 0ms;
  std::unique_ptr<FakeGateway> gateway;
  std::thread late([&] {
    std::this_thread::sleep_for(1500ms);
    gateway = std::make_unique<FakeGateway>(false, port);
  });
  auto link = DialFirst(o, proto::Register(), 30, [] { return false; });
  late.join();
  ASSERT_TRUE(link.ok()) << link.status().ToString();
  EXPECT_TRUE(Eventually([&] { return gateway->registers() == 1; }));

  // Without a window, one dial.
  o.host = "no-such-gateway.invalid";
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(DialFirst(o, proto::Register(), 0, [] { return false; }).status().code(),
            StatusCode::kUnavailable);
  // With one, it dials until stopped.
  std::atomic<bool> stop{false};
  std::thread stopper([&] {
    std::this_thread::sleep_for(1200ms);
    stop = true;
  });
  auto stopped = DialFirst(o, proto::Register(), 30, [&] { return stop.load(); });
  stopper.join();
  EXPECT_FALSE(stopped.ok());
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  // A bad address is not dialled again.
  o.port = 0;
  EXPECT_EQ(DialFirst(o, proto::Register(), 30, [] { return false; }).status().code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pdserve::worker
