// The only translation unit of the client that includes Beast (it is heavy to compile).
#include "bench/serve/http_client.h"

#include <array>
#include <charconv>
#include <limits>
#include <optional>
#include <vector>

#include <fmt/format.h>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

#include "bench/serve/sse_parser.h"

namespace pdserve::bench {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using error_code = boost::system::error_code;

Result<HttpTarget> ParseBaseUrl(std::string_view url) {
  HttpTarget target;
  std::string_view rest;
  if (url.substr(0, 7) == "http://") {
    rest = url.substr(7);
  } else if (url.substr(0, 8) == "https://") {
    rest = url.substr(8);
    target.tls = true;
    target.port = "443";
  } else {
    return InvalidArgument(fmt::format("base URL '{}' must start with http:// or https://", url));
  }
  size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  if (slash != std::string_view::npos) target.path_prefix = std::string(rest.substr(slash));
  while (!target.path_prefix.empty() && target.path_prefix.back() == '/') {
    target.path_prefix.pop_back();
  }
  if (!authority.empty() && authority.front() == '[') {  // [::1]:8000
    size_t close = authority.find(']');
    if (close == std::string_view::npos) return InvalidArgument("unclosed [ in base URL host");
    target.host = std::string(authority.substr(1, close - 1));
    authority.remove_prefix(close + 1);
    if (!authority.empty() && authority.front() == ':') target.port = authority.substr(1);
  } else {
    size_t colon = authority.rfind(':');
    target.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) target.port = std::string(authority.substr(colon + 1));
  }
  if (target.host.empty()) return InvalidArgument(fmt::format("base URL '{}' has no host", url));
  if (target.port.empty() || target.port.find_first_not_of("0123456789") != std::string::npos) {
    return InvalidArgument(fmt::format("base URL '{}' has a bad port", url));
  }
  return target;
}

// A TLS stream is built for every connection; plain http uses only its TCP socket.
struct Connection {
  Connection(net::io_context& io, net::ssl::context& tls) : stream(io, tls) {}
  tcp::socket& socket() { return stream.next_layer(); }
  net::ssl::stream<tcp::socket> stream;
  beast::flat_buffer buffer;
};

struct StreamingHttpClient::Pool {
  Pool(net::io_context& io, HttpTarget target, StreamingClientOptions options,
       Clock::time_point epoch)
      : io(io),
        target(std::move(target)),
        options(std::move(options)),
        epoch(epoch),
        tls(net::ssl::context::tls_client) {}
  net::io_context& io;
  HttpTarget target;
  StreamingClientOptions options;
  Clock::time_point epoch;
  net::ssl::context tls;
  std::string host_header;
  std::string authorization;
  tcp::resolver::results_type endpoints;
  std::vector<std::unique_ptr<Connection>> idle;
  int64_t opened = 0;
};

namespace {

using Pool = StreamingHttpClient::Pool;
using Clock = StreamingHttpClient::Clock;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// One request's life: connect or reuse, write, read the header, stream the body.
class Exchange : public std::enable_shared_from_this<Exchange> {
 public:
  Exchange(std::shared_ptr<Pool> pool, const StreamRequest& request,
           std::function<void(RequestRecord)> done)
      : pool_(std::move(pool)), deadline_(pool_->io), done_(std::move(done)) {
    record_.index = request.index;
    record_.prompt_tokens = request.prompt_tokens;
    request_.method(http::verb::post);
    request_.target(pool_->target.path_prefix + request.target);
    request_.version(11);
    request_.set(http::field::host, pool_->host_header);
    request_.set(http::field::user_agent, "pdserve-bench");
    request_.set(http::field::content_type, "application/json");
    if (!pool_->authorization.empty()) {
      request_.set(http::field::authorization, pool_->authorization);
    }
    request_.body() = *request.body;
    request_.prepare_payload();
  }

  void Start() {
    start_ = Clock::now();
    record_.start_s = Seconds(start_ - pool_->epoch);
    deadline_.expires_after(std::chrono::duration_cast<Clock::duration>(
        std::chrono::duration<double>(pool_->options.request_timeout_s)));
    deadline_.async_wait([self = shared_from_this()](error_code ec) {
      if (ec || self->finished_) return;
      self->timed_out_ = true;
      error_code ignored;
      self->conn_->socket().close(ignored);  // completes the pending operation with an error
    });
    if (!pool_->idle.empty()) {
      conn_ = std::move(pool_->idle.back());
      pool_->idle.pop_back();
      reused_ = true;
      Write();
    } else {
      Connect();
    }
  }

 private:
  void Connect() {
    conn_ = std::make_unique<Connection>(pool_->io, pool_->tls);
    reused_ = false;
    ++pool_->opened;
    net::async_connect(conn_->socket(), pool_->endpoints,
                       [self = shared_from_this()](error_code ec, const tcp::endpoint&) {
                         if (self->finished_) return;
                         if (self->timed_out_) return self->FailTimeout();
                         if (ec) {
                           return self->Fail(
                               FailureKind::kConnect,
                               fmt::format("connect to {}:{}: {}", self->pool_->target.host,
                                           self->pool_->target.port, ec.message()));
                         }
                         error_code ignored;
                         self->conn_->socket().set_option(tcp::no_delay(true), ignored);
                         if (self->pool_->target.tls) return self->Handshake();
                         self->Write();
                       });
  }

  // A pooled connection the server already closed fails on first use; dial again once.
  bool RetryOnFreshConnection(error_code ec) {
    bool stale = ec == net::error::eof || ec == net::error::connection_reset ||
                 ec == net::ssl::error::stream_truncated || ec == net::error::broken_pipe ||
                 ec == http::error::end_of_stream;
    if (!reused_ || !stale || timed_out_) return false;
    error_code ignored;
    conn_->socket().close(ignored);
    Connect();
    return true;
  }

  // Calls f with the connection's byte stream: TLS or the plain socket.
  template <typename F>
  void WithStream(F&& f) {
    if (pool_->target.tls) {
      f(conn_->stream);
    } else {
      f(conn_->socket());
    }
  }

  void Handshake() {
    const std::string& host = pool_->target.host;
    if (!SSL_set_tlsext_host_name(conn_->stream.native_handle(), host.c_str())) {
      return Fail(FailureKind::kConnect, "TLS: cannot set the server name " + host);
    }
    if (pool_->options.tls_verify) {
      conn_->stream.set_verify_mode(net::ssl::verify_peer);
      conn_->stream.set_verify_callback(net::ssl::host_name_verification(host));
    } else {
      conn_->stream.set_verify_mode(net::ssl::verify_none);
    }
    conn_->stream.async_handshake(net::ssl::stream_base::client, [self = shared_from_this()](
                                                                     error_code ec) {
      if (self->finished_) return;
      if (self->timed_out_) return self->FailTimeout();
      if (ec) {
        return self->Fail(FailureKind::kConnect,
                          "TLS handshake with " + self->pool_->target.host + ": " + ec.message());
      }
      self->Write();
    });
  }

  void Write() {
    WithStream([this](auto& stream) { Write(stream); });
  }

  template <typename Stream>
  void Write(Stream& stream) {
    http::async_write(stream, request_, [self = shared_from_this()](error_code ec, size_t) {
      if (self->finished_) return;
      if (self->timed_out_) return self->FailTimeout();
      if (ec) {
        if (self->RetryOnFreshConnection(ec)) return;
        return self->Fail(FailureKind::kIo, "writing the request: " + ec.message());
      }
      self->ReadHeader();
    });
  }

  void ReadHeader() {
    WithStream([this](auto& stream) { ReadHeader(stream); });
  }

  template <typename Stream>
  void ReadHeader(Stream& stream) {
    parser_.emplace();
    // Streams are as long as the server makes them. Not boost::none: Boost 1.74 compares a
    // Content-Length against an empty optional as "over the limit".
    parser_->body_limit(std::numeric_limits<std::uint64_t>::max());
    conn_->buffer.clear();
    http::async_read_header(
        stream, conn_->buffer, *parser_, [self = shared_from_this()](error_code ec, size_t) {
          if (self->finished_) return;
          if (self->timed_out_) return self->FailTimeout();
          if (ec) {
            if (self->RetryOnFreshConnection(ec)) return;
            return self->FailRead(ec, "reading the response header");
          }
          self->record_.http_status = self->parser_->get().result_int();
          const auto retry_after = self->parser_->get()[http::field::retry_after];
          int seconds = -1;
          if (!retry_after.empty() &&
              std::from_chars(retry_after.data(), retry_after.data() + retry_after.size(), seconds)
                      .ptr != retry_after.data() + retry_after.size()) {
            seconds = -1;  // an HTTP date, or garbage: not counted
          }
          self->record_.retry_after_s = seconds;
          self->content_type_ = std::string(self->parser_->get()[http::field::content_type]);
          self->ReadBody();
        });
  }

  void ReadBody() {
    WithStream([this](auto& stream) { ReadBody(stream); });
  }

  template <typename Stream>
  void ReadBody(Stream& stream) {
    auto& body = parser_->get().body();
    body.data = buffer_.data();
    body.size = buffer_.size();
    http::async_read_some(stream, conn_->buffer, *parser_,
                          [self = shared_from_this()](error_code ec, size_t) { self->OnBody(ec); });
  }

  void OnBody(error_code ec) {
    if (finished_) return;
    if (timed_out_) return FailTimeout();
    if (ec == http::error::need_buffer) ec = {};
    size_t n = buffer_.size() - parser_->get().body().size;
    if (n > 0) {
      std::string_view bytes(buffer_.data(), n);
      if (record_.http_status != 200) {
        size_t room = pool_->options.max_error_body_bytes - error_body_.size();
        error_body_.append(bytes.substr(0, std::min(room, bytes.size())));
      } else {
        OnStreamBytes(bytes, Clock::now());
        if (finished_) return;
      }
    }
    if (ec) return FailRead(ec, "reading the response body");
    if (parser_->is_done()) return Complete();
    ReadBody();
  }

  void OnStreamBytes(std::string_view bytes, Clock::time_point now) {
    Status status = sse_.Feed(bytes, [&](SseEvent& event) { OnEvent(event, now); });
    if (!status.ok() && !failure_) {
      failure_ = {FailureKind::kBadResponse, status.message()};
    }
    if (failure_) Fail(failure_->first, failure_->second);
  }

  void OnEvent(SseEvent& event, Clock::time_point now) {
    if (failure_) return;
    if (event.event == "error") {
      failure_ = {FailureKind::kStreamError, "error event: " + ErrorMessageFromBody(event.data)};
      return;
    }
    Result<StreamChunk> chunk = ParseStreamChunk(event.data);
    if (!chunk.ok()) {
      failure_ = {FailureKind::kBadResponse, chunk.status().message()};
      return;
    }
    if (chunk->error) {
      failure_ = {FailureKind::kStreamError, "error in stream: " + *chunk->error};
      return;
    }
    if (chunk->done) saw_done_ = true;
    if (chunk->has_choice) {
      // A server that never stops would grow these without end: no OpenAI stream comes near.
      constexpr int64_t kMaxChunks = int64_t{1} << 20;
      constexpr size_t kMaxText = size_t{64} << 20;
      if (record_.chunks >= kMaxChunks || record_.generated_text.size() >= kMaxText) {
        failure_ = {FailureKind::kBadResponse,
                    fmt::format("the stream ran past {} chunks or {} MiB of text", kMaxChunks,
                                kMaxText >> 20)};
        return;
      }
      if (record_.chunks == 0) {
        record_.ttft_s = Seconds(now - start_);
      } else {
        record_.itl_s.push_back(Seconds(now - last_chunk_));
      }
      last_chunk_ = now;
      ++record_.chunks;
      record_.generated_text += chunk->text;
    }
    if (chunk->completion_tokens) usage_completion_ = chunk->completion_tokens;
    if (chunk->prompt_tokens) usage_prompt_ = chunk->prompt_tokens;
  }

  void Complete() {
    if (record_.http_status != 200) {
      return Fail(FailureKind::kHttpStatus, fmt::format("HTTP {}: {}", record_.http_status,
                                                        ErrorMessageFromBody(error_body_)));
    }
    sse_.Finish([&](SseEvent& event) { OnEvent(event, Clock::now()); });
    if (failure_) return Fail(failure_->first, failure_->second);
    if (record_.chunks == 0) {
      return Fail(FailureKind::kNoTokens,
                  fmt::format("the response (Content-Type '{}') carried no choice chunk; "
                              "does the server stream?",
                              content_type_));
    }
    record_.success = true;
    record_.latency_s = Seconds(last_chunk_ - start_);
    if (usage_completion_) {
      record_.output_tokens = *usage_completion_;
      record_.output_token_source = TokenCountSource::kServerUsage;
    } else {
      record_.output_tokens = record_.chunks;
      record_.output_token_source = TokenCountSource::kChunks;
    }
    if (usage_prompt_) {
      record_.prompt_tokens = *usage_prompt_;
      record_.server_reported_prompt_tokens = true;
    }
    bool reusable = parser_->keep_alive() && conn_->socket().is_open() &&
                    pool_->idle.size() < pool_->options.max_idle_connections;
    Finish(reusable);
  }

  void FailRead(error_code ec, std::string_view during) {
    FailureKind kind = FailureKind::kIo;
    std::string what = ec.message();
    if (ec == http::error::partial_message || ec == http::error::end_of_stream ||
        ec == net::error::eof || ec == net::error::connection_reset ||
        ec == net::ssl::error::stream_truncated) {
      kind = FailureKind::kClosedMidStream;
      what = record_.chunks > 0
                 ? fmt::format("server closed the connection after {} chunks", record_.chunks)
                 : "server closed the connection before the response ended";
    } else if (ec.category() == http::make_error_code(http::error::bad_version).category()) {
      kind = FailureKind::kBadResponse;
      what = "malformed HTTP: " + ec.message();
    }
    Fail(kind, fmt::format("{}: {}", during, what));
  }

  void FailTimeout() {
    Fail(FailureKind::kTimeout,
         fmt::format("no complete response within {:g} s ({} chunks received)",
                     pool_->options.request_timeout_s, record_.chunks));
  }

  void Fail(FailureKind kind, std::string message) {
    if (finished_) return;
    record_.success = false;
    record_.failure = kind;
    record_.error = std::move(message);
    record_.latency_s = Seconds(Clock::now() - start_);
    Finish(/*reusable=*/false);
  }

  void Finish(bool reusable) {
    finished_ = true;
    deadline_.cancel();
    if (conn_) {
      if (reusable) {
        pool_->idle.push_back(std::move(conn_));
      } else {
        error_code ignored;
        conn_->socket().shutdown(tcp::socket::shutdown_both, ignored);
        conn_->socket().close(ignored);
      }
    }
    auto done = std::move(done_);
    done(std::move(record_));
  }

  std::shared_ptr<Pool> pool_;
  net::steady_timer deadline_;
  std::function<void(RequestRecord)> done_;
  http::request<http::string_body> request_;
  std::unique_ptr<Connection> conn_;
  std::optional<http::response_parser<http::buffer_body>> parser_;
  std::array<char, 16384> buffer_;
  SseParser sse_;
  RequestRecord record_;
  Clock::time_point start_, last_chunk_;
  std::string content_type_;
  std::string error_body_;
  std::optional<std::pair<FailureKind, std::string>> failure_;
  std::optional<int64_t> usage_completion_, usage_prompt_;
  bool reused_ = false;
  bool timed_out_ = false;
  bool finished_ = false;
  bool saw_done_ = false;
};

}  // namespace

StreamingHttpClient::StreamingHttpClient(net::io_context& io, HttpTarget target,
                                         StreamingClientOptions options, Clock::time_point epoch)
    : pool_(std::make_shared<Pool>(io, std::move(target), std::move(options), epoch)) {
  const HttpTarget& t = pool_->target;
  bool default_port = t.port == (t.tls ? "443" : "80");
  std::string host = t.host.find(':') == std::string::npos ? t.host : "[" + t.host + "]";
  pool_->host_header = default_port ? host : host + ":" + t.port;
  if (!pool_->options.api_key.empty()) pool_->authorization = "Bearer " + pool_->options.api_key;
}

StreamingHttpClient::~StreamingHttpClient() { CloseIdle(); }

Status StreamingHttpClient::Resolve() {
  error_code ec;
  if (pool_->target.tls && pool_->options.tls_verify) {
    if (pool_->options.tls_ca_file.empty()) {
      pool_->tls.set_default_verify_paths(ec);
    } else {
      pool_->tls.load_verify_file(pool_->options.tls_ca_file, ec);
    }
    if (ec) {
      return InvalidArgument(fmt::format("TLS: cannot load CA certificates {}: {}",
                                         pool_->options.tls_ca_file, ec.message()));
    }
  }
  tcp::resolver resolver(pool_->io);
  pool_->endpoints = resolver.resolve(pool_->target.host, pool_->target.port, ec);
  if (ec) {
    return Unavailable(fmt::format("cannot resolve {}:{}: {}", pool_->target.host,
                                   pool_->target.port, ec.message()));
  }
  return Status::Ok();
}

void StreamingHttpClient::Send(const StreamRequest& request,
                               std::function<void(RequestRecord)> done) {
  std::make_shared<Exchange>(pool_, request, std::move(done))->Start();
}

void StreamingHttpClient::CloseIdle() {
  for (auto& conn : pool_->idle) {
    error_code ignored;
    conn->socket().close(ignored);
  }
  pool_->idle.clear();
}

int64_t StreamingHttpClient::connections_opened() const { return pool_->opened; }

}  // namespace pdserve::bench
