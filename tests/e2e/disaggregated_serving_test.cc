// End to end: a gateway with separate prefill and decode workers as real processes on loopback.
// The prompt's KV moves from the prefill worker to the decode worker over the TCP transport;
// tokens must be those of one engine in one process, and failures of either worker must be
// survived as docs/architecture.md's failure rules say.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/command_run.h"
#include "tests/e2e/process.h"
#include "tests/eventually.h"
#include "tests/gpu_presence.h"
#include "tests/model/random_model.h"

namespace pdserve {
namespace {

using testing::Curl;
using testing::Process;

struct Worker {
  std::unique_ptr<Process> process;
  std::string log;
};

class DisaggregatedServingTest : public testing::GatewayFixture {
 protected:
  Worker Start(const std::string& kind, std::vector<std::string> extra = {}) {
    const std::string log = dir_ / (kind + std::to_string(++started_) + ".log");
    std::vector<std::string> args{kind,
                                  "--model",
                                  model_,
                                  "--threads",
                                  "1",
                                  "--kv-memory-mb",
                                  "32",
                                  "--metrics-port",
                                  "0",
                                  "--gateway",
                                  "127.0.0.1:" + std::to_string(control_)};
    if (kind == "decode") args.insert(args.end(), {"--role", "decode"});
    args.insert(args.end(), extra.begin(), extra.end());
    return {std::make_unique<Process>(args, log), log};
  }

  // Waits until the gateway lists `n` workers of `role`.
  void WaitForWorkers(const std::string& role, size_t n) {
    // Generous: a loaded CI machine starts processes slowly.
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    testing::HttpResult h;
    while (std::chrono::steady_clock::now() < end) {
      h = Curl(http_, "/health");
      if (h.status == 200) {
        size_t count = 0;
        const auto health = nlohmann::json::parse(h.body);
        for (const auto& w : health["worker_load"]) {
          count += w.value("role", "") == role ? 1 : 0;
        }
        if (count == n) return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    FAIL() << "the gateway does not list " << n << " " << role << " workers: " << h.status << " "
           << h.body;
  }

  // pdserve_kv_pages_used on a worker's own /metrics (its port is in its log).
  static int KvPagesUsed(const Worker& w) {
    return static_cast<int>(testing::WorkerMetric(w.log, "pdserve_kv_pages_used"));
  }
  static std::string LogOf(const Worker& w) { return testing::ReadLog(w.log); }
  static double WorkerMetric(const Worker& w, const std::string& name) {
    return testing::WorkerMetric(w.log, name);
  }
  static void ExpectPagesReturnToZero(const Worker& w) { testing::ExpectPagesReturnToZero(w.log); }

  int started_ = 0;
};

TEST_F(DisaggregatedServingTest, GreedyTextMatchesOneEngineStreamedAndNot) {
  auto p = Start("prefill");
  auto d = Start("decode");
  WaitForWorkers("prefill", 1);
  WaitForWorkers("decode", 1);
  for (int i = 0; i < 20; ++i) {
    // Lengths from a few tokens to several KV pages, so transfers have one run or several.
    const std::string prompt = "Prompt number " + std::to_string(i) +
                               std::string(static_cast<size_t>(i) * 7, i % 2 ? 'x' : ' ') +
                               (i % 3 ? " about cats" : " ... and dogs");
    const std::string streamed = testing::ExpectGreedyMatchesGenerate(http_, model_, prompt);
    EXPECT_NE(streamed.find("kv_transfer;dur="), std::string::npos);
  }
  // A request that ends at its first token (max_tokens 1) frees the decode worker's reservation.
  auto one = Curl(http_, "/v1/completions",
                  R"({"model":"tiny","prompt":"one","max_tokens":1,"ignore_eos":true})");
  EXPECT_EQ(one.status, 200) << one.body;
  EXPECT_EQ(nlohmann::json::parse(one.body)["usage"]["completion_tokens"], 1);
  ExpectPagesReturnToZero(p);
  ExpectPagesReturnToZero(d);
}

// The same through the spliced path: every layer push goes from the CPU engine's KV pages into
// the socket by reference, and the decode worker must still continue token for token. Both
// workers run with --kv-offload-checksums, which must reach the decode worker's listener and the
// prefill worker's transports (the tiny model's chunks are shorter than a checksum span, so their
// CRCs are still taken on the threads that move the bytes).
TEST_F(DisaggregatedServingTest, SplicedKvPushesMatchOneEngine) {
  auto p = Start("prefill", {"--kv-splice-min-bytes", "0", "--kv-offload-checksums"});
  auto d = Start("decode", {"--kv-offload-checksums"});
  WaitForWorkers("prefill", 1);
  WaitForWorkers("decode", 1);
  for (int i = 0; i < 6; ++i) {
    const std::string prompt =
        "Spliced prompt " + std::to_string(i) + std::string(static_cast<size_t>(i) * 23, 'y');
    testing::ExpectGreedyMatchesGenerate(http_, model_, prompt);
  }
  const std::string log = LogOf(p);
  EXPECT_NE(log.find("payloads go into the socket by reference"), std::string::npos) << log;
  EXPECT_EQ(log.find("will be copied into the socket"), std::string::npos) << log;
  EXPECT_EQ(log.find("copying payloads into the socket"), std::string::npos) << log;
  EXPECT_NE(log.find("chunk CRCs are computed on"), std::string::npos) << log;
  const std::string decode_log = LogOf(d);
  EXPECT_NE(decode_log.find("payload CRCs are checked on"), std::string::npos) << decode_log;
  ExpectPagesReturnToZero(p);
  ExpectPagesReturnToZero(d);
}

// Both workers on GPU 0: the KV pages stay in GPU memory and move by CUDA IPC, which the prefill
// worker picks by itself (--kv-path auto) for a decode worker on its GPU and machine; the TCP
// connection carries only headers and acks. Skipped only where the machine has no GPU
// (testing::GpusPresent); where it has one, pdserve failing on it fails the test. scripts/gpu-check
// runs it.
TEST_F(DisaggregatedServingTest, GpuWorkersMoveKvByCudaIpcAndMatchOneGpuEngine) {
  if (testing::GpusPresent() == 0) GTEST_SKIP() << "no GPU here (no /dev/nvidiaN)";
  const testing::PdserveRun probe = testing::RunPdserveWithOutput(
      "generate --json --max-tokens 1 --prompt hi --device cuda:0 --model " + model_);
  ASSERT_EQ(probe.exit_code, 0) << "a GPU is present, but pdserve generate --device cuda:0 "
                                   "failed:\n"
                                << probe.out << probe.err;
  ASSERT_NE(probe.out.find("\"text\""), std::string::npos) << probe.out << probe.err;
  auto p = Start("prefill", {"--device", "cuda:0"});
  auto d = Start("decode", {"--device", "cuda:0"});
  WaitForWorkers("prefill", 1);
  WaitForWorkers("decode", 1);
  for (int i = 0; i < 6; ++i) {
    const std::string prompt = "GPU prompt " + std::to_string(i) + std::string(i * 9, 'y');
    const std::string streamed =
        testing::ExpectGreedyMatchesGenerate(http_, model_, prompt, "--device cuda:0");
    EXPECT_NE(streamed.find("kv_transfer;dur="), std::string::npos);
  }
  const std::string log = LogOf(p);
  EXPECT_NE(log.find("connected (ipc)"), std::string::npos) << log;
  ExpectPagesReturnToZero(p);
  ExpectPagesReturnToZero(d);
}

TEST_F(DisaggregatedServingTest, KilledPrefillWorkerDuringItsTransferIsRetriedOnAnother) {
  // The first prefill worker pauses after each layer's push (4 layers: 2 s of transfer), so it
  // can be killed while the decode worker holds a half-written reservation.
  auto slow = Start("prefill", {"--debug-layer-delay-ms", "500"});
  WaitForWorkers("prefill", 1);
  auto d = Start("decode");
  WaitForWorkers("decode", 1);
  auto fast = Start("prefill");
  WaitForWorkers("prefill", 2);
  std::thread killer([&] {
    for (int i = 0; i < 200; ++i) {  // the slow worker has the prompt once its pages are used
      if (KvPagesUsed(slow) > 0) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(600));
    slow.process->Kill(SIGKILL);
  });
  const std::string prompt = "retry me";
  auto reference = nlohmann::json::parse(
      testing::RunPdserve("generate --json --ignore-eos --max-tokens 6 --threads 1 --model " +
                          model_ + " --prompt '" + prompt + "'"));
  auto r = Curl(http_, "/v1/completions",
                nlohmann::json{{"model", "tiny"},
                               {"prompt", prompt},
                               {"max_tokens", 6},
                               {"temperature", 0},
                               {"ignore_eos", true},
                               {"return_token_ids", true}}
                    .dump(),
                30);
  killer.join();
  ASSERT_EQ(r.status, 200) << r.body;
  const auto answer = nlohmann::json::parse(r.body);
  const auto& choice = answer["choices"][0];
  EXPECT_EQ(choice["token_ids"], reference["tokens"]) << r.body;
  EXPECT_EQ(choice["text"], reference["text"]);
  ExpectPagesReturnToZero(d);
  ExpectPagesReturnToZero(fast);
}

TEST_F(DisaggregatedServingTest, NewDecodeWorkerGetsTrafficAndADrainedOneFailsNothing) {
  auto p = Start("prefill");
  auto d1 = Start("decode");
  WaitForWorkers("prefill", 1);
  WaitForWorkers("decode", 1);
  std::atomic<bool> stop{false};
  std::atomic<int> ok{0}, failed{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 4; ++c) {
    clients.emplace_back([&] {
      while (!stop) {
        auto r = Curl(http_, "/v1/completions",
                      R"({"model":"tiny","prompt":"traffic","max_tokens":40,"ignore_eos":true})");
        auto j = nlohmann::json::parse(r.body, nullptr, false);
        const bool whole = r.status == 200 && j.is_object() &&
                           j["usage"]["completion_tokens"] == 40 &&
                           j["choices"][0]["finish_reason"] == "length";
        (whole ? ok : failed)++;
        if (!whole) ADD_FAILURE() << r.status << " " << r.body;
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  auto d2 = Start("decode");
  WaitForWorkers("decode", 2);
  const auto joined = std::chrono::steady_clock::now();
  bool used = false;
  while (!used && std::chrono::steady_clock::now() - joined < std::chrono::seconds(2)) {
    used = WorkerMetric(d2, "pdserve_generation_tokens_total") > 0;  // counted every step
  }
  EXPECT_TRUE(used) << "the new decode worker got no request within 2 s of joining";
  d1.process->Signal(SIGTERM);
  EXPECT_EQ(d1.process->Wait(std::chrono::seconds(20)), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  stop = true;
  for (auto& t : clients) t.join();
  EXPECT_EQ(failed, 0);
  EXPECT_GT(ok, 8);
  ExpectPagesReturnToZero(p);
  ExpectPagesReturnToZero(d2);
}

// The gateway dies (kill -9) while a prompt is mid-transfer, and a new one starts on the same
// control port: both workers drop that request, return its pages, dial the new gateway, register
// with it and serve it token for token.
TEST_F(DisaggregatedServingTest, WorkersRegisterAgainWhenTheGatewayRestarts) {
  // 250 ms after each of the 4 layers' pushes: a second in which the decode worker holds a
  // half-written reservation and the prefill worker an open transfer.
  auto p = Start("prefill", {"--debug-layer-delay-ms", "250"});
  auto d = Start("decode");
  WaitForWorkers("prefill", 1);
  WaitForWorkers("decode", 1);
  testing::ExpectGreedyMatchesGenerate(http_, model_, "before the restart");
  ExpectPagesReturnToZero(d);  // so that pages in use, next, are the request in flight's
  std::thread client([&] {
    Curl(http_, "/v1/completions",
         R"({"model":"tiny","prompt":"in flight","max_tokens":8,"ignore_eos":true})", 30);
  });
  bool reserved = false;
  for (int i = 0; i < 500 && !reserved; ++i) {
    reserved = KvPagesUsed(d) > 0;
    if (!reserved) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(reserved) << "the request never reached the decode worker";
  gateway_->Kill(SIGKILL);
  client.join();
  auto again = testing::StartGateway(dir_.path(), model_, {}, control_);
  ASSERT_TRUE(again.process) << "the gateway did not start again on control port " << control_;
  gateway_ = std::move(again.process);
  http_ = again.http_port;
  WaitForWorkers("prefill", 1);
  WaitForWorkers("decode", 1);
  // Four attempts: had the new gateway numbered them as the old one did, one would reuse the
  // dropped request's id, which the decode worker still holds as a failed transfer.
  testing::ExpectGreedyMatchesGenerate(http_, model_, "after the restart");
  testing::ExpectGreedyMatchesGenerate(http_, model_, "after the restart, again");
  for (const Worker* w : {&p, &d}) {
    const std::string log = LogOf(*w);
    EXPECT_NE(log.find("lost the gateway"), std::string::npos) << log;
    EXPECT_NE(log.find("connected again"), std::string::npos) << log;
  }
  ExpectPagesReturnToZero(p);
  ExpectPagesReturnToZero(d);
}

// The gateway is paused (SIGSTOP) for 4 s, past its 3 s heartbeat timeout, while a request is
// mid-transfer, then resumed: the workers' Loads wait unread in its sockets, so it must not drop
// them, and the request in flight completes token for token.
TEST_F(DisaggregatedServingTest, APausedGatewayKeepsItsWorkersAndTheRequestInFlight) {
  auto p = Start("prefill", {"--debug-layer-delay-ms", "250"});
  auto d = Start("decode");
  WaitForWorkers("prefill", 1);
  WaitForWorkers("decode", 1);
  const std::string prompt = "paused in flight";
  auto reference = nlohmann::json::parse(
      testing::RunPdserve("generate --json --ignore-eos --max-tokens 12 --threads 1 --model " +
                          model_ + " --prompt '" + prompt + "'"));
  testing::HttpResult answer;
  std::thread client([&] {
    answer = Curl(http_, "/v1/completions",
                  nlohmann::json{{"model", "tiny"},
                                 {"prompt", prompt},
                                 {"max_tokens", 12},
                                 {"temperature", 0},
                                 {"ignore_eos", true}}
                      .dump(),
                  60);
  });
  bool reserved = false;
  for (int i = 0; i < 500 && !reserved; ++i) {
    reserved = KvPagesUsed(d) > 0;
    if (!reserved) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(reserved) << "the request never reached the decode worker";
  gateway_->Signal(SIGSTOP);
  std::this_thread::sleep_for(std::chrono::seconds(4));
  gateway_->Signal(SIGCONT);
  client.join();
  ASSERT_EQ(answer.status, 200) << answer.body;
  EXPECT_EQ(nlohmann::json::parse(answer.body)["choices"][0]["text"], reference["text"]);
  std::ifstream gateway_log(dir_ / "gateway.log");
  std::stringstream gateway_text;
  gateway_text << gateway_log.rdbuf();
  EXPECT_EQ(gateway_text.str().find("no heartbeat"), std::string::npos) << gateway_text.str();
  EXPECT_NE(gateway_text.str().find("did not run for"), std::string::npos) << gateway_text.str();
  for (const Worker* w : {&p, &d}) {
    EXPECT_EQ(LogOf(*w).find("lost the gateway"), std::string::npos) << LogOf(*w);
  }
  WaitForWorkers("prefill", 1);
  WaitForWorkers("decode", 1);
  ExpectPagesReturnToZero(p);
  ExpectPagesReturnToZero(d);
}

// A gateway that freezes (SIGSTOP) keeps its sockets open, so only silence tells: a worker
// hears nothing for --gateway-silence-seconds, treats the gateway as lost, and once it is
// resumed registers with it again and serves.
TEST_F(DisaggregatedServingTest, WorkersNoticeAFrozenGatewayAndRegisterWhenItResumes) {
  auto p = Start("prefill", {"--gateway-silence-seconds", "1.5"});
  auto d = Start("decode", {"--gateway-silence-seconds", "1.5"});
  WaitForWorkers("prefill", 1);
  WaitForWorkers("decode", 1);
  gateway_->Signal(SIGSTOP);
  // Each worker logs that the gateway went silent, then, a moment later on another thread, that
  // it lost it: wait for both lines (the second may not be written when the first is read).
  auto logged = [&](const char* line) {
    return LogOf(p).find(line) != std::string::npos && LogOf(d).find(line) != std::string::npos;
  };
  bool noticed = false;
  const auto frozen = std::chrono::steady_clock::now();
  while (!noticed && std::chrono::steady_clock::now() - frozen < std::chrono::seconds(20)) {
    noticed = logged("sent nothing for 1500 ms") && logged("lost the gateway");
    if (!noticed) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  gateway_->Signal(SIGCONT);
  ASSERT_TRUE(noticed) << LogOf(p) << LogOf(d);
  // Without the gateway's heartbeats a healthy worker would be taken for lost in the same way.
  WaitForWorkers("prefill", 1);
  WaitForWorkers("decode", 1);
  testing::ExpectGreedyMatchesGenerate(http_, model_, "after the freeze");
  ExpectPagesReturnToZero(p);
  ExpectPagesReturnToZero(d);
}

// A gateway that does not come back within --gateway-reconnect-seconds: the worker stops with an
// error that says why, as it did before it dialled again.
TEST_F(DisaggregatedServingTest, AWorkerGivesUpOnAGatewayThatStaysAway) {
  auto d = Start("decode", {"--gateway-reconnect-seconds", "1"});
  WaitForWorkers("decode", 1);
  gateway_->Kill(SIGKILL);
  const auto killed = std::chrono::steady_clock::now();
  EXPECT_NE(d.process->Wait(std::chrono::seconds(30)), 0);
  EXPECT_LT(std::chrono::steady_clock::now() - killed, std::chrono::seconds(15));
  const std::string log = LogOf(d);
  EXPECT_NE(log.find("dialling it again for up to 1 s"), std::string::npos) << log;
}

// Each worker started with --step-log writes every engine step it runs, as it runs it: the
// prefill worker's are prompt-only and hold every prompt token the gateway counted, the decode
// worker's are decode-only and hold every token after each request's first. `pdserve profile
// calibrate` scales a profile to them: with a profile of 1 s steps, to each kind's median, and
// takes the decode worker's median gap between decode steps in a row.
TEST_F(DisaggregatedServingTest, WorkersLogTheirStepsForAProfileToBeCalibratedTo) {
  const std::string prefill_log = dir_ / "prefill-steps.jsonl";
  const std::string decode_log = dir_ / "decode-steps.jsonl";
  auto p = Start("prefill", {"--step-log", prefill_log});
  auto d = Start("decode", {"--step-log", decode_log});
  WaitForWorkers("prefill", 1);
  WaitForWorkers("decode", 1);
  int prompt_tokens = 0, later_tokens = 0;
  for (int i = 0; i < 6; ++i) {
    auto r = Curl(http_, "/v1/completions",
                  R"({"model":"tiny","max_tokens":6,"ignore_eos":true,"prompt":"steps )" +
                      std::string(static_cast<size_t>(i) * 9, 'a' + i) + R"("})");
    ASSERT_EQ(r.status, 200) << r.body;
    const auto usage = nlohmann::json::parse(r.body)["usage"];
    prompt_tokens += usage["prompt_tokens"].get<int>();
    later_tokens += usage["completion_tokens"].get<int>() - 1;
  }
  struct Sums {
    int steps = 0, prompt = 0, decode = 0;
    std::vector<double> seconds;
    std::vector<double> decode_gaps;  // before a decode step that followed one
  };
  auto sums = [](const std::string& path) {
    Sums s;
    bool last_decoded = false;
    std::istringstream lines(testing::ReadFile(path));
    for (std::string line; std::getline(lines, line);) {
      const auto step = nlohmann::json::parse(line);
      ++s.steps;
      s.prompt += step["prompt_tokens"].get<int>();
      s.decode += step["decode_tokens"].get<int>();
      s.seconds.push_back(step["seconds"].get<double>());
      EXPECT_GT(s.seconds.back(), 0) << line;
      // Every line but a writer's first says how long the worker was between steps.
      EXPECT_EQ(step.contains("gap_seconds"), s.steps > 1) << line;
      if (s.steps > 1 && step["decode_tokens"].get<int>() > 0 && last_decoded) {
        s.decode_gaps.push_back(step["gap_seconds"].get<double>());
      }
      last_decoded = step["decode_tokens"].get<int>() > 0;
    }
    return s;
  };
  // The last step's line may follow its tokens to the gateway by a moment.
  Sums pre, dec;
  EXPECT_TRUE(testing::Eventually([&] {
    pre = sums(prefill_log);
    dec = sums(decode_log);
    return pre.prompt == prompt_tokens && dec.decode == later_tokens;
  })) << pre.prompt
      << " of " << prompt_tokens << " prompt tokens, " << dec.decode << " of " << later_tokens
      << " decode tokens logged";
  EXPECT_EQ(pre.decode, 0);
  EXPECT_EQ(dec.prompt, 0);

  const std::string base = dir_ / "second.json";
  std::ofstream(base) << R"({"name": "second", "device": "test",
      "prefill": {"base": 1, "per_token": 0, "per_context": 0},
      "decode": {"base": 1, "per_token": 0, "per_context": 0},
      "range": {"prompt_tokens": 4096, "decode_tokens": 256, "max_context": 4096},
      "kv_bytes_per_token": 1024, "kv_bytes_per_second": 1e9, "n_layers": 2,
      "page_size": 16, "kv_pages": 2048, "cold_start_seconds": 0})";
  const std::string out = dir_ / "calibrated.json";
  auto run = testing::Pdserve("profile calibrate --profile " + base + " --steps " + prefill_log +
                              " --steps " + decode_log + " --min-steps 3 --out " + out);
  ASSERT_EQ(run.exit_code, 0) << run.out;
  const auto calibrated = nlohmann::json::parse(testing::ReadFile(out));
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  };
  EXPECT_NEAR(calibrated["prefill"]["base"].get<double>(), median(pre.seconds), 1e-12);
  EXPECT_NEAR(calibrated["decode"]["base"].get<double>(), median(dec.seconds), 1e-12);
  ASSERT_GE(dec.decode_gaps.size(), 3u);  // requests of 6 tokens decode 5 steps in a row
  EXPECT_NEAR(calibrated["decode_gap_seconds"].get<double>(), median(dec.decode_gaps), 1e-9);
  EXPECT_EQ(calibrated["name"], "calibrated");
  EXPECT_NE(calibrated["command"].get<std::string>().find("pdserve profile calibrate"),
            std::string::npos);
  EXPECT_NE(run.out.find(std::to_string(pre.steps) + " steps"), std::string::npos) << run.out;

  auto bad = testing::Pdserve("profile calibrate --profile " + base + " --steps " + base +
                              " --out " + dir_ / "never.json");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.out.find(base + ":1: "), std::string::npos) << bad.out;
}

}  // namespace
}  // namespace pdserve
