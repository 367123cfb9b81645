#include "bench/serve/http_client.h"

#include <array>
#include <charconv>
#include <limits>
#include <optional>
#include <vector>

#include <fmt/format.h>
#include <boost/asio/ssl/context.hpp>

#include "common/http_client.h"
#include "common/openai_stream_chunk.h"
#include "common/sse_parser.h"

namespace pdserve::bench {

namespace net = boost::asio;

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

struct StreamingHttpClient::Pool {
  Pool(net::io_context& io, HttpTarget target, StreamingClientOptions options,
       Clock::time_point epoch)
      : io(io), target(std::move(target)), options(std::move(options)), epoch(epoch) {}
  net::io_context& io;
  HttpTarget target;
  StreamingClientOptions options;
  Clock::time_point epoch;
  HttpEndpoint endpoint;  // complete once Resolve succeeded
  std::string authorization;
  std::vector<std::unique_ptr<HttpConnection>> idle;
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
      : pool_(std::move(pool)), request_(request), done_(std::move(done)) {
    record_.index = request.index;
    record_.prompt_tokens = request.prompt_tokens;
  }

  void Start() {
    start_ = Clock::now();
    record_.start_s = Seconds(start_ - pool_->epoch);
    deadline_ = start_ + std::chrono::duration_cast<Clock::duration>(
                             std::chrono::duration<double>(pool_->options.request_timeout_s));
    if (!pool_->idle.empty()) {
      conn_ = std::move(pool_->idle.back());
      pool_->idle.pop_back();
      reused_ = true;
    } else {
      Dial();
    }
    Send();
  }

 private:
  void Dial() {
    conn_ = std::make_unique<HttpConnection>(pool_->io.get_executor(), pool_->endpoint);
    reused_ = false;
    ++pool_->opened;
  }

  void Send() {
    HttpRequest request;
    request.target = pool_->target.path_prefix + request_.target;
    request.fields = {{"User-Agent", "pdserve-bench"}, {"Content-Type", "application/json"}};
    if (!pool_->authorization.empty()) {
      request.fields.emplace_back("Authorization", pool_->authorization);
    }
    request.body = *request_.body;
    HttpTimeouts timeouts;
    timeouts.connect = timeouts.idle = Clock::duration::max();
    timeouts.deadline = deadline_;
    HttpHandlers handlers;
    handlers.on_head = [self = shared_from_this()](const HttpHead& head) { self->OnHead(head); };
    handlers.on_body = [self = shared_from_this()](std::string_view bytes) {
      return self->OnBody(bytes);
    };
    handlers.on_end = [self = shared_from_this()](const HttpEnd& end) { self->OnEnd(end); };
    conn_->Exchange(std::move(request), timeouts, std::move(handlers));
  }

  void OnHead(const HttpHead& head) {
    record_.http_status = head.status;
    const std::string& retry_after = head.retry_after;
    int seconds = -1;
    if (!retry_after.empty() &&
        std::from_chars(retry_after.data(), retry_after.data() + retry_after.size(), seconds).ptr !=
            retry_after.data() + retry_after.size()) {
      seconds = -1;  // an HTTP date, or garbage: not counted
    }
    record_.retry_after_s = seconds;
    content_type_ = head.content_type;
  }

  // False when the request failed on what was read.
  bool OnBody(std::string_view bytes) {
    if (record_.http_status != 200) {
      size_t room = pool_->options.max_error_body_bytes - error_body_.size();
      error_body_.append(bytes.substr(0, std::min(room, bytes.size())));
      return true;
    }
    OnStreamBytes(bytes, Clock::now());
    return !finished_;
  }

  void OnEnd(const HttpEnd& end) {
    if (finished_) return;
    if (end.ok()) return Complete(end.keep_alive);
    if (end.error == HttpEnd::Error::kTimeout) return FailTimeout();
    switch (end.step) {
      case HttpStep::kResolve:
      case HttpStep::kConnect:
        return Fail(FailureKind::kConnect, fmt::format("connect to {}:{}: {}", pool_->target.host,
                                                       pool_->target.port, end.code.message()));
      case HttpStep::kTlsHandshake:
        return Fail(FailureKind::kConnect,
                    "TLS handshake with " + pool_->target.host + ": " + end.code.message());
      case HttpStep::kWrite:
        if (RetryOnFreshConnection(end)) return;
        return Fail(FailureKind::kIo, "writing the request: " + end.code.message());
      case HttpStep::kReadHeader:
        if (RetryOnFreshConnection(end)) return;
        return FailRead(end, "reading the response header");
      case HttpStep::kReadBody:
        return FailRead(end, "reading the response body");
    }
  }

  // A pooled connection the server already closed fails on first use; dial again once.
  bool RetryOnFreshConnection(const HttpEnd& end) {
    if (!reused_ || end.error != HttpEnd::Error::kClosed) return false;
    Dial();
    Send();
    return true;
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
      failure_ = {FailureKind::kStreamError, "error event: " + OpenAiErrorMessage(event.data)};
      return;
    }
    Result<OpenAiChunk> chunk = ParseOpenAiStreamData(event.data);
    if (!chunk.ok()) {
      failure_ = {FailureKind::kBadResponse, "SSE data: " + chunk.status().message()};
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
      // A reasoning model's thinking counts as generated text, as in vLLM's benchmark.
      record_.generated_text += chunk->reasoning_text;
      record_.generated_text += chunk->text;
    }
    if (chunk->completion_tokens) usage_completion_ = chunk->completion_tokens;
    if (chunk->prompt_tokens) usage_prompt_ = chunk->prompt_tokens;
    if (chunk->cached_prompt_tokens) record_.cached_tokens = *chunk->cached_prompt_tokens;
  }

  void Complete(bool keep_alive) {
    if (record_.http_status != 200) {
      return Fail(FailureKind::kHttpStatus,
                  fmt::format("HTTP {}: {}", record_.http_status, OpenAiErrorMessage(error_body_)));
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
    Finish(keep_alive && pool_->idle.size() < pool_->options.max_idle_connections);
  }

  void FailRead(const HttpEnd& end, std::string_view during) {
    FailureKind kind = FailureKind::kIo;
    std::string what = end.code.message();
    if (end.error == HttpEnd::Error::kClosed || end.error == HttpEnd::Error::kClosedMidReply) {
      kind = FailureKind::kClosedMidStream;
      what = record_.chunks > 0
                 ? fmt::format("server closed the connection after {} chunks", record_.chunks)
                 : "server closed the connection before the response ended";
    } else if (end.error == HttpEnd::Error::kMalformed) {
      kind = FailureKind::kBadResponse;
      what = "malformed HTTP: " + end.code.message();
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
    if (conn_) {
      if (reusable) {
        pool_->idle.push_back(std::move(conn_));
      } else {
        conn_->Close();
      }
    }
    auto done = std::move(done_);
    done(std::move(record_));
  }

  std::shared_ptr<Pool> pool_;
  const StreamRequest request_;
  std::function<void(RequestRecord)> done_;
  Clock::time_point deadline_;
  std::unique_ptr<HttpConnection> conn_;
  SseParser sse_;
  RequestRecord record_;
  Clock::time_point start_, last_chunk_;
  std::string content_type_;
  std::string error_body_;
  std::optional<std::pair<FailureKind, std::string>> failure_;
  std::optional<int64_t> usage_completion_, usage_prompt_;
  bool reused_ = false;
  bool finished_ = false;
  bool saw_done_ = false;
};

}  // namespace

StreamingHttpClient::StreamingHttpClient(net::io_context& io, HttpTarget target,
                                         StreamingClientOptions options, Clock::time_point epoch)
    : pool_(std::make_shared<Pool>(io, std::move(target), std::move(options), epoch)) {
  if (!pool_->options.api_key.empty()) pool_->authorization = "Bearer " + pool_->options.api_key;
}

StreamingHttpClient::~StreamingHttpClient() { CloseIdle(); }

Status StreamingHttpClient::Resolve() {
  const HttpTarget& t = pool_->target;
  HttpEndpoint endpoint;
  endpoint.host = t.host;
  endpoint.port = t.port;
  endpoint.tls = t.tls;
  endpoint.verify_peer = pool_->options.tls_verify;
  if (t.tls && pool_->options.tls_verify) {
    auto tls = MakeTlsClientContext(pool_->options.tls_ca_file);
    if (!tls.ok()) return InvalidArgument("TLS: " + tls.status().message());
    endpoint.tls_context = *tls;
  } else if (t.tls) {
    endpoint.tls_context = std::make_shared<net::ssl::context>(net::ssl::context::tls_client);
  }
  PDSERVE_ASSIGN_OR_RETURN(endpoint.addresses, ResolveHttpHost(t.host, t.port));
  pool_->endpoint = std::move(endpoint);
  return Status::Ok();
}

void StreamingHttpClient::Send(const StreamRequest& request,
                               std::function<void(RequestRecord)> done) {
  std::make_shared<Exchange>(pool_, request, std::move(done))->Start();
}

void StreamingHttpClient::CloseIdle() {
  for (auto& conn : pool_->idle) conn->Close();
  pool_->idle.clear();
}

int64_t StreamingHttpClient::connections_opened() const { return pool_->opened; }

}  // namespace pdserve::bench
