// A fake OpenAI-compatible streaming server for tests and for measuring the load generator
// itself (`pdserve bench fake-server`). Answers POST /v1/completions and /v1/chat/completions
// with `max_tokens` SSE chunks after an injected TTFT and inter-token gap (both zero: the whole
// stream in one write, the fastest a server can be), honours `stream_options.include_usage`, and
// can inject faults, cycled by request number: a 500 with an OpenAI error body, a hang, a close
// mid-stream, a chunk that is not JSON. With `prefix_cache`, it plays one unbounded prefix cache
// over words (one word, one token): a request's usage carries prompt_tokens_details.cached_tokens,
// the leading whole 16-word blocks of its prompt (the message contents in order, for chat) that an
// earlier request's prompt and answer held, never its last word; a request's blocks, answer but
// its last word included, are cached when it arrives. A request with n, logprobs or tools gets
// n choices, each token's logprob (-0.5) and a call of its first tool (arguments "{}"), streamed
// as OpenAI streams them. Listens on loopback by default; port 0 lets the OS pick.
// Thread-safety: Start/Stop/port/counters may be called from any thread; the server runs on its
// own threads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace pdserve::bench {

enum class FakeFault {
  kNone,
  kHttp500,         // 500 with {"error":{"message":"injected failure",...}}
  kHang,            // reads the request, never answers
  kCloseMidStream,  // streams two chunks, then closes the connection
  kBadJson,         // streams one chunk, then a data line that is not JSON
  kHttp429,         // 429 with Retry-After: 7, as a server at capacity answers
};

struct FakeServerOptions {
  std::string address = "127.0.0.1";  // listen address
  uint16_t port = 0;                  // 0: chosen by the OS, read back with port()
  double ttft_s = 0;                  // delay before the first token chunk
  double itl_s = 0;                   // delay between token chunks
  int64_t default_tokens = 16;        // when the request sets no max_tokens
  int threads = 1;                    // io threads
  std::vector<FakeFault> faults;      // request i gets faults[i % size]; empty: none
  bool prefix_cache = false;          // report cached_tokens as described above
  std::string tls_cert_pem;           // PEM; with tls_key_pem, serve https
  std::string tls_key_pem;            // PEM
};

class FakeOpenAiServer {
 public:
  static Result<std::unique_ptr<FakeOpenAiServer>> Start(const FakeServerOptions& options);
  ~FakeOpenAiServer();

  uint16_t port() const;
  int64_t requests_received() const;
  // Stops accepting, closes connections and joins the threads. Idempotent.
  void Stop();
  // Blocks until Stop is called from another thread or a signal handler path.
  void Wait();

  struct State;

 private:
  explicit FakeOpenAiServer(std::shared_ptr<State> state) : state_(std::move(state)) {}
  std::shared_ptr<State> state_;
};

}  // namespace pdserve::bench
