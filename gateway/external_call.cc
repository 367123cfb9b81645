#include "gateway/external_call.h"

#include <spdlog/spdlog.h>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <limits>

#include "common/sse_parser.h"

namespace pdserve::gateway {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using error_code = boost::system::error_code;

namespace {
constexpr auto kConnectTimeout = std::chrono::seconds(10);
constexpr auto kIdleTimeout = std::chrono::seconds(60);  // without a byte, once connected
constexpr size_t kMaxWholeBody = 16 << 20;
}  // namespace

Result<std::shared_ptr<asio::ssl::context>> MakeUpstreamTlsContext(const std::string& ca_file) {
  auto tls = std::make_shared<asio::ssl::context>(asio::ssl::context::tls_client);
  tls->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                   asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                   asio::ssl::context::no_tlsv1_1);
  tls->set_verify_mode(asio::ssl::verify_peer);
  error_code ec;
  if (ca_file.empty()) {
    tls->set_default_verify_paths(ec);
  } else {
    tls->load_verify_file(ca_file, ec);
  }
  if (ec) {
    return InvalidArgument("cannot load CA certificates" +
                           (ca_file.empty() ? std::string() : " from " + ca_file) + ": " +
                           ec.message());
  }
  return tls;
}

struct ExternalCall::Impl : std::enable_shared_from_this<ExternalCall::Impl> {
  Impl(asio::any_io_executor strand, std::shared_ptr<asio::ssl::context> tls_context,
       const router::UpstreamConfig& upstream, const std::string& target, std::string body,
       bool stream, ExternalCallbacks callbacks)
      : tls_context(std::move(tls_context)),
        socket(strand, *this->tls_context),
        resolver(strand),
        upstream(upstream),
        stream(stream),
        callbacks(std::move(callbacks)) {
    request.method(http::verb::post);
    request.target(upstream.parsed.path_prefix + target);
    request.version(11);
    const bool default_port = upstream.parsed.port == (upstream.parsed.tls ? "443" : "80");
    request.set(http::field::host, default_port
                                       ? upstream.parsed.host
                                       : upstream.parsed.host + ":" + upstream.parsed.port);
    request.set(http::field::user_agent, "pdserve");
    request.set(http::field::content_type, "application/json");
    request.set(http::field::accept, stream ? "text/event-stream" : "application/json");
    if (!upstream.api_key.empty()) {
      request.set(http::field::authorization, "Bearer " + upstream.api_key);
    }
    request.keep_alive(false);
    request.body() = std::move(body);
    request.prepare_payload();
  }

  beast::tcp_stream& Lowest() { return beast::get_lowest_layer(socket); }

  // Calls f with the connection's byte stream: TLS or the plain one.
  template <typename F>
  void WithStream(F&& f) {
    if (upstream.parsed.tls) {
      f(socket);
    } else {
      f(socket.next_layer());
    }
  }

  void Run() {
    resolver.async_resolve(
        upstream.parsed.host, upstream.parsed.port,
        [self = shared_from_this()](error_code ec, tcp::resolver::results_type results) {
          if (self->done) return;
          if (ec) return self->Broken("cannot resolve " + self->upstream.parsed.host, ec);
          self->Lowest().expires_after(kConnectTimeout);
          self->Lowest().async_connect(
              results, [self](error_code ec, const tcp::endpoint&) { self->OnConnect(ec); });
        });
  }

  void OnConnect(error_code ec) {
    if (done) return;
    if (ec) return Broken("cannot connect", ec);
    if (!upstream.parsed.tls) return Write();
    if (!SSL_set_tlsext_host_name(socket.native_handle(), upstream.parsed.host.c_str())) {
      return Broken(
          "cannot set the TLS server name",
          error_code(static_cast<int>(::ERR_get_error()), asio::error::get_ssl_category()));
    }
    socket.set_verify_callback(asio::ssl::host_name_verification(upstream.parsed.host));
    Lowest().expires_after(kConnectTimeout);
    socket.async_handshake(asio::ssl::stream_base::client,
                           [self = shared_from_this()](error_code ec) {
                             if (self->done) return;
                             if (ec) return self->Broken("TLS handshake failed", ec);
                             self->Write();
                           });
  }

  void Write() {
    Lowest().expires_after(kIdleTimeout);
    WithStream([this](auto& s) {
      http::async_write(s, request, [self = shared_from_this()](error_code ec, size_t) {
        if (self->done) return;
        if (ec) return self->Broken("cannot send the request", ec);
        self->ReadHeader();
      });
    });
  }

  void ReadHeader() {
    parser.emplace();
    parser->body_limit(std::numeric_limits<std::uint64_t>::max());  // bounded as it is read
    Lowest().expires_after(kIdleTimeout);
    WithStream([this](auto& s) {
      http::async_read_header(s, buffer, *parser,
                              [self = shared_from_this()](error_code ec, size_t) {
                                if (self->done) return;
                                if (ec) return self->Broken("no answer", ec);
                                self->status = self->parser->get().result_int();
                                if (self->parser->is_done()) return self->Finish();
                                self->ReadBody();
                              });
    });
  }

  void ReadBody() {
    parser->get().body().data = chunk;
    parser->get().body().size = sizeof chunk;
    Lowest().expires_after(kIdleTimeout);
    WithStream([this](auto& s) {
      // read_some: a streamed event is handed on as soon as its bytes arrive.
      http::async_read_some(s, buffer, *parser, [self = shared_from_this()](error_code ec, size_t) {
        if (self->done) return;
        if (ec == http::error::need_buffer) ec = {};
        const size_t n = sizeof self->chunk - self->parser->get().body().size;
        if (n > 0 && !self->Consume(std::string_view(self->chunk, n))) return;
        if (ec) return self->Broken("the answer broke off", ec);
        if (self->parser->is_done()) return self->Finish();
        self->ReadBody();
      });
    });
  }

  // False when the attempt ended on what was read.
  bool Consume(std::string_view bytes) {
    if (status != 200 || !stream) {
      if (whole.size() + bytes.size() > kMaxWholeBody) {
        Fail("its answer exceeds " + std::to_string(kMaxWholeBody) + " bytes", true);
        return false;
      }
      whole.append(bytes);
      return true;
    }
    Status s = sse.Feed(bytes, [this](SseEvent& event) {
      const std::string_view data = event.data;
      if (done) return;
      if (data == "[DONE]") {
        saw_done = true;
        return;
      }
      auto c = ParseUpstreamChunk(data);
      if (!c.ok()) return Fail(c.status().message(), true);
      Take(*c);
    });
    if (!s.ok() && !done) Fail(s.message(), true);
    return !done;
  }

  void Take(const UpstreamChunk& c) {
    if (c.error) return Fail("its stream failed: " + *c.error, true);
    if (c.prompt_tokens) end.prompt_tokens = c.prompt_tokens;
    if (c.completion_tokens) end.completion_tokens = c.completion_tokens;
    if (!c.finish_reason.empty()) end.finish_reason = c.finish_reason;
    if (!c.text.empty() && callbacks.on_text) callbacks.on_text(c.text);
  }

  void Finish() {
    if (status != 200) {
      ApiError e = UpstreamError(upstream.name, status, whole);
      return End(false, std::move(e), RetryableUpstreamStatus(status));
    }
    if (!stream) {
      auto c = ParseUpstreamResponse(whole);
      if (!c.ok()) return Fail(c.status().message(), true);
      Take(*c);
      if (done) return;
    }
    if (stream && !saw_done && end.finish_reason.empty()) {
      return Fail("its stream ended without a finish reason or [DONE]", true);
    }
    End(true, {}, false);
  }

  void Broken(const std::string& what, error_code ec) { Fail(what + ": " + ec.message(), true); }

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
    Close();
    end.ok = ok;
    end.error = std::move(error);
    end.retryable = retryable;
    auto on_end = std::move(callbacks.on_end);
    callbacks = {};  // they hold the caller: let it go
    if (on_end) on_end(end);
  }

  void Close() {
    error_code ignored;
    resolver.cancel();
    Lowest().socket().shutdown(tcp::socket::shutdown_both, ignored);
    Lowest().close();
  }

  std::shared_ptr<asio::ssl::context> tls_context;
  beast::ssl_stream<beast::tcp_stream> socket;
  tcp::resolver resolver;
  const router::UpstreamConfig upstream;
  const bool stream;
  ExternalCallbacks callbacks;
  http::request<http::string_body> request;
  beast::flat_buffer buffer;
  std::optional<http::response_parser<http::buffer_body>> parser;
  char chunk[16384];
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
  asio::dispatch(impl->socket.get_executor(), [impl] {
    if (impl->done) return;
    impl->done = true;
    impl->callbacks = {};
    impl->Close();
  });
}

}  // namespace pdserve::gateway
