// The only translation unit of the client that includes Beast (it is heavy to compile).
#include "common/http_client.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <limits>
#include <optional>

namespace pdserve {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using error_code = boost::system::error_code;

struct HttpAddresses {
  tcp::resolver::results_type results;
};

Result<std::shared_ptr<const HttpAddresses>> ResolveHttpHost(const std::string& host,
                                                             const std::string& port) {
  asio::io_context io;
  tcp::resolver resolver(io);
  error_code ec;
  auto addresses = std::make_shared<HttpAddresses>();
  addresses->results = resolver.resolve(host, port, ec);
  if (ec) return Unavailable(fmt::format("cannot resolve {}:{}: {}", host, port, ec.message()));
  return std::shared_ptr<const HttpAddresses>(std::move(addresses));
}

Result<std::shared_ptr<asio::ssl::context>> MakeTlsClientContext(const std::string& ca_file) {
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

namespace {

HttpEnd::Error Classify(error_code ec) {
  if (ec == beast::error::timeout) return HttpEnd::Error::kTimeout;
  if (ec == asio::error::eof || ec == asio::error::connection_reset ||
      ec == asio::error::broken_pipe || ec == asio::ssl::error::stream_truncated ||
      ec == http::error::end_of_stream) {
    return HttpEnd::Error::kClosed;
  }
  if (ec == http::error::partial_message) return HttpEnd::Error::kClosedMidReply;
  if (ec.category() == http::make_error_code(http::error::bad_version).category()) {
    return HttpEnd::Error::kMalformed;
  }
  return HttpEnd::Error::kOther;
}

// What one dial made: the byte stream (TLS or plain) and what was read past a message.
struct Link {
  std::optional<beast::tcp_stream> plain;
  std::optional<beast::ssl_stream<beast::tcp_stream>> secure;
  beast::flat_buffer buffer;

  beast::tcp_stream& Lowest() { return secure ? beast::get_lowest_layer(*secure) : *plain; }
  bool IsOpen() { return Lowest().socket().is_open(); }
  void Close() {
    error_code ignored;
    Lowest().socket().shutdown(tcp::socket::shutdown_both, ignored);
    Lowest().close();
  }
  // Calls f with the byte stream: TLS or the plain one.
  template <typename F>
  void WithStream(F&& f) {
    if (secure) {
      f(*secure);
    } else {
      f(*plain);
    }
  }
};

// One exchange: what it sends, how it reads and whom it tells.
struct Round {
  HttpTimeouts timeouts;
  HttpHandlers handlers;
  http::request<http::string_body> request;
  std::optional<http::response_parser<http::buffer_body>> parser;
  std::array<char, 16384> piece;
};

}  // namespace

// Each asynchronous step holds the link and the round it works on, so that a close or a later
// exchange never frees what a pending operation still uses; a step whose round is no longer
// the current one stops there.
struct HttpConnection::Impl : std::enable_shared_from_this<HttpConnection::Impl> {
  using Clock = HttpTimeouts::Clock;
  using RoundPtr = std::shared_ptr<Round>;
  using LinkPtr = std::shared_ptr<Link>;

  Impl(asio::any_io_executor executor, HttpEndpoint endpoint)
      : executor(executor),
        endpoint(std::move(endpoint)),
        resolver(executor),
        resolve_timer(executor) {
    const bool default_port = this->endpoint.port == (this->endpoint.tls ? "443" : "80");
    const std::string& host = this->endpoint.host;
    const std::string bracketed = host.find(':') == std::string::npos ? host : "[" + host + "]";
    host_field = default_port ? bracketed : bracketed + ":" + this->endpoint.port;
  }

  // The time a step may take: `limit`, and no later than the deadline.
  static Clock::time_point Until(const HttpTimeouts& t, Clock::duration limit) {
    const Clock::time_point now = Clock::now();
    return t.deadline - now < limit ? t.deadline : now + limit;
  }

  void Start(HttpRequest r, HttpTimeouts t, HttpHandlers h) {
    auto next = std::make_shared<Round>();
    next->timeouts = t;
    next->handlers = std::move(h);
    auto& request = next->request;
    request.method(http::string_to_verb(r.method));
    request.target(r.target);
    request.version(11);
    request.set(http::field::host, host_field);
    for (auto& [name, value] : r.fields) request.set(name, value);
    request.keep_alive(r.keep_alive);
    request.body() = std::move(r.body);
    request.prepare_payload();
    round = next;
    asio::post(executor, [self = shared_from_this(), next] {
      if (next != self->round) return;
      if (self->IsOpen()) return self->Write(self->link, next);
      self->Dial(next);
    });
  }

  void Dial(const RoundPtr& r) {
    if (link) link->Close();
    link = std::make_shared<Link>();
    if (endpoint.tls) {
      link->secure.emplace(executor, *endpoint.tls_context);
    } else {
      link->plain.emplace(executor);
    }
    if (endpoint.addresses) return Connect(link, r, endpoint.addresses->results);
    resolve_timed_out = false;
    resolve_timer.expires_at(Until(r->timeouts, r->timeouts.connect));
    resolve_timer.async_wait([self = shared_from_this(), r](error_code ec) {
      if (ec || r != self->round) return;
      self->resolve_timed_out = true;
      self->resolver.cancel();
    });
    resolver.async_resolve(endpoint.host, endpoint.port,
                           [self = shared_from_this(), l = link, r](
                               error_code ec, tcp::resolver::results_type results) {
                             if (r != self->round) return;
                             self->resolve_timer.cancel();
                             if (self->resolve_timed_out) ec = beast::error::timeout;
                             if (ec) return self->Fail(l, r, HttpStep::kResolve, ec);
                             self->Connect(l, r, results);
                           });
  }

  void Connect(const LinkPtr& l, const RoundPtr& r, const tcp::resolver::results_type& results) {
    l->Lowest().expires_at(Until(r->timeouts, r->timeouts.connect));
    l->Lowest().async_connect(
        results, [self = shared_from_this(), l, r](error_code ec, const tcp::endpoint&) {
          if (r != self->round) return;
          if (ec) return self->Fail(l, r, HttpStep::kConnect, ec);
          error_code ignored;
          l->Lowest().socket().set_option(tcp::no_delay(true), ignored);
          if (l->secure) return self->Handshake(l, r);
          self->Write(l, r);
        });
  }

  void Handshake(const LinkPtr& l, const RoundPtr& r) {
    const std::string& host = endpoint.host;
    auto& stream = *l->secure;
    if (!SSL_set_tlsext_host_name(stream.native_handle(), host.c_str())) {
      return Fail(l, r, HttpStep::kTlsHandshake,
                  error_code(static_cast<int>(::ERR_get_error()), asio::error::get_ssl_category()));
    }
    if (endpoint.verify_peer) {
      stream.set_verify_mode(asio::ssl::verify_peer);
      stream.set_verify_callback(asio::ssl::host_name_verification(host));
    } else {
      stream.set_verify_mode(asio::ssl::verify_none);
    }
    l->Lowest().expires_at(Until(r->timeouts, r->timeouts.connect));
    stream.async_handshake(asio::ssl::stream_base::client,
                           [self = shared_from_this(), l, r](error_code ec) {
                             if (r != self->round) return;
                             if (ec) return self->Fail(l, r, HttpStep::kTlsHandshake, ec);
                             self->Write(l, r);
                           });
  }

  void Write(const LinkPtr& l, const RoundPtr& r) {
    l->Lowest().expires_at(Until(r->timeouts, r->timeouts.idle));
    l->WithStream([&](auto& s) {
      http::async_write(s, r->request, [self = shared_from_this(), l, r](error_code ec, size_t) {
        if (r != self->round) return;
        if (ec) return self->Fail(l, r, HttpStep::kWrite, ec);
        self->ReadHeader(l, r);
      });
    });
  }

  void ReadHeader(const LinkPtr& l, const RoundPtr& r) {
    r->parser.emplace();
    // Bodies are bounded by whoever reads them. Not boost::none: Boost 1.74 compares a
    // Content-Length against an empty optional as "over the limit".
    r->parser->body_limit(std::numeric_limits<std::uint64_t>::max());
    l->buffer.clear();
    l->Lowest().expires_at(Until(r->timeouts, r->timeouts.idle));
    l->WithStream([&](auto& s) {
      http::async_read_header(s, l->buffer, *r->parser,
                              [self = shared_from_this(), l, r](error_code ec, size_t) {
                                if (r != self->round) return;
                                if (ec) return self->Fail(l, r, HttpStep::kReadHeader, ec);
                                const auto& header = r->parser->get();
                                HttpHead head;
                                head.status = header.result_int();
                                head.content_type = std::string(header[http::field::content_type]);
                                head.retry_after = std::string(header[http::field::retry_after]);
                                if (r->handlers.on_head) r->handlers.on_head(head);
                                if (r != self->round) return;
                                if (r->parser->is_done()) return self->Complete(l, r);
                                self->ReadBody(l, r);
                              });
    });
  }

  void ReadBody(const LinkPtr& l, const RoundPtr& r) {
    r->parser->get().body().data = r->piece.data();
    r->parser->get().body().size = r->piece.size();
    l->Lowest().expires_at(Until(r->timeouts, r->timeouts.idle));
    l->WithStream([&](auto& s) {
      // read_some: a streamed event is handed on as soon as its bytes arrive.
      http::async_read_some(s, l->buffer, *r->parser,
                            [self = shared_from_this(), l, r](error_code ec, size_t) {
                              if (r != self->round) return;
                              if (ec == http::error::need_buffer) ec = {};
                              const size_t n = r->piece.size() - r->parser->get().body().size;
                              if (n > 0 && r->handlers.on_body &&
                                  !r->handlers.on_body(std::string_view(r->piece.data(), n))) {
                                if (r == self->round) self->Close();
                                return;
                              }
                              if (r != self->round) return;
                              if (ec) return self->Fail(l, r, HttpStep::kReadBody, ec);
                              if (r->parser->is_done()) return self->Complete(l, r);
                              self->ReadBody(l, r);
                            });
    });
  }

  void Complete(const LinkPtr& l, const RoundPtr& r) {
    HttpEnd end;
    end.keep_alive = r->parser->keep_alive() && l->IsOpen();
    if (!end.keep_alive) l->Close();
    End(r, end);
  }

  void Fail(const LinkPtr& l, const RoundPtr& r, HttpStep step, error_code ec) {
    HttpEnd end;
    end.error = Classify(ec);
    end.step = step;
    end.code = ec;
    l->Close();
    End(r, end);
  }

  // The round's handlers stay alive for the call through `r`; they are let go after it, so that
  // what they hold (the caller) is not kept by an idle connection.
  void End(const RoundPtr& r, const HttpEnd& end) {
    round = nullptr;
    auto on_end = std::move(r->handlers.on_end);
    r->handlers = {};
    if (on_end) on_end(end);
  }

  bool IsOpen() const { return link && link->IsOpen(); }

  void Close() {
    if (round) {
      // Not inside a handler of the round: they are let go when its pending step completes.
      round = nullptr;
    }
    resolver.cancel();
    resolve_timer.cancel();
    if (link) link->Close();
  }

  asio::any_io_executor executor;
  const HttpEndpoint endpoint;
  std::string host_field;
  tcp::resolver resolver;
  asio::steady_timer resolve_timer;
  bool resolve_timed_out = false;
  LinkPtr link;    // the last dial's; null before the first
  RoundPtr round;  // the exchange in progress; null between exchanges
};

HttpConnection::HttpConnection(asio::any_io_executor executor, HttpEndpoint endpoint)
    : impl_(std::make_shared<Impl>(std::move(executor), std::move(endpoint))) {}

// Pending steps may still run on the executor: the close is made there too.
HttpConnection::~HttpConnection() {
  asio::dispatch(impl_->executor, [impl = impl_] { impl->Close(); });
}

void HttpConnection::Exchange(HttpRequest request, HttpTimeouts timeouts, HttpHandlers handlers) {
  impl_->Start(std::move(request), timeouts, std::move(handlers));
}

void HttpConnection::Close() { impl_->Close(); }

bool HttpConnection::is_open() const { return impl_->IsOpen(); }

Result<HttpResponse> HttpGet(const std::string& host, const std::string& port,
                             const std::string& target, std::chrono::milliseconds timeout,
                             size_t max_body) {
  asio::io_context io;
  HttpEndpoint endpoint;
  endpoint.host = host;
  endpoint.port = port;
  HttpConnection connection(io.get_executor(), endpoint);
  HttpRequest request;
  request.method = "GET";
  request.target = target;
  request.keep_alive = false;
  HttpTimeouts timeouts;
  timeouts.connect = timeouts.idle = timeout;
  timeouts.deadline = HttpTimeouts::Clock::now() + timeout;
  HttpResponse response;
  Status status = Status::Ok();
  HttpHandlers handlers;
  handlers.on_head = [&](const HttpHead& head) { response.status = head.status; };
  handlers.on_body = [&](std::string_view bytes) {
    if (response.body.size() + bytes.size() > max_body) {
      status =
          ResourceExhausted(fmt::format("GET {}: the answer passes {} bytes", target, max_body));
      return false;
    }
    response.body.append(bytes);
    return true;
  };
  handlers.on_end = [&](const HttpEnd& end) {
    if (end.ok()) return;
    const std::string why =
        fmt::format("GET http://{}:{}{}: {}", host, port, target, end.code.message());
    status = end.error == HttpEnd::Error::kTimeout ? DeadlineExceeded(why) : Unavailable(why);
  };
  connection.Exchange(std::move(request), timeouts, std::move(handlers));
  io.run();
  if (!status.ok()) return status;
  return response;
}

}  // namespace pdserve
