// What a worker's Register must hold to join; that the registry routes through its Router with
// the workers' loads and sends what the route needs, against workers stood in for on loopback;
// and its Heartbeats. The rest of its traffic is covered end to end (tests/e2e).
#include "router/worker_registry.h"

#include <gtest/gtest.h>

#include <deque>
#include <future>
#include <limits>
#include <thread>

#include "tests/eventually.h"
#include "tests/fakes/fake_router.h"

namespace pdserve::gateway {
namespace {

using pdserve::testing::Eventually;

proto::Register Decode() {
  proto::Register r;
  r.set_role("decode");
  r.set_capacity_class("reserved");
  r.set_price_per_gpu_hour(2.5);
  r.set_gpu_count(1);
  r.set_kv_pages(512);
  r.set_page_size(16);
  r.set_max_context(4096);
  r.set_kv_endpoint("127.0.0.1:9000");
  r.set_model_id("tiny");
  r.set_layout_hash(42);
  return r;
}

TEST(WorkerRegistryTest, AcceptsAWellFormedWorker) {
  RegistryOptions o;
  o.model_id = "tiny";
  EXPECT_TRUE(CheckRegister(Decode(), o).ok()) << CheckRegister(Decode(), o).ToString();
  o.cluster_token = "secret";
  proto::Register r = Decode();
  r.set_cluster_token("secret");
  EXPECT_TRUE(CheckRegister(r, o).ok());
}

TEST(WorkerRegistryTest, RefusesFiguresNoWorkerCanHave) {
  RegistryOptions o;
  o.model_id = "tiny";
  struct Case {
    const char* what;
    void (*spoil)(proto::Register&);
    const char* says;
  };
  const Case cases[] = {
      {"token", [](proto::Register& r) { r.set_cluster_token("x"); }, "wrong cluster token"},
      {"model", [](proto::Register& r) { r.set_model_id("other"); }, "serves model 'tiny'"},
      {"role", [](proto::Register& r) { r.set_role("both2"); }, "unknown role"},
      {"endpoint", [](proto::Register& r) { r.clear_kv_endpoint(); }, "KV endpoint"},
      {"class", [](proto::Register& r) { r.set_capacity_class("spot"); }, "capacity class"},
      {"price", [](proto::Register& r) { r.set_price_per_gpu_hour(-1); }, "finite number"},
      {"nan price",
       [](proto::Register& r) {
         r.set_price_per_gpu_hour(std::numeric_limits<double>::quiet_NaN());
       },
       "finite number"},
      {"inf price",
       [](proto::Register& r) {
         r.set_price_per_gpu_hour(std::numeric_limits<double>::infinity());
       },
       "finite number"},
      {"gpus", [](proto::Register& r) { r.set_gpu_count(0); }, "GPU count"},
      {"pages", [](proto::Register& r) { r.set_kv_pages(-5); }, "KV pages and page size"},
      {"page size", [](proto::Register& r) { r.set_page_size(0); }, "KV pages and page size"},
      {"context", [](proto::Register& r) { r.set_max_context(-1); }, "max context"},
  };
  for (const Case& c : cases) {
    proto::Register r = Decode();
    c.spoil(r);
    RegistryOptions with = o;
    if (std::string(c.what) == "token") with.cluster_token = "secret";
    const Status why = CheckRegister(r, with);
    EXPECT_FALSE(why.ok()) << c.what;
    EXPECT_NE(why.message().find(c.says), std::string::npos) << c.what << ": " << why.ToString();
  }
}

namespace asio = boost::asio;
using namespace std::chrono_literals;

// A worker stood in for by one control connection: it registers, reports a Load and keeps
// what the gateway sends it.
class WorkerStandIn {
 public:
  // Its connection runs on `io` (already running).
  WorkerStandIn(asio::io_context& io, uint16_t port, proto::Register hello, int free_pages) {
    auto socket = DialTcp(io, "127.0.0.1", port, 5s);
    EXPECT_TRUE(socket.ok()) << socket.status().ToString();
    if (!socket.ok()) return;
    conn_ = FramedConnection::Create(std::move(*socket));
    conn_->Start(
        [inbox = inbox_](proto::Envelope&& m) {
          std::lock_guard lock(inbox->mu);
          inbox->received.push_back(std::move(m));
        },
        [](const Status&) {});
    proto::Envelope r;
    *r.mutable_register_() = hello;
    conn_->Send(r);
    proto::Envelope load;
    load.mutable_load()->set_free_pages(free_pages);
    conn_->Send(load);
  }
  ~WorkerStandIn() {
    if (conn_) conn_->Close(Status::Ok());
  }
  // The messages of one kind received so far.
  std::vector<proto::Envelope> Received(proto::Envelope::BodyCase kind) {
    std::lock_guard lock(inbox_->mu);
    std::vector<proto::Envelope> out;
    for (const auto& m : inbox_->received) {
      if (m.body_case() == kind) out.push_back(m);
    }
    return out;
  }

 private:
  // Shared with the connection's handler, which may run after the stand-in is gone.
  struct Inbox {
    std::mutex mu;
    std::deque<proto::Envelope> received;
  };
  std::shared_ptr<Inbox> inbox_ = std::make_shared<Inbox>();
  std::shared_ptr<FramedConnection> conn_;
};

class NullSink : public RequestSink {
 public:
  void OnTokens(const proto::TokenBatch&) override {}
  void OnFailure(const std::string&, bool, uint64_t) override {}
  void OnAttemptClosed(const AttemptUsage&) override {}
};

proto::Register Colocated() {
  proto::Register r = Decode();
  r.set_role("both");
  r.clear_kv_endpoint();
  return r;
}

class RoutingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    RegistryOptions o;
    o.model_id = "tiny";
    o.router = router_;
    registry_ = std::make_shared<WorkerRegistry>(io_, o);
    ASSERT_TRUE(registry_->Listen("127.0.0.1", 0).ok());
    thread_ = std::thread([this] { io_.run(); });
  }
  void TearDown() override {
    workers_.clear();
    registry_->Stop();
    work_.reset();
    io_.stop();
    thread_.join();
  }
  // Registers a stand-in and waits until the registry lists it (ids follow the order).
  WorkerStandIn& Join(proto::Register hello, int free_pages) {
    const size_t before = registry_->Workers().size();
    workers_.push_back(std::make_unique<WorkerStandIn>(io_, registry_->port(), hello, free_pages));
    EXPECT_TRUE(Eventually([&] {
      auto snapshot = registry_->LoadSnapshot();
      return snapshot.size() == before + 1 && snapshot.back().free_pages == free_pages;
    }));
    return *workers_.back();
  }

  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_ = asio::make_work_guard(io_);
  std::thread thread_;
  std::shared_ptr<router::FakeRouter> router_ = std::make_shared<router::FakeRouter>();
  std::shared_ptr<WorkerRegistry> registry_;
  std::vector<std::unique_ptr<WorkerStandIn>> workers_;
};

TEST_F(RoutingTest, TheRoutersChoiceGetsTheRequestWithTheLoadsItSaw) {
  Join(Colocated(), 30);
  WorkerStandIn& second = Join(Colocated(), 60);
  const auto ids = registry_->LoadSnapshot();
  ASSERT_EQ(ids.size(), 2u);
  router_->Answer(router::Route{ids[1].id, ids[1].id, false});
  proto::Sampling sampling;
  sampling.set_max_tokens(4);
  auto attempt = registry_->Dispatch(77, {1, 2, 3}, sampling, std::make_shared<NullSink>(),
                                     /*exclude=*/{ids[0].id});
  ASSERT_TRUE(attempt.ok()) << attempt.status().ToString();
  EXPECT_EQ(attempt->decode_worker, ids[1].id);
  ASSERT_TRUE(Eventually([&] { return second.Received(proto::Envelope::kGenerate).size() == 1; }));
  const proto::Generate g = second.Received(proto::Envelope::kGenerate)[0].generate();
  EXPECT_EQ(g.request_id(), 77u);
  EXPECT_EQ(g.prompt_size(), 3);
  // What the router was shown: both workers with their own loads, and the exclusion.
  const auto seen = router_->snapshots().back();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].free_pages, 30);
  EXPECT_EQ(seen[1].free_pages, 60);
  EXPECT_EQ(seen[1].role, "both");
  EXPECT_EQ(seen[1].kv_pages, 512);
  EXPECT_EQ(router_->requests().back().prompt_tokens, 3);
  EXPECT_EQ(router_->requests().back().exclude, std::set<uint64_t>{ids[0].id});
  // The attempt it now holds counts in the next snapshot.
  EXPECT_EQ(registry_->LoadSnapshot()[1].attempts, 1);
}

TEST_F(RoutingTest, NoRouteIsUnavailableAndAnImpossibleOneIsAnInternalError) {
  Join(Colocated(), 30);
  const uint64_t id = registry_->LoadSnapshot()[0].id;
  router_->Answer(std::nullopt);
  auto none = registry_->Dispatch(1, {1}, proto::Sampling(), std::make_shared<NullSink>());
  EXPECT_EQ(none.status().code(), StatusCode::kUnavailable) << none.status().ToString();
  router_->Answer(router::Route{id, id, /*disaggregated=*/true});  // a colocated worker as a pair
  auto wrong = registry_->Dispatch(2, {1}, proto::Sampling(), std::make_shared<NullSink>());
  EXPECT_EQ(wrong.status().code(), StatusCode::kInternal) << wrong.status().ToString();
  router_->Answer(router::Route{id + 100, id + 100, false});  // no such worker
  auto gone = registry_->Dispatch(3, {1}, proto::Sampling(), std::make_shared<NullSink>());
  EXPECT_EQ(gone.status().code(), StatusCode::kUnavailable) << gone.status().ToString();
}

// Workers hear from their gateway even when it has nothing to route: a Heartbeat every
// heartbeat_interval (1 s by default), so that they can tell a silent gateway from an idle one.
TEST_F(RoutingTest, RegisteredWorkersGetHeartbeats) {
  WorkerStandIn& w = Join(Colocated(), 30);
  EXPECT_TRUE(Eventually([&] { return w.Received(proto::Envelope::kHeartbeat).size() >= 2; }));
}

}  // namespace
}  // namespace pdserve::gateway
