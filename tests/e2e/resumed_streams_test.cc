// End to end: KV on demand and resumed streams with real CPU workers on loopback. A decode worker
// reserves a prompt's pages plus a lookahead and grows them as it decodes; when its pool runs
// out it preempts the newest sequences and hands them back, and the gateway resumes them (their
// tokens so far prefilled again) where there is room. A stream whose decode worker is killed or
// frozen mid-stream resumes on another. Every stream's text must be that of `pdserve generate`,
// with no gap, no repeat and no error event; only a stream with nowhere to resume ends in one.
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <future>
#include <map>
#include <optional>
#include <thread>

#include "tests/e2e/process.h"

namespace pdserve {
namespace {

using testing::Curl;
using testing::Process;

struct Worker {
  std::unique_ptr<Process> process;
  std::string log;
};

// What a stream's client saw.
struct StreamSeen {
  int status = 0;
  std::string text;
  int completion_tokens = 0;
  bool done = false, error_event = false;
};

class ResumedStreamsTest : public testing::GatewayFixture {
 protected:
  Worker Start(const std::string& kind, std::vector<std::string> extra = {}) {
    const std::string log = dir_ / (kind + std::to_string(++started_) + ".log");
    std::vector<std::string> args{kind, "--model",   model_,   "--threads", "1", "--metrics-port",
                                  "0",  "--gateway", Gateway()};
    if (kind == "decode") args.insert(args.end(), {"--role", "decode"});
    args.insert(args.end(), extra.begin(), extra.end());
    return {std::make_unique<Process>(args, log), log};
  }
  std::string Gateway() const { return "127.0.0.1:" + std::to_string(control_); }

  void WaitForWorkers(size_t n) {
    ASSERT_TRUE(testing::WaitFor(
        [&] {
          const auto h = Curl(http_, "/health");
          return h.status == 200 && nlohmann::json::parse(h.body)["worker_load"].size() == n;
        },
        std::chrono::seconds(60)))
        << Curl(http_, "/health").body;
  }

  // `pdserve generate`'s text for `prompt` (greedy without a seed): the reference every stream
  // must match.
  std::string Reference(const std::string& prompt, int max_tokens,
                        std::optional<int> seed = std::nullopt) {
    const std::string sampling =
        seed ? " --temperature 0.8 --seed " + std::to_string(*seed) : std::string();
    const auto run = testing::RunPdserveWithOutput(
        "generate --json --ignore-eos --threads 1 --max-tokens " + std::to_string(max_tokens) +
        sampling + " --model " + model_ + " --prompt '" + prompt + "'");
    EXPECT_EQ(run.exit_code, 0) << run.err;
    const auto j = nlohmann::json::parse(run.out, nullptr, false);
    EXPECT_TRUE(j.is_object()) << run.out << run.err;
    return j.is_object() ? j["text"].get<std::string>() : "";
  }

  StreamSeen Stream(const std::string& prompt, int max_tokens,
                    std::optional<int> seed = std::nullopt) {
    nlohmann::json body = {{"model", "tiny"},
                           {"prompt", prompt},
                           {"max_tokens", max_tokens},
                           {"temperature", 0},
                           {"ignore_eos", true},
                           {"stream", true},
                           {"stream_options", {{"include_usage", true}}}};
    if (seed) {
      body["temperature"] = 0.8;
      body["seed"] = *seed;
    }
    const auto r = Curl(http_, "/v1/completions", body.dump(), 90);
    StreamSeen seen;
    seen.status = r.status;
    seen.error_event = r.body.find("data: {\"error\"") != std::string::npos;
    seen.text = testing::StreamedText(r.body, &seen.completion_tokens, &seen.done);
    return seen;
  }

  double Resumed(const std::string& reason) {
    return testing::MetricValue(http_, "pdserve_requests_resumed_total{reason=\"" + reason + "\"}");
  }

  static int PagesUsed(const Worker& w) {
    return static_cast<int>(testing::WorkerMetric(w.log, "pdserve_kv_pages_used"));
  }

  // Four long greedy streams over two decode workers; once they run, `disturb` is done to a
  // decode worker holding some of them (the one returned). Every stream must still end as
  // `pdserve generate` would, without an error event.
  void ExpectStreamsSurvive(Worker& prefill, Worker& d1, Worker& d2,
                            const std::function<void(Worker&)>& disturb, Worker** disturbed) {
    constexpr int kStreams = 4, kTokens = 2500;
    std::vector<std::string> want;
    for (int i = 0; i < kStreams; ++i)
      want.push_back(Reference("long " + std::to_string(i), kTokens));
    std::atomic<Worker*> hit{nullptr};
    std::atomic<bool> stop{false};
    std::thread disturber([&] {
      while (!stop && !hit) {
        for (Worker* w : {&d1, &d2}) {
          if (PagesUsed(*w) > 0) {  // it holds streams under way: let them send some tokens
            std::this_thread::sleep_for(std::chrono::milliseconds(300));
            disturb(*w);
            hit = w;
            break;
          }
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    });
    std::vector<std::future<StreamSeen>> streams;
    for (int i = 0; i < kStreams; ++i) {
      streams.push_back(std::async(
          std::launch::async, [&, i] { return Stream("long " + std::to_string(i), kTokens); }));
    }
    for (int i = 0; i < kStreams; ++i) {
      const StreamSeen s = streams[i].get();
      EXPECT_EQ(s.status, 200);
      EXPECT_FALSE(s.error_event) << "stream " << i;
      EXPECT_TRUE(s.done) << "stream " << i;
      EXPECT_EQ(s.completion_tokens, kTokens) << "stream " << i;
      EXPECT_TRUE(s.text == want[i]) << "stream " << i << " differs from pdserve generate";
    }
    stop = true;
    disturber.join();
    ASSERT_NE(hit.load(), nullptr) << "no decode worker held a stream";
    *disturbed = hit.load();
    EXPECT_GE(Resumed("worker_failed"), 1) << testing::ReadLog(dir_ / "gateway.log");
    EXPECT_EQ(testing::MetricValue(http_, "pdserve_request_failure_total"), 0);
    testing::ExpectPagesReturnToZero(prefill.log);
    testing::ExpectPagesReturnToZero((hit.load() == &d1 ? d2 : d1).log);
  }

  int started_ = 0;
};

// Decode pages for a quarter of what 64 streams may use (64 x 64 tokens): the decode worker
// reserves each prompt plus a lookahead, grows, preempts the newest, and every stream completes
// with the text of `pdserve generate`, greedy or seeded (a resumed stream's sampler goes on
// where it was).
TEST_F(ResumedStreamsTest, SixtyFourStreamsOnAQuarterOfTheirPagesAllMatchGenerate) {
  constexpr int kStreams = 64, kPrompts = 16, kTokens = 64;
  auto prefill = Start("prefill");
  auto decode = Start("decode", {"--kv-pages", std::to_string(kStreams * kTokens / 4 / 16)});
  WaitForWorkers(2);
  // Stream i sends prompt i % kPrompts, seeded when i is odd (kPrompts is even: every prompt
  // goes both ways).
  auto seed = [](int i) { return i % 2 ? std::optional<int>(1000 + i % kPrompts) : std::nullopt; };
  std::map<int, std::string> want;  // by i % (2 * kPrompts)
  for (int i = 0; i < 2 * kPrompts; ++i) {
    want[i] = Reference("stream " + std::to_string(i % kPrompts), kTokens, seed(i));
  }
  std::vector<std::future<StreamSeen>> streams;
  for (int i = 0; i < kStreams; ++i) {
    streams.push_back(std::async(std::launch::async, [&, i] {
      return Stream("stream " + std::to_string(i % kPrompts), kTokens, seed(i));
    }));
  }
  for (int i = 0; i < kStreams; ++i) {
    const StreamSeen s = streams[i].get();
    EXPECT_EQ(s.status, 200);
    EXPECT_FALSE(s.error_event) << "stream " << i;
    EXPECT_EQ(s.completion_tokens, kTokens) << "stream " << i;
    EXPECT_TRUE(s.text == want[i % (2 * kPrompts)])
        << "stream " << i << " differs from pdserve generate";
  }
  EXPECT_GT(testing::WorkerMetric(decode.log, "pdserve_num_preemptions_total"), 0);
  EXPECT_GT(Resumed("preempted"), 0);
  EXPECT_EQ(testing::MetricValue(http_, "pdserve_request_failure_total"), 0);
  testing::ExpectPagesReturnToZero(prefill.log);
  testing::ExpectPagesReturnToZero(decode.log);
}

TEST_F(ResumedStreamsTest, StreamsOfAKilledDecodeWorkerFinishOnTheOther) {
  auto prefill = Start("prefill");
  auto d1 = Start("decode");
  auto d2 = Start("decode");
  WaitForWorkers(3);
  Worker* killed = nullptr;
  ExpectStreamsSurvive(
      prefill, d1, d2, [](Worker& w) { w.process->Kill(SIGKILL); }, &killed);
}

// A decode worker frozen with SIGSTOP stops sending: the gateway drops it at its heartbeat
// timeout and resumes its streams; woken, it finds itself dropped and frees what it held.
TEST_F(ResumedStreamsTest, StreamsOfAFrozenDecodeWorkerFinishOnTheOtherAndItsPagesReturn) {
  auto prefill = Start("prefill");
  auto d1 = Start("decode");
  auto d2 = Start("decode");
  WaitForWorkers(3);
  Worker* frozen = nullptr;
  ExpectStreamsSurvive(
      prefill, d1, d2, [](Worker& w) { w.process->Signal(SIGSTOP); }, &frozen);
  ASSERT_NE(frozen, nullptr);
  frozen->process->Signal(SIGCONT);
  testing::ExpectPagesReturnToZero(frozen->log);
}

// With no other decode worker, a resumed stream waits in the queue up to its deadline and then
// ends with an SSE error event; the next request, once a decode worker is back, completes.
TEST_F(ResumedStreamsTest, AStreamWithNowhereToResumeEndsWithAnErrorEvent) {
  gateway_.reset();
  auto gateway = testing::StartGateway(dir_.path(), model_, {"--queue-timeout", "2"});
  ASSERT_TRUE(gateway.process);
  gateway_ = std::move(gateway.process);
  http_ = gateway.http_port;
  control_ = gateway.control_port;
  auto prefill = Start("prefill");
  auto decode = Start("decode");
  WaitForWorkers(2);
  std::atomic<bool> killed{false};
  std::thread killer([&] {
    for (int i = 0; i < 1000 && PagesUsed(decode) <= 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    decode.process->Kill(SIGKILL);
    killed = true;
  });
  const auto start = std::chrono::steady_clock::now();
  const StreamSeen s = Stream("nowhere", 3000);
  killer.join();
  ASSERT_TRUE(killed);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
  EXPECT_TRUE(s.error_event) << s.text.substr(0, 200);
  EXPECT_TRUE(s.done);
  // What it streamed before the error is the start of what `pdserve generate` gives: the
  // tokens sent were right, and none came twice or went missing.
  const std::string reference = Reference("nowhere", 3000);
  EXPECT_LT(s.text.size(), reference.size());
  EXPECT_EQ(reference.compare(0, s.text.size(), s.text), 0)
      << "the streamed text is not a prefix of the reference: " << s.text.substr(0, 200);
  auto again = Start("decode");
  WaitForWorkers(2);
  testing::ExpectGreedyMatchesGenerate(http_, model_, "and again");
  testing::ExpectPagesReturnToZero(prefill.log);
  testing::ExpectPagesReturnToZero(again.log);
}

}  // namespace
}  // namespace pdserve
