#include "gateway/external_call.h"

#include <spdlog/spdlog.h>

#include <boost/asio/dispatch.hpp>

#include "common/http_client.h"
#include "common/openai_stream_chunk.h"
#include "common/sse_parser.h"

namespace pdserve::gateway {

namespace asio = boost::asio;

namespace {
constexpr auto kConnectTimeout = std::chrono::seconds(10);
constexpr auto kIdleTimeout = std::chrono::seconds(60);  // without a byte, once connected
constexpr size_t kMaxWholeBody = 16 << 20;

HttpEndpoint EndpointOf(const router::UpstreamConfig& upstream,
                        std::shared_ptr<asio::ssl::context> tls) {
  HttpEndpoint endpoint;
  endpoint.host = upstream.parsed.host;
  endpoint.port = upstream.parsed.port;
  endpoint.tls = upstream.parsed.tls;
  endpoint.tls_context = std::move(tls);
  return endpoint;
}

// What a step that failed says in the client's error.
std::string StepFailure(const HttpEnd& end, const std::string& host) {
  switch (end.step) {
    case HttpStep::kResolve:
      return "cannot resolve " + host;
    case HttpStep::kConnect:
      return "cannot connect";
    case HttpStep::kTlsHandshake:
      return "TLS handshake failed";
    case HttpStep::kWrite:
      return "cannot send the request";
    case HttpStep::kReadHeader:
      return "no answer";
    case HttpStep::kReadBody:
      return "the answer broke off";
  }
  return "failed";
}
}  // namespace

Result<std::shared_ptr<asio::ssl::context>> MakeUpstreamTlsContext(const std::string& ca_file) {
  return MakeTlsClientContext(ca_file);
}

struct ExternalCall::Impl : std::enable_shared_from_this<ExternalCall::Impl> {
  Impl(asio::any_io_executor strand, std::shared_ptr<asio::ssl::context> tls_context,
       const router::UpstreamConfig& upstream, const std::string& target, std::string body,
       bool stream, ExternalCallbacks callbacks)
      : strand(strand),
        connection(strand, EndpointOf(upstream, std::move(tls_context))),
        upstream(upstream),
        stream(stream),
        callbacks(std::move(callbacks)) {
    request.target = upstream.parsed.path_prefix + target;
    request.fields = {{"User-Agent", "pdserve"},
                      {"Content-Type", "application/json"},
                      {"Accept", stream ? "text/event-stream" : "application/json"}};
    if (!upstream.api_key.empty()) {
      request.fields.emplace_back("Authorization", "Bearer " + upstream.api_key);
    }
    request.keep_alive = false;
    request.body = std::move(body);
  }

  void Run() {
    HttpTimeouts timeouts;
    timeouts.connect = kConnectTimeout;
    timeouts.idle = kIdleTimeout;
    HttpHandlers handlers;
    handlers.on_head = [self = shared_from_this()](const HttpHead& head) {
      self->status = head.status;
    };
    handlers.on_body = [self = shared_from_this()](std::string_view bytes) {
      return self->Consume(bytes);
    };
    handlers.on_end = [self = shared_from_this()](const HttpEnd& end) {
      if (self->done) return;
      if (!end.ok()) {
        return self->Fail(StepFailure(end, self->upstream.parsed.host) + ": " + end.code.message(),
                          true);
      }
      self->Finish();
    };
    connection.Exchange(std::move(request), timeouts, std::move(handlers));
  }

  // False when the attempt ended on what was read.
  bool Consume(std::string_view bytes) {
    if (done) return false;
    if (status != 200 || !stream) {
      if (whole.size() + bytes.size() > kMaxWholeBody) {
        Fail("its answer exceeds " + std::to_string(kMaxWholeBody) + " bytes", true);
        return false;
      }
      whole.append(bytes);
      return true;
    }
    Status s = sse.Feed(bytes, [this](SseEvent& event) {
      if (done) return;
      auto c = ParseOpenAiStreamData(event.data, static_cast<bool>(callbacks.on_choices));
      if (!c.ok()) return Fail("its answer cannot be read: " + c.status().message(), true);
      if (c->done) {
        saw_done = true;
        return;
      }
      Take(*c);
    });
    if (!s.ok() && !done) Fail(s.message(), true);
    return !done;
  }

  void Take(const OpenAiChunk& c) {
    if (c.error) return Fail("its stream failed: " + *c.error, true);
    if (c.prompt_tokens) end.prompt_tokens = c.prompt_tokens;
    if (c.completion_tokens) end.completion_tokens = c.completion_tokens;
    if (c.cached_prompt_tokens) end.cached_prompt_tokens = c.cached_prompt_tokens;
    if (!c.finish_reason.empty()) end.finish_reason = c.finish_reason;
    if (!c.choices.empty() && callbacks.on_choices) callbacks.on_choices(c.choices);
    if (!c.text.empty() && callbacks.on_text) callbacks.on_text(c.text);
  }

  void Finish() {
    if (status != 200) {
      ApiError e = UpstreamError(upstream.name, status, whole);
      return End(false, std::move(e), RetryableUpstreamStatus(status));
    }
    if (!stream) {
      auto c = ParseOpenAiResponse(whole, static_cast<bool>(callbacks.on_choices));
      if (!c.ok()) return Fail("its answer cannot be read: " + c.status().message(), true);
      Take(*c);
      if (done) return;
    }
    if (stream && !saw_done && end.finish_reason.empty()) {
      return Fail("its stream ended without a finish reason or [DONE]", true);
    }
    End(true, {}, false);
  }

  void Fail(const std::string& why, bool retryable) {
    ApiError e = ApiError::Internal("The external upstream '" + upstream.name + "' failed: " + why);
    e.http_status = 502;
    e.type = "upstream_error";
    e.code = "external_upstream_failed";
    End(false, std::move(e), retryable);
  }

  void End(bool ok, ApiError error, bool retryable) {
    if (done) return;
    done = true;
    connection.Close();
    end.ok = ok;
    end.error = std::move(error);
    end.retryable = retryable;
    auto on_end = std::move(callbacks.on_end);
    callbacks = {};  // they hold the caller: let it go
    if (on_end) on_end(end);
  }

  asio::any_io_executor strand;
  HttpConnection connection;
  const router::UpstreamConfig upstream;
  const bool stream;
  ExternalCallbacks callbacks;
  HttpRequest request;
  int status = 0;
  std::string whole;       // a whole answer, or an error's body
  SseParser sse{4 << 20};  // an upstream chunk is small: an event past 4 MiB is an error
  bool saw_done = false;
  bool done = false;  // ended or cancelled
  ExternalEnd end;
};

std::shared_ptr<ExternalCall> ExternalCall::Start(asio::any_io_executor strand,
                                                  std::shared_ptr<asio::ssl::context> tls,
                                                  const router::UpstreamConfig& upstream,
                                                  const std::string& target, std::string body,
                                                  bool stream, ExternalCallbacks callbacks) {
  auto impl = std::make_shared<Impl>(strand, std::move(tls), upstream, target, std::move(body),
                                     stream, std::move(callbacks));
  asio::dispatch(strand, [impl] { impl->Run(); });
  return std::make_shared<ExternalCall>(impl);
}

void ExternalCall::Cancel() {
  auto impl = impl_;
  asio::dispatch(impl->strand, [impl] {
    if (impl->done) return;
    impl->done = true;
    impl->callbacks = {};
    impl->connection.Close();
  });
}

}  // namespace pdserve::gateway
