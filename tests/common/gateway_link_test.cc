// GatewayLink against a gateway stand-in on loopback: registration, and the keepalive that
// repeats the last Load while the worker's engine thread is busy.
#include "common/gateway_link.h"

#include <gtest/gtest.h>

#include <cmath>
#include <future>
#include <thread>
#include <vector>

namespace pdserve {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;
using namespace std::chrono_literals;

// Accepts one worker, accepts its Register, and records the free_pages of every Load.
class FakeGateway {
 public:
  FakeGateway() : acceptor_(io_, tcp::endpoint(asio::ip::address_v4::loopback(), 0)) {
    acceptor_.async_accept([this](const boost::system::error_code& ec, tcp::socket socket) {
      if (ec) return;
      conn_ = FramedConnection::Create(std::move(socket));
      conn_->Start(
          [this](proto::Envelope&& m) {
            if (m.has_register_()) {
              proto::Envelope reply;
              reply.mutable_register_reply()->set_accepted(true);
              reply.mutable_register_reply()->set_worker_id(1);
              conn_->Send(reply);
            } else if (m.has_load()) {
              std::lock_guard lock(mu_);
              loads_.push_back(m.load().free_pages());
            }
          },
          [](const Status&) {});
    });
    thread_ = std::thread([this] { io_.run(); });
  }
  ~FakeGateway() {
    io_.stop();
    thread_.join();
  }
  uint16_t port() const { return acceptor_.local_endpoint().port(); }
  std::vector<int> loads() {
    std::lock_guard lock(mu_);
    return loads_;
  }

 private:
  asio::io_context io_;
  tcp::acceptor acceptor_;
  std::shared_ptr<FramedConnection> conn_;
  std::thread thread_;
  std::mutex mu_;
  std::vector<int> loads_;
};

proto::Envelope Load(int free_pages) {
  proto::Envelope m;
  m.mutable_load()->set_free_pages(free_pages);
  return m;
}

TEST(GatewayLinkTest, RepeatsTheLastLoadWhileTheWorkerSendsNothing) {
  FakeGateway gateway;
  GatewayLinkOptions o;
  o.port = gateway.port();
  o.keepalive = 100ms;
  proto::Register hello;
  hello.set_role("decode");
  auto link = GatewayLink::Connect(o, hello);
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
  for (size_t i = first.size(); i < later.size(); ++i) EXPECT_EQ(later[i], 9);  // never older
}

TEST(GatewayLinkTest, RepeatsNothingWhileTheWorkerKeepsSending) {
  FakeGateway gateway;
  GatewayLinkOptions o;
  o.port = gateway.port();
  o.keepalive = 1000ms;  // far past the 100 ms between sends, even on a loaded machine
  auto link = GatewayLink::Connect(o, proto::Register());
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
}  // namespace pdserve
