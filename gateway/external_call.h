// ExternalCall: one attempt of a request on an external OpenAI-compatible upstream
// (router/external_upstream.h): resolves and dials its host, over TLS for https:// (the
// certificate checked against the system's CAs, or `ca_file`, and the host's name), posts the
// body, and reads the answer as it comes: a streamed one event by event, a whole one at its end.
// Each piece of text goes to `on_chunk` as it is read; `on_end` is called once, with how the
// attempt ended. Every step has a timeout (connect 10 s, then 60 s without a byte); an answer
// body is bounded (16 MiB whole, 4 MiB an event). Nothing an upstream sends can crash the
// gateway: bad HTTP, SSE or JSON ends the attempt with an error.
//
// Threads: the call runs on the strand it is given; on_chunk and on_end are called on it;
// Cancel may be called from any thread (it is posted to the strand). The call keeps itself
// alive until on_end.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/ssl/context.hpp>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "gateway/api_error.h"
#include "gateway/upstream_protocol.h"
#include "router/external_upstream.h"

namespace pdserve::gateway {

// A TLS client context for upstreams: peer verification on, TLS 1.2 at least, the system's CA
// paths or `ca_file` (PEM). InvalidArgument when the file cannot be loaded.
Result<std::shared_ptr<boost::asio::ssl::context>> MakeUpstreamTlsContext(
    const std::string& ca_file = "");

struct ExternalEnd {
  bool ok = false;  // a complete answer (a finish reason, or the stream's [DONE])
  // Not ok: the error for the client, and whether another upstream (or self-hosted workers)
  // may succeed where this failed.
  ApiError error;
  bool retryable = true;
  std::string finish_reason;                                // the upstream's last one
  std::optional<int64_t> prompt_tokens, completion_tokens;  // the usage it reported
  std::optional<int64_t> cached_prompt_tokens;  // its usage.prompt_tokens_details.cached_tokens
};

struct ExternalCallbacks {
  std::function<void(const std::string& text)> on_text;  // text as it arrives (may be empty)
  // Set: each chunk's `choices` array (the whole response's), as the upstream wrote it (compact
  // JSON), before its text.
  std::function<void(const std::string& choices)> on_choices;
  std::function<void(const ExternalEnd& end)> on_end;
};

class ExternalCall {
 public:
  // `target`: the endpoint's path ("/v1/completions"), after the upstream's prefix.
  static std::shared_ptr<ExternalCall> Start(boost::asio::any_io_executor strand,
                                             std::shared_ptr<boost::asio::ssl::context> tls,
                                             const router::UpstreamConfig& upstream,
                                             const std::string& target, std::string body,
                                             bool stream, ExternalCallbacks callbacks);
  // Stops the attempt; on_end is not called after it.
  void Cancel();

  struct Impl;
  explicit ExternalCall(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace pdserve::gateway
