// The prefill worker between a gateway and a decode worker, both stood in for: a FakeGateway on
// its control port, and a KvReceiver in this process reached through FakeTransport (the worker's
// dial_transport). It must push the prompt's KV into the reserved pages, then answer with the
// first token a local engine samples, and report a failed push as the decode side's fault.
#include "prefill_pool/prefill_worker.h"

#include <gtest/gtest.h>

#include <thread>

#include "kv_transfer/kv_receiver.h"
#include "tests/eventually.h"
#include "tests/fakes/fake_gateway.h"
#include "tests/fakes/fake_transport.h"
#include "tests/model/random_model.h"

namespace pdserve::prefill_pool {
namespace {

using pdserve::testing::Eventually;

using namespace std::chrono_literals;
using kv_transfer::Clock;

class PrefillWorkerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_ = model::testing::SmallConfig();
    model::testing::WriteModel(config_, dir_.path());
    engine_.threads = 1;
    engine_.num_pages = 32;
    engine_.page_size = 4;
    auto layout = kv_transfer::KvLayout::FromConfig(*model::ModelConfig::Load(dir_.path()),
                                                    engine_.page_size, model::DType::kF32);
    ASSERT_TRUE(layout.ok()) << layout.status().ToString();
    layout_ = *layout;
    // The decode side: its pool and a receiver writing into it.
    memory_.assign(layout_.n_layers, std::vector<unsigned char>(layout_.page_bytes() * 32, 0));
    std::vector<void*> bases;
    for (auto& m : memory_) bases.push_back(m.data());
    receiver_ = std::make_unique<kv_transfer::KvReceiver>(layout_, pool_, bases);
  }
  void TearDown() override {
    if (worker_) worker_->Drain();
    if (run_.joinable()) run_.join();
  }

  // Starts a worker whose transports are fakes into receiver_ (the last one kept in transport_).
  void StartWorker() {
    PrefillWorkerOptions o;
    o.model_dir = dir_.path();
    o.engine = engine_;
    o.gateway.port = gateway_.port();
    o.gateway.silence_timeout = 0ms;  // the fake gateway sends no heartbeats
    o.gateway_reconnect_seconds = 0;
    o.dial_transport = [this](const kv_transfer::KvLayout& layout, std::vector<const void*> bases,
                              int num_pages, const kv_transfer::TcpTransportOptions& options)
        -> Result<std::unique_ptr<kv_transfer::Transport>> {
      dialled_ = options.host + ":" + std::to_string(options.port);
      auto t = std::make_unique<kv_transfer::FakeTransport>(layout, std::move(bases), num_pages,
                                                            *receiver_);
      if (lose_connection_) t->DropConnection();  // the decode worker went away
      return std::unique_ptr<kv_transfer::Transport>(std::move(t));
    };
    auto worker = PrefillWorker::Create(o);
    ASSERT_TRUE(worker.ok()) << worker.status().ToString();
    worker_ = std::move(*worker);
    run_ = std::thread([this] { run_status_ = worker_->Run(); });
    ASSERT_TRUE(Eventually([&] { return gateway_.registers() == 1; }));
  }

  // Reserves pages for `request` on the decode side and sends the worker its Prefill; the decode
  // side says it holds the prompt's first `cached_blocks` pages (they are not reserved).
  kv_transfer::Reservation SendPrefill(uint64_t request, const std::vector<int32_t>& prompt,
                                       int cached_blocks = 0) {
    const int pages = (static_cast<int>(prompt.size()) + engine_.page_size - 1) / engine_.page_size;
    auto r = receiver_->Reserve(request, std::max(1, pages - cached_blocks), Clock::now() + 20s);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    proto::Envelope m;
    proto::Prefill* p = m.mutable_prefill();
    p->set_request_id(request);
    p->mutable_prompt()->Add(prompt.begin(), prompt.end());
    p->mutable_sampling()->set_temperature(0);
    p->mutable_sampling()->set_top_p(1);
    p->mutable_sampling()->set_max_tokens(8);
    p->set_deadline_seconds(20);
    proto::Reserved* dst = p->mutable_destination();
    dst->set_request_id(request);
    dst->set_kv_endpoint("decode.test:7000");
    dst->mutable_page_ids()->Add(r->pages.begin(), r->pages.end());
    dst->set_layout_hash(layout_.hash);
    dst->set_transfer_secret(reinterpret_cast<const char*>(r->secret.data()), r->secret.size());
    dst->set_device("cpu");
    dst->set_cached_blocks(cached_blocks);
    gateway_.Send(m);
    return *r;
  }

  // The first message about `request` from the worker, once it came.
  std::optional<proto::Envelope> AnswerTo(uint64_t request) {
    std::optional<proto::Envelope> answer;
    Eventually([&] {
      for (const auto& m : gateway_.messages()) {
        if ((m.has_tokens() && m.tokens().request_id() == request) ||
            (m.has_error() && m.error().request_id() == request)) {
          answer = m;
          return true;
        }
      }
      return false;
    });
    return answer;
  }

  // The first `tokens` tokens' K and V of the decode side's page `dst_page` equal those of
  // `local`'s page `local_page`, in every layer.
  void ExpectSameKv(int32_t dst_page, model::Engine& local, int32_t local_page, int tokens) {
    const size_t token_bytes = layout_.page_bytes() / 2 / engine_.page_size;
    for (int l = 0; l < layout_.n_layers; ++l) {
      const auto* mine = static_cast<const unsigned char*>(local.backend().KvLayerData(l));
      for (int kv = 0; kv < 2; ++kv) {
        const size_t at = kv * layout_.page_bytes() / 2;
        EXPECT_EQ(0,
                  std::memcmp(memory_[l].data() + dst_page * layout_.page_bytes() + at,
                              mine + local_page * layout_.page_bytes() + at, tokens * token_bytes))
            << "layer " << l << " page " << dst_page << (kv ? " V" : " K");
      }
    }
  }

  // What one engine computes for `prompt`: its first token (greedy) and its pages, kept.
  std::pair<int32_t, std::vector<int32_t>> RunLocally(model::Engine& local,
                                                      const std::vector<int32_t>& prompt) {
    model::SamplingParams greedy;
    greedy.temperature = 0;
    greedy.max_tokens = 1;
    auto seq = local.Add(prompt, greedy, /*keep_pages=*/true);
    EXPECT_TRUE(seq.ok());
    std::vector<model::TokenEvent> events;
    while (local.HasWork()) EXPECT_TRUE(local.Step(&events).ok());
    EXPECT_FALSE(events.empty());
    return {events.empty() ? -1 : events.front().token, local.TakeKeptPages(*seq)};
  }

  // The KvEvents and KvSnapshot messages the worker sent, in order.
  std::vector<proto::Envelope> KvMessages() {
    std::vector<proto::Envelope> kv;
    for (const auto& m : gateway_.messages()) {
      if (m.has_kv_events() || m.has_kv_snapshot()) kv.push_back(m);
    }
    return kv;
  }

  model::testing::TempDir dir_;
  model::ModelConfig config_;
  model::EngineOptions engine_;
  kv_transfer::KvLayout layout_;
  model::KvPagePool pool_{32};
  std::vector<std::vector<unsigned char>> memory_;
  std::unique_ptr<kv_transfer::KvReceiver> receiver_;
  testing::FakeGateway gateway_;
  bool lose_connection_ = false;
  std::string dialled_;
  std::unique_ptr<PrefillWorker> worker_;
  std::thread run_;
  Status run_status_;
};

TEST_F(PrefillWorkerTest, PushesThePromptsKvAndAnswersWithTheFirstToken) {
  StartWorker();
  const std::vector<int32_t> prompt = model::testing::RandomTokens(11, config_.vocab_size, 5);
  const kv_transfer::Reservation r = SendPrefill(7, prompt);
  const auto answer = AnswerTo(7);
  ASSERT_TRUE(answer) << "no answer from the worker";
  ASSERT_TRUE(answer->has_tokens()) << answer->DebugString();
  EXPECT_EQ(dialled_, "decode.test:7000");
  EXPECT_EQ(answer->tokens().tokens_size(), 1);
  EXPECT_GT(answer->tokens().kv_bytes(), 0);
  // Answered only after every chunk was applied: the decode side has the whole prompt.
  EXPECT_EQ(receiver_->State(7), kv_transfer::TransferState::kDone);

  // The token and the KV are what one engine computes for the prompt.
  auto local = model::Engine::Load(dir_.path(), engine_);
  ASSERT_TRUE(local.ok()) << local.status().ToString();
  const auto [token, local_pages] = RunLocally(**local, prompt);
  EXPECT_EQ(answer->tokens().tokens(0), token);
  ASSERT_EQ(local_pages.size(), r.pages.size());
  // Whole pages hold the prompt's tokens but the last, which holds 11 % 4 of them.
  for (size_t i = 0; i < r.pages.size(); ++i) {
    ExpectSameKv(r.pages[i], **local, local_pages[i],
                 std::min<int>(engine_.page_size, 11 - static_cast<int>(i) * engine_.page_size));
  }
}

// With its prefix cache off, a worker answers the gateway's resync with an empty snapshot and
// publishes nothing after a prompt: the gateway believes it holds no block, wherever prompts went.
TEST_F(PrefillWorkerTest, WithItsCacheOffItPublishesThatItHoldsNothing) {
  engine_.prefix_cache = false;
  StartWorker();
  proto::Envelope resync;
  resync.mutable_kv_resync();
  gateway_.Send(resync);
  ASSERT_TRUE(Eventually([&] { return !KvMessages().empty(); }));
  SendPrefill(7, model::testing::RandomTokens(11, config_.vocab_size, 5));
  const auto answer = AnswerTo(7);
  ASSERT_TRUE(answer && answer->has_tokens());
  gateway_.Send(resync);
  ASSERT_TRUE(Eventually([&] { return KvMessages().size() >= 2; }));
  for (const proto::Envelope& m : KvMessages()) {
    ASSERT_TRUE(m.has_kv_snapshot()) << m.DebugString();
    EXPECT_EQ(m.kv_snapshot().blocks_size(), 0);
  }
}

// The decode worker holds the prompt's first two pages (Reserved.cached_blocks): only the third
// is sent, into the one page it reserved, and the bytes charged are that page's.
TEST_F(PrefillWorkerTest, SendsOnlyThePagesAfterTheDecodeWorkersCachedBlocks) {
  StartWorker();
  // The gateway's resync after registration: an empty cache, from wire seq 0.
  proto::Envelope resync;
  resync.mutable_kv_resync();
  gateway_.Send(resync);
  const std::vector<int32_t> prompt = model::testing::RandomTokens(11, config_.vocab_size, 5);
  ASSERT_TRUE(Eventually([&] { return !KvMessages().empty(); }));
  SendPrefill(7, prompt);
  const auto first = AnswerTo(7);
  ASSERT_TRUE(first && first->has_tokens());
  // Then the prompt's two full blocks, stored, as KvEvents 1.
  ASSERT_TRUE(Eventually([&] { return KvMessages().size() >= 2; }));
  const auto kv = KvMessages();
  ASSERT_TRUE(kv[0].has_kv_snapshot());
  EXPECT_EQ(kv[0].kv_snapshot().seq(), 0u);
  EXPECT_EQ(kv[0].kv_snapshot().blocks_size(), 0);
  ASSERT_TRUE(kv[1].has_kv_events());
  EXPECT_EQ(kv[1].kv_events().seq(), 1u);
  EXPECT_EQ(kv[1].kv_events().stored_size(), 2);
  const kv_transfer::Reservation r = SendPrefill(8, prompt, /*cached_blocks=*/2);
  const auto answer = AnswerTo(8);
  ASSERT_TRUE(answer) << "no answer from the worker";
  ASSERT_TRUE(answer->has_tokens()) << answer->DebugString();
  EXPECT_EQ(receiver_->State(8), kv_transfer::TransferState::kDone);
  EXPECT_EQ(answer->tokens().kv_bytes() * 3, first->tokens().kv_bytes());
  // The worker's own cache held the first two pages of the second run: 8 tokens not computed.
  EXPECT_EQ(first->tokens().cached_tokens(), 0);
  EXPECT_EQ(answer->tokens().cached_tokens(), 8);
  auto local = model::Engine::Load(dir_.path(), engine_);
  ASSERT_TRUE(local.ok()) << local.status().ToString();
  const auto [token, local_pages] = RunLocally(**local, prompt);
  EXPECT_EQ(answer->tokens().tokens(0), token);
  ASSERT_EQ(r.pages.size(), 1u);
  ExpectSameKv(r.pages[0], **local, local_pages[2], 3);
}

TEST_F(PrefillWorkerTest, RefusesCachedBlocksThatLeaveNothingToSend) {
  StartWorker();
  SendPrefill(9, model::testing::RandomTokens(8, config_.vocab_size, 5), /*cached_blocks=*/2);
  const auto answer = AnswerTo(9);
  ASSERT_TRUE(answer) << "no answer from the worker";
  ASSERT_TRUE(answer->has_error()) << answer->DebugString();
  EXPECT_FALSE(answer->error().retryable());
  EXPECT_NE(answer->error().message().find("holds 2 of the prompt's 2"), std::string::npos)
      << answer->error().message();
}

// A decode worker whose KV connection is lost: the request did not start, so another pair may
// take it, and the fault is the decode worker's (the gateway's retry avoids it, not this one).
TEST_F(PrefillWorkerTest, ALostKvPeerIsTheDecodeWorkersFaultAndRetryable) {
  lose_connection_ = true;
  StartWorker();
  SendPrefill(9, model::testing::RandomTokens(6, config_.vocab_size, 8));
  const auto answer = AnswerTo(9);
  ASSERT_TRUE(answer) << "no answer from the worker";
  ASSERT_TRUE(answer->has_error()) << answer->DebugString();
  EXPECT_TRUE(answer->error().retryable());
  EXPECT_TRUE(answer->error().peer_failed()) << answer->error().message();
  EXPECT_NE(answer->error().message().find("lost"), std::string::npos) << answer->error().message();
}

}  // namespace
}  // namespace pdserve::prefill_pool
