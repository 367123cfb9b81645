// How step time becomes cost: StepShares itself, and the WorkerRegistry charging the StepReports
// that workers (stood in for on loopback) send it: prefill, decode and colocated steps, requests
// it does not hold, all-zero and malformed steps. For each, what every attempt was charged
// (OnAttemptClosed) and what the worker's period says it was busy (on_period when it leaves):
// the charges of each worker add up to its busy seconds.
#include "router/step_shares.h"

#include <gtest/gtest.h>

#include <limits>
#include <map>
#include <mutex>
#include <numeric>
#include <optional>
#include <thread>

#include "router/worker_registry.h"
#include "tests/eventually.h"
#include "tests/fakes/fake_router.h"
#include "tests/router/worker_stand_in.h"

namespace pdserve::router {
namespace {

using pdserve::testing::Eventually;
using pdserve::testing::WorkerStandIn;
using router::StepShares;

double Sum(const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0); }

TEST(StepSharesTest, SharedByTokensAndEquallyWhenAllAreZero) {
  const std::vector<int32_t> prompt{100, 300, 0};
  const auto shares = StepShares(1.0, prompt);
  ASSERT_EQ(shares.size(), 3u);
  EXPECT_DOUBLE_EQ(shares[0], 0.25);
  EXPECT_DOUBLE_EQ(shares[1], 0.75);
  EXPECT_EQ(shares[2], 0);
  const std::vector<int32_t> decode{1, 1, 1};
  for (double s : StepShares(0.03, decode)) EXPECT_DOUBLE_EQ(s, 0.01);
  const std::vector<int32_t> zero{0, 0, 0};
  for (double s : StepShares(0.9, zero)) EXPECT_DOUBLE_EQ(s, 0.3);
  const std::vector<int32_t> mixed{12, 1, 1, 6};
  EXPECT_DOUBLE_EQ(Sum(StepShares(0.7, mixed)), 0.7);
  EXPECT_TRUE(StepShares(1.0, {}).empty());
}

proto::Register Role(const std::string& role) {
  proto::Register r;
  r.set_role(role);
  r.set_capacity_class("reserved");
  r.set_price_per_gpu_hour(2.5);
  r.set_gpu_count(1);
  r.set_kv_pages(512);
  r.set_page_size(16);
  r.set_max_context(4096);
  if (role == "decode") r.set_kv_endpoint("127.0.0.1:9000");
  r.set_model_id("tiny");
  if (role != "both") r.set_layout_hash(42);
  return r;
}

proto::Envelope Step(double seconds, const std::vector<uint64_t>& ids,
                     const std::vector<int32_t>& tokens, const std::vector<bool>& prompt) {
  proto::Envelope m;
  proto::StepReport* s = m.mutable_step();
  s->set_seconds(seconds);
  for (uint64_t id : ids) s->add_request_ids(id);
  for (int32_t t : tokens) s->add_tokens(t);
  for (bool p : prompt) s->add_prompt(p);
  return m;
}

proto::Envelope Tokens(uint64_t id, const std::vector<int32_t>& tokens,
                       const std::string& finish = "") {
  proto::Envelope m;
  m.mutable_tokens()->set_request_id(id);
  for (int32_t t : tokens) m.mutable_tokens()->add_tokens(t);
  m.mutable_tokens()->set_finish_reason(finish);
  return m;
}

// Keeps what the registry said each attempt cost.
class UsageSink : public RequestSink {
 public:
  void OnTokens(const proto::TokenBatch&) override {}
  void OnFailure(const AttemptFailure&) override {}
  void OnAttemptClosed(const AttemptUsage& usage) override {
    std::lock_guard lock(mu_);
    closed_[usage.attempt_id] = usage;
  }
  std::optional<AttemptUsage> Closed(uint64_t id) {
    std::lock_guard lock(mu_);
    auto it = closed_.find(id);
    return it == closed_.end() ? std::nullopt : std::optional<AttemptUsage>(it->second);
  }

 private:
  std::mutex mu_;
  std::map<uint64_t, AttemptUsage> closed_;
};

constexpr double kEps = 1e-12;

class StepChargingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    RegistryOptions o;
    o.model_id = "tiny";
    o.router = router_;
    o.on_period = [this](const WorkerPeriodUpdate& u) {
      std::lock_guard lock(mu_);
      if (u.ended) left_[u.worker_id] = u;
    };
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
  // Registers a stand-in; its id with the registry.
  uint64_t Join(const std::string& role) {
    const size_t before = registry_->Workers().size();
    workers_.push_back(
        std::make_unique<WorkerStandIn>(io_, registry_->port(), Role(role), /*free_pages=*/500));
    EXPECT_TRUE(Eventually([&] { return registry_->LoadSnapshot().size() == before + 1; }));
    return registry_->LoadSnapshot().back().id;
  }
  WorkerStandIn& StandIn(size_t index) { return *workers_.at(index); }
  // Dispatches attempt `id` (a prompt of `prompt_tokens`) on the given route.
  void Dispatch(uint64_t id, int prompt_tokens, router::Route route) {
    router_->Answer(route);
    std::vector<int32_t> prompt(static_cast<size_t>(prompt_tokens), 7);
    auto attempt = registry_->Dispatch(id, prompt, proto::Sampling(), sink_);
    ASSERT_TRUE(attempt.ok()) << attempt.status().ToString();
  }
  // Waits until `w` has received `n` messages of `kind`.
  static bool Got(WorkerStandIn& w, proto::Envelope::BodyCase kind, size_t n) {
    return Eventually([&] { return w.Received(kind).size() >= n; });
  }
  // The attempt's charges once it closed (fails the test if it does not within the bound).
  AttemptUsage ClosedUsage(uint64_t id) {
    EXPECT_TRUE(Eventually([&] { return sink_->Closed(id).has_value(); })) << "attempt " << id;
    return sink_->Closed(id).value_or(AttemptUsage{});
  }
  // The busy seconds of the worker in stand-in `index`, from its period when it leaves.
  double BusyWhenItLeaves(size_t index, uint64_t worker_id) {
    StandIn(index).Close();
    EXPECT_TRUE(Eventually([&] {
      std::lock_guard lock(mu_);
      return left_.count(worker_id) > 0;
    }));
    std::lock_guard lock(mu_);
    return left_.count(worker_id) ? left_[worker_id].busy_seconds : -1;
  }

  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_ =
      boost::asio::make_work_guard(io_);
  std::thread thread_;
  std::shared_ptr<router::FakeRouter> router_ = std::make_shared<router::FakeRouter>();
  std::shared_ptr<WorkerRegistry> registry_;
  std::shared_ptr<UsageSink> sink_ = std::make_shared<UsageSink>();
  std::vector<std::unique_ptr<WorkerStandIn>> workers_;
  std::mutex mu_;
  std::map<uint64_t, WorkerPeriodUpdate> left_;  // guarded by mu_
};

// Two prompts prefilled in one step (shared by tokens) and decoded in one step (equally), a step
// that names a request the prefill worker does not hold, an all-zero step and malformed steps.
TEST_F(StepChargingTest, PrefillAndDecodeStepsAreChargedToTheirAttemptsAndToBusyTime) {
  const uint64_t p = Join("prefill"), d = Join("decode");
  WorkerStandIn& prefill = StandIn(0);
  WorkerStandIn& decode = StandIn(1);
  Dispatch(1, 10, {p, d, true});
  Dispatch(2, 30, {p, d, true});
  ASSERT_TRUE(Got(decode, proto::Envelope::kReserve, 2));
  for (uint64_t id : {1, 2}) {  // pages of the decode worker's pool, enough for each prompt
    proto::Envelope reserved;
    reserved.mutable_reserved()->set_request_id(id);
    reserved.mutable_reserved()->set_layout_hash(42);
    for (int32_t page : {0, 1}) reserved.mutable_reserved()->add_page_ids(page + 2 * (id - 1));
    decode.Send(reserved);
  }
  ASSERT_TRUE(Got(prefill, proto::Envelope::kPrefill, 2));
  // Prefill: 0.8 s for 10 + 30 prompt tokens.
  prefill.Send(Step(0.8, {1, 2}, {10, 30}, {true, true}));
  // Half of 1.0 s was request 999's, which is nobody's here: charged to no one, and not busy.
  prefill.Send(Step(1.0, {1, 999}, {10, 10}, {true, true}));
  // Malformed (counts and ids differ; a negative count; no number of seconds): ignored.
  prefill.Send(Step(5.0, {1, 2}, {10}, {true, true}));
  prefill.Send(Step(5.0, {1, 2}, {-10, 30}, {true, true}));
  prefill.Send(Step(std::numeric_limits<double>::quiet_NaN(), {1}, {1}, {true}));
  prefill.Send(Tokens(1, {5}));
  prefill.Send(Tokens(2, {6}));
  ASSERT_TRUE(Got(decode, proto::Envelope::kKvDone, 2));
  // A step the prefill worker reports after it answered request 1: its part of it is over.
  prefill.Send(Step(0.4, {1}, {3}, {true}));
  // Decode: 0.06 s for one token each; then 0.09 s in which neither ran a token (all zero).
  decode.Send(Step(0.06, {1, 2}, {1, 1}, {false, false}));
  decode.Send(Step(0.09, {1, 2}, {0, 0}, {false, false}));
  decode.Send(Tokens(1, {8}, "length"));
  decode.Send(Tokens(2, {9}, "length"));

  const AttemptUsage one = ClosedUsage(1), two = ClosedUsage(2);
  EXPECT_NEAR(one.prefill_step_seconds, 0.2 + 0.5, kEps);
  EXPECT_NEAR(two.prefill_step_seconds, 0.6, kEps);
  EXPECT_NEAR(one.decode_step_seconds, 0.03 + 0.045, kEps);
  EXPECT_NEAR(two.decode_step_seconds, 0.03 + 0.045, kEps);
  EXPECT_NEAR(BusyWhenItLeaves(0, p), 0.8 + 0.5, kEps);
  EXPECT_NEAR(BusyWhenItLeaves(1, d), 0.06 + 0.09, kEps);
}

// A worker of role both: a step that prefills one request and decodes another is shared by
// tokens, the prompt part to the prefill side and the decode part to the decode side; a step it
// reports for another worker's attempt is not its busy time.
TEST_F(StepChargingTest, ColocatedStepsChargePromptAndDecodeWorkToTheirSides) {
  const uint64_t c = Join("both"), other = Join("both");
  WorkerStandIn& worker = StandIn(0);
  Dispatch(10, 12, {c, c, false});
  Dispatch(11, 4, {c, c, false});
  Dispatch(12, 4, {other, other, false});
  ASSERT_TRUE(Got(worker, proto::Envelope::kGenerate, 2));
  ASSERT_TRUE(Got(StandIn(1), proto::Envelope::kGenerate, 1));
  worker.Send(Step(0.4, {11}, {4}, {true}));
  worker.Send(Step(0.52, {10, 11}, {12, 1}, {true, false}));
  worker.Send(Step(0.3, {10, 11, 12}, {1, 1, 1}, {false, false, false}));
  worker.Send(Step(0.2, {10, 11}, {0, 0}, {false, false}));
  worker.Send(Tokens(10, {1}, "length"));
  worker.Send(Tokens(11, {1}, "length"));
  StandIn(1).Send(Tokens(12, {1}, "length"));

  const AttemptUsage ten = ClosedUsage(10), eleven = ClosedUsage(11), twelve = ClosedUsage(12);
  EXPECT_NEAR(ten.prefill_step_seconds, 0.48, kEps);
  EXPECT_NEAR(ten.decode_step_seconds, 0.1 + 0.1, kEps);
  EXPECT_NEAR(eleven.prefill_step_seconds, 0.4, kEps);
  EXPECT_NEAR(eleven.decode_step_seconds, 0.04 + 0.1 + 0.1, kEps);
  EXPECT_EQ(twelve.prefill_step_seconds, 0);  // what worker c said about it is not charged
  EXPECT_EQ(twelve.decode_step_seconds, 0);
  EXPECT_NEAR(BusyWhenItLeaves(0, c), 0.4 + 0.52 + 0.2 + 0.2, kEps);
  EXPECT_NEAR(BusyWhenItLeaves(1, other), 0, kEps);
}

}  // namespace
}  // namespace pdserve::router
