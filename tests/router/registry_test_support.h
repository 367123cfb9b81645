// What the registry's tests share: a Register for a decode and a colocated worker, a sink that
// ignores its attempt, and a registry on loopback with workers stood in for (WorkerStandIn).
// For tests only; each fixture runs its registry on its own io_context thread.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "router/worker_registry.h"
#include "tests/eventually.h"
#include "tests/fakes/fake_router.h"
#include "tests/router/worker_stand_in.h"

namespace pdserve::router::test_support {

namespace asio = boost::asio;
using pdserve::testing::Eventually;
using pdserve::testing::WorkerStandIn;
using Answer = WorkerStandIn::Answer;

inline proto::Register Decode() {
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

inline proto::Register Colocated() {
  proto::Register r = Decode();
  r.set_role("both");
  r.clear_kv_endpoint();
  return r;
}

class NullSink : public RequestSink {
 public:
  void OnTokens(const proto::TokenBatch&) override {}
  void OnFailure(const AttemptFailure&) override {}
  void OnAttemptClosed(const AttemptUsage&) override {}
};

// A registry on loopback with workers stood in for. Tests Start it with the options they need.
class RegistryTest : public ::testing::Test {
 protected:
  void Start(RegistryOptions o) {
    o.model_id = "tiny";
    registry_ = std::make_shared<WorkerRegistry>(io_, o);
    ASSERT_TRUE(registry_->Listen("127.0.0.1", 0).ok());
    thread_ = std::thread([this] { io_.run(); });
  }
  void TearDown() override {
    workers_.clear();
    if (registry_) registry_->Stop();
    work_.reset();
    io_.stop();
    if (thread_.joinable()) thread_.join();
  }
  // Registers a stand-in and waits until the registry lists it (ids follow the order) with the
  // free pages it reports (`listed_free`: as the registry counts them, when not the same).
  WorkerStandIn& Join(proto::Register hello, int free_pages, Answer answer = {},
                      std::optional<int> listed_free = std::nullopt) {
    const size_t before = registry_->Workers().size();
    workers_.push_back(std::make_unique<WorkerStandIn>(io_, registry_->port(), hello, free_pages,
                                                       std::move(answer)));
    EXPECT_TRUE(Eventually([&] {
      auto snapshot = registry_->LoadSnapshot();
      return snapshot.size() == before + 1 &&
             snapshot.back().free_pages == listed_free.value_or(free_pages);
    }));
    return *workers_.back();
  }

  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_ = asio::make_work_guard(io_);
  std::thread thread_;
  std::shared_ptr<WorkerRegistry> registry_;
  std::vector<std::unique_ptr<WorkerStandIn>> workers_;
};

class RoutingTest : public RegistryTest {
 protected:
  void SetUp() override {
    RegistryOptions o;
    o.router = router_;
    Start(o);
  }
  std::shared_ptr<router::FakeRouter> router_ = std::make_shared<router::FakeRouter>();
};

}  // namespace pdserve::router::test_support
