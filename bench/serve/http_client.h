// The load generator's HTTP/1.1 client: sends OpenAI-style streaming requests on one Asio
// io_context (over common/http_client.h's connections) and turns each response into a
// RequestRecord (TTFT, every chunk's arrival, usage, or the reason it failed). Keeps a pool of
// keep-alive connections to one host; a request takes an idle connection or dials a new one, so
// connections grow to the concurrency in flight. A stale pooled connection that fails before any
// response byte is retried once on a fresh one. Every request has a deadline; nothing a server
// sends can crash the client: malformed HTTP, SSE or JSON becomes a failure with its reason. Bodies
// are streamed with no size limit, error bodies are truncated. Thread-safety: owned by the thread
// that runs the io_context; call Send and CloseIdle only from that thread (or before it runs).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include <boost/asio/io_context.hpp>

#include "bench/serve/request_record.h"
#include "common/status.h"

namespace pdserve::bench {

// Where requests go: parsed from a base URL such as "http://127.0.0.1:8000".
struct HttpTarget {
  std::string host;
  std::string port = "80";  // 443 for https
  std::string path_prefix;  // "/openai" in "http://host/openai"; prepended to each endpoint
  bool tls = false;         // https
};

// Accepts http[s]://host[:port][/prefix].
Result<HttpTarget> ParseBaseUrl(std::string_view url);

struct StreamingClientOptions {
  double request_timeout_s = 600;          // whole request, connect to last byte; > 0
  std::string api_key;                     // sent as "Authorization: Bearer ..." when set
  bool tls_verify = true;                  // https: check the certificate and the host name
  std::string tls_ca_file;                 // https: CA bundle (PEM); "" = the system's
  size_t max_idle_connections = 4096;      // idle keep-alive connections kept for reuse
  size_t max_error_body_bytes = 64 << 10;  // of a non-200 body, kept for the error message
};

struct StreamRequest {
  int64_t index = 0;
  std::string target;                 // full request path, e.g. "/v1/completions"
  const std::string* body = nullptr;  // JSON; must outlive the request
  int64_t prompt_tokens = 0;          // used when the server reports no usage
};

class StreamingHttpClient {
 public:
  using Clock = std::chrono::steady_clock;

  // Times in records are seconds since `epoch`.
  StreamingHttpClient(boost::asio::io_context& io, HttpTarget target,
                      StreamingClientOptions options, Clock::time_point epoch);
  ~StreamingHttpClient();
  StreamingHttpClient(const StreamingHttpClient&) = delete;
  StreamingHttpClient& operator=(const StreamingHttpClient&) = delete;

  // Loads CA certificates (https) and resolves the host once (blocking). Must succeed before
  // Send.
  Status Resolve();
  // Starts one request; `done` runs once, on the io_context thread, with its record.
  void Send(const StreamRequest& request, std::function<void(RequestRecord)> done);
  // Closes the pooled idle connections (at the end of a run).
  void CloseIdle();
  int64_t connections_opened() const;

  struct Pool;  // implementation detail, shared with in-flight requests

 private:
  std::shared_ptr<Pool> pool_;
};

}  // namespace pdserve::bench
