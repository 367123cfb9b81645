// End to end soak: 64 concurrent streaming clients for 60 s against a gateway, a prefill worker
// and a decode worker (every request's KV crosses between them). Every request sent must end with
// `data: [DONE]` or an OpenAI error object; none may be lost (a connection that ends early, a
// timeout, a stream without its end). What the clients saw must be what the gateway counted
// (requests finished, tokens generated). Afterwards nothing runs on the gateway or the workers,
// and every KV page is back.
// PDSERVE_SOAK_SECONDS shortens the run for a quick try.
//
// Bounded: clients stop sending at the end of the run, each request has a 30 s deadline, and
// start-up waits are bounded, so the test ends within about 100 s (ctest also times it out).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <random>

#include "tests/e2e/process.h"
#include "tests/model/random_model.h"

namespace pdserve {
namespace {

using model::testing::TempDir;
using testing::Curl;
using testing::HttpConnection;
using testing::HttpResponse;
using testing::Process;
using Clock = std::chrono::steady_clock;

constexpr int kClients = 64;
constexpr auto kRequestDeadline = std::chrono::seconds(30);

enum class Outcome { kDone, kErrorObject, kLost };

struct Record {
  int client = 0;
  Outcome outcome = Outcome::kLost;
  int status = 0;
  int completion_tokens = -1;  // from the usage chunk of a stream that ended in [DONE]
  std::string why;             // for errors and losses
};

// True when `text` is an OpenAI error object {"error": {"message": "..."}}.
bool IsErrorObject(const std::string& text) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  return !j.is_discarded() && j.is_object() && j.contains("error") && j["error"].is_object() &&
         j["error"].contains("message") && j["error"]["message"].is_string();
}

// Classifies one finished exchange. A 200 stream must end with `data: [DONE]` after its last
// event; an error inside it must be an error object. Any other status must carry an error object.
Record Classify(const HttpResponse& r) {
  Record rec;
  rec.status = r.status;
  if (r.status != 200) {
    rec.outcome = IsErrorObject(r.body) ? Outcome::kErrorObject : Outcome::kLost;
    rec.why = "HTTP " + std::to_string(r.status) + ": " + r.body.substr(0, 200);
    return rec;
  }
  bool done = false, error = false, bad = false;
  size_t pos = 0;
  while ((pos = r.body.find("data: ", pos)) != std::string::npos) {
    const size_t end = r.body.find("\n\n", pos);
    if (end == std::string::npos) {
      bad = true;
      break;
    }
    const std::string payload = r.body.substr(pos + 6, end - pos - 6);
    pos = end;
    if (done) bad = true;  // nothing may follow [DONE]
    if (payload == "[DONE]") {
      done = true;
    } else if (IsErrorObject(payload)) {
      error = true;
      rec.why = payload.substr(0, 200);
    } else if (auto chunk = nlohmann::json::parse(payload, nullptr, false); chunk.is_discarded()) {
      bad = true;
    } else if (chunk.contains("usage") && chunk["usage"].is_object()) {
      rec.completion_tokens = chunk["usage"].value("completion_tokens", -1);
    }
  }
  if (!done || bad || (!error && rec.completion_tokens < 0)) {
    if (done && !bad) rec.why = "no usage chunk";
    rec.outcome = Outcome::kLost;
    rec.why = (rec.why.empty() ? std::string(done ? "malformed events" : "no [DONE]") : rec.why) +
              ": ..." + r.body.substr(r.body.size() > 200 ? r.body.size() - 200 : 0);
  } else {
    rec.outcome = error ? Outcome::kErrorObject : Outcome::kDone;
  }
  return rec;
}

class SoakTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = testing::MakeTinyModel(dir_.path());
    ASSERT_FALSE(model_.empty()) << "pdserve make-model failed";
    gateway_ = testing::StartGateway(dir_.path(), model_, {"--io-threads", "2"});
    ASSERT_TRUE(gateway_.process) << "gateway did not start";
    http_ = gateway_.http_port;
    for (const char* kind : {"prefill", "decode"}) {
      workers_.push_back(std::make_unique<Process>(
          std::vector<std::string>{kind, "--model", model_, "--threads", "1", "--kv-memory-mb",
                                   "64", "--metrics-port", "0", "--gateway",
                                   "127.0.0.1:" + std::to_string(gateway_.control_port)},
          dir_ / (std::string(kind) + ".log")));
    }
    ASSERT_TRUE(testing::WaitForWorkerLoad(http_, 2, std::chrono::seconds(30)))
        << "the workers did not register";
  }

  TempDir dir_;
  std::string model_;
  testing::StartedGateway gateway_;
  std::vector<std::unique_ptr<Process>> workers_;
  int http_ = 0;
};

TEST_F(SoakTest, SixtyFourStreamingClientsForSixtySecondsLoseNoRequest) {
  const char* env = std::getenv("PDSERVE_SOAK_SECONDS");
  const int seconds = env ? std::max(1, std::atoi(env)) : 60;
  const auto stop_sending = Clock::now() + std::chrono::seconds(seconds);

  std::mutex mu;
  std::vector<Record> records;  // guarded by mu
  std::atomic<int> sent{0}, reconnects{0};
  auto client = [&](int id) {
    std::mt19937 rng(id);
    std::unique_ptr<HttpConnection> conn;
    for (int n = 0; Clock::now() < stop_sending; ++n) {
      if (!conn || !conn->connected()) {
        conn = std::make_unique<HttpConnection>(http_);
        ++reconnects;
      }
      const bool chat = (n + id) % 2 == 0;
      nlohmann::json body = {{"model", "tiny"},
                             {"max_tokens", 4 + static_cast<int>(rng() % 29)},
                             {"stream", true},
                             {"ignore_eos", rng() % 4 != 0},
                             {"stream_options", {{"include_usage", true}}}};
      if (chat) {
        body["messages"] = {
            {{"role", "user"},
             {"content", "client " + std::to_string(id) + " asks " + std::to_string(n)}}};
      } else {
        body["prompt"] = "client " + std::to_string(id) + " request " + std::to_string(n);
      }
      Record rec;
      rec.client = id;
      ++sent;
      const std::string path = chat ? "/v1/chat/completions" : "/v1/completions";
      HttpResponse response;
      std::string error;
      if (!conn->Send(testing::HttpRequestText("POST", path, body.dump()))) {
        rec.why = "send failed";
      } else if (!conn->ReadResponse(&response, Clock::now() + kRequestDeadline, &error)) {
        rec.status = response.status;
        rec.why = error + " (status " + std::to_string(response.status) + ", " +
                  std::to_string(response.body.size()) + " body bytes)";
      } else {
        rec = Classify(response);
        rec.client = id;
      }
      if (rec.outcome == Outcome::kLost || !response.keep_alive) conn.reset();
      std::lock_guard lock(mu);
      records.push_back(std::move(rec));
    }
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) threads.emplace_back(client, i);
  for (auto& t : threads) t.join();

  int done = 0, errors = 0, lost = 0;
  int64_t done_tokens = 0;
  std::map<std::string, int> error_kinds;
  for (const Record& r : records) {
    if (r.outcome == Outcome::kDone) {
      ++done;
      done_tokens += r.completion_tokens;
    }
    if (r.outcome == Outcome::kErrorObject) {
      ++errors;
      ++error_kinds[r.why.substr(0, 80)];
    }
    if (r.outcome == Outcome::kLost) {
      ++lost;
      if (lost <= 10) ADD_FAILURE() << "client " << r.client << " lost a request: " << r.why;
    }
  }
  std::printf(
      "%d s, %d clients: %d sent, %d ended in [DONE], %d in an error object, %d lost, "
      "%d connections\n",
      seconds, kClients, sent.load(), done, errors, lost, reconnects.load());
  for (const auto& [why, count] : error_kinds) std::printf("  %d x %s\n", count, why.c_str());

  EXPECT_EQ(lost, 0);
  // What the gateway counted, against what the clients saw: every stream that ended in [DONE]
  // without an error is a finished request there, with the tokens its usage chunk gave; a
  // request the client lost or counted twice would show here.
  EXPECT_EQ(testing::MetricSum(http_, "pdserve_request_success_total"), done);
  EXPECT_EQ(testing::MetricValue(http_, "pdserve_generation_tokens_total"),
            static_cast<double>(done_tokens));
  // MetricValue gives -1 for a metric the gateway does not export: that must fail, not pass.
  const double failures = testing::MetricValue(http_, "pdserve_request_failure_total");
  EXPECT_GE(failures, 0) << "pdserve_request_failure_total is missing from /metrics";
  EXPECT_LE(failures, errors);
  // A healthy prefill/decode pair serves (nearly) all of it; errors would mean refusals.
  EXPECT_GE(done, kClients) << "fewer requests completed than there are clients";
  EXPECT_LE(errors * 100, sent.load()) << "more than 1% of the requests ended in an error";

  // Nothing is left running anywhere, and the gateway still answers.
  bool idle = false;
  for (int i = 0; i < 100 && !idle; ++i) {
    idle = testing::SumOverWorkers(http_, "running") == 0 &&
           testing::SumOverWorkers(http_, "inflight") == 0 &&
           testing::MetricValue(http_, "pdserve_num_requests_running") == 0;
    if (!idle) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(idle) << testing::WorkerLoad(http_).dump();
  for (const char* kind : {"prefill", "decode"}) {
    testing::ExpectPagesReturnToZero(dir_ / (std::string(kind) + ".log"));
  }
  testing::ExpectGreedyMatchesGenerate(http_, model_, "after the soak");
}

}  // namespace
}  // namespace pdserve
