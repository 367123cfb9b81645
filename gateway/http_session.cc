#include "gateway/http_session.h"

#include "common/json_text.h"
#include "gateway/external_attempts.h"
#include "gateway/request_tags.h"

#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <boost/asio/steady_timer.hpp>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <random>

namespace pdserve::gateway {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

namespace {
constexpr auto kReadTimeout = std::chrono::seconds(60);
// A request line and header fields past this get 431 (RFC 6585), which says what is too long.
constexpr uint32_t kMaxHeaderBytes = 64 * 1024;
constexpr auto kWriteTimeout = std::chrono::seconds(30);
constexpr size_t kMaxQueuedStreamBytes = 4 << 20;

std::string NewRequestId() {
  static thread_local std::mt19937_64 rng(std::random_device{}());
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(rng()));
  return buf;
}
}  // namespace

HttpSession::HttpSession(asio::ip::tcp::socket socket,
                         std::shared_ptr<const GatewayServer::Shared> shared)
    : stream_(std::move(socket)), shared_(std::move(shared)) {}

void HttpSession::Run() {
  asio::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->Read(); });
}

void HttpSession::Read() {
  parser_.emplace();
  parser_->body_limit(shared_->max_body_bytes);
  parser_->header_limit(kMaxHeaderBytes);
  stream_.expires_after(kReadTimeout);
  http::async_read(
      stream_, buffer_, *parser_, [self = shared_from_this()](beast::error_code ec, size_t) {
        if (ec == http::error::body_limit) {
          self->keep_alive_ = false;
          return self->RespondError(
              ApiError::TooLarge("The request body exceeds " +
                                 std::to_string(self->shared_->max_body_bytes) + " bytes"));
        }
        if (ec && ec.category() == http::make_error_code(http::error::bad_target).category() &&
            ec != http::error::end_of_stream && ec != http::error::partial_message) {
          // Bytes that are not HTTP/1.1 (a bad request line, header or chunk size), or header
          // fields past the limit: say what was wrong, then close, since the stream cannot be
          // resynchronised.
          self->keep_alive_ = false;
          self->version_ = 11;
          return self->RespondError(
              ec == http::error::header_limit
                  ? ApiError::HeadersTooLarge("The request's header fields exceed " +
                                              std::to_string(kMaxHeaderBytes) + " bytes")
                  : ApiError::BadRequest("Malformed HTTP request: " + ec.message()));
        }
        if (ec) {  // closed or timed out: nothing more to say on this connection
          beast::error_code ignored;
          self->stream_.socket().shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
          return;
        }
        self->received_ = std::chrono::steady_clock::now();
        self->Handle(self->parser_->release());
      });
}

void HttpSession::Handle(Request request) {
  keep_alive_ = request.keep_alive();
  version_ = request.version();
  const std::string target(request.target());
  const std::string path = target.substr(0, target.find('?'));
  tenant_.clear();
  if (shared_->keys) {
    const std::string auth(request[http::field::authorization]);
    const std::string key = auth.rfind("Bearer ", 0) == 0 ? auth.substr(7) : "";
    const auto tenant = key.empty() ? std::nullopt : shared_->keys->TenantFor(key);
    if (path != "/health" && path != "/ready" && path != "/metrics" && !tenant) {
      return RespondError(
          ApiError::Unauthorized(key.empty() ? "Missing API key: send 'Authorization: Bearer <key>'"
                                             : "Incorrect API key provided"));
    }
    if (tenant) tenant_ = *tenant;
  }
  const bool completions = path == "/v1/completions", chat = path == "/v1/chat/completions";
  if (request.method() == http::verb::post && (completions || chat)) {
    // JSON, as OpenAI's API takes it; a body sent as something else (curl -d's form encoding)
    // would be read as JSON by accident at best. No Content-Type at all is taken as JSON.
    const std::string type(request[http::field::content_type]);
    std::string media = type.substr(0, type.find(';'));
    media.erase(media.find_last_not_of(" \t") + 1);
    if (!type.empty() && !boost::beast::iequals(media, "application/json")) {
      return RespondError(ApiError::UnsupportedMediaType(
          "Content-Type must be application/json, got '" + type + "'"));
    }
    return HandleCompletion(request,
                            completions ? Endpoint::kCompletions : Endpoint::kChatCompletions);
  }
  if (request.method() == http::verb::get && path == "/v1/models") {
    nlohmann::json model = {{"id", shared_->model_id},
                            {"object", "model"},
                            {"created", 0},
                            {"owned_by", "pdserve"},
                            {"max_model_len", shared_->max_context}};
    return Respond(200, DumpJson(nlohmann::json{{"object", "list"}, {"data", {model}}}));
  }
  if (request.method() == http::verb::get && path == "/metrics") {
    return Respond(200,
                   shared_->metrics->Scrape(*shared_->registry, shared_->admission->waiting(),
                                            shared_->upstreams.get(), shared_->ledger.get()),
                   "text/plain; version=0.0.4");
  }
  if (request.method() == http::verb::get && path == "/ready") {
    // Readiness: a request sent now has a route (it may still wait for room). /health is
    // liveness.
    if (shared_->registry->HasRoute()) {
      return Respond(200, DumpJson(nlohmann::json{{"status", "ready"}}));
    }
    return Respond(
        503,
        DumpJson(nlohmann::json{
            {"status", "not ready"},
            {"reason", "no prefill and decode pair (nor colocated worker) has registered"},
            {"workers", shared_->registry->Workers().size()}}),
        "application/json", {}, 1);
  }
  if (request.method() == http::verb::get && path == "/health") {
    // Liveness for anyone; each worker's latest load report too (names, pids, pages) only for a
    // caller with a key, or for anyone where the gateway takes no keys.
    const auto workers = shared_->registry->Workers();
    if (shared_->keys && tenant_.empty()) {
      return Respond(200, DumpJson(nlohmann::json{{"status", "ok"}, {"workers", workers.size()}}));
    }
    nlohmann::json load = nlohmann::json::array();
    for (const router::WorkerSummary& w : workers) {
      load.push_back({{"id", w.id},
                      {"name", w.name},
                      {"role", w.role},
                      {"class", std::string(ToString(w.capacity_class))},
                      {"running", w.running},
                      {"inflight", w.inflight},
                      {"free_pages", w.free_pages},
                      {"kv_pages", w.kv_pages},
                      {"draining", w.draining}});
    }
    return Respond(200, DumpJson(nlohmann::json{
                            {"status", "ok"}, {"workers", workers.size()}, {"worker_load", load}}));
  }
  RespondError(
      ApiError::NotFound("No route for " + std::string(request.method_string()) + " " + path));
}

void HttpSession::HandleCompletion(const Request& request, Endpoint endpoint) {
  auto parsed = ParseGenerationRequest(request.body(), endpoint, shared_->parse);
  if (auto* error = std::get_if<ApiError>(&parsed)) return RespondError(*error);
  GenerationRequest req = std::move(std::get<GenerationRequest>(parsed));
  if (req.model != shared_->model_id) return RespondError(ApiError::ModelNotFound(req.model));

  auto built_or = shared_->prompts->Build(req);
  if (auto* refusal = std::get_if<PromptRefusal>(&built_or)) return RespondError(refusal->error);
  BuiltPrompt built = std::move(std::get<BuiltPrompt>(built_or));
  auto tags = ParseTags(std::string(request["x-pdserve-tags"]));
  if (!tags.ok()) {
    return RespondError(ApiError::BadRequest("x-pdserve-tags: " + tags.status().message()));
  }
  const bool stream = req.stream;
  CallAdmission admission;
  admission.received = received_;
  if (Status s = ReadAdmission(request, &admission); !s.ok()) {
    return RespondError(ApiError::BadRequest(s.message()));
  }
  if (auto refusal = shared_->prompts->Charge(tenant_, built)) {
    return RespondError(refusal->error, refusal->retry_after_s);
  }
  if (built.quota_tokens > 0) {
    admission.quota = shared_->quota;
    admission.quota_tokens = built.quota_tokens;
  }

  // The call keeps this session alive until it finishes; every end of the call resets call_,
  // which breaks the cycle.
  auto self = shared_from_this();
  CallOutput output;
  output.started = [self, stream] {
    if (!stream) return;
    self->StopWatchingForClose();
    self->BeginStream();
    self->WatchForClose();  // a client that leaves before its first token cancels the request
  };
  output.write_stream = [self](std::string data) { self->QueueChunk(std::move(data), false); };
  output.finish = [self, stream](int status, std::string body, HttpHeaders headers, bool is_error) {
    auto s = self;
    if (stream && s->streaming_) {
      s->ForgetWatch();
      return s->QueueChunk(std::move(body), true);
    }
    s->StopWatchingForClose();
    const bool has_retry_after = std::any_of(headers.begin(), headers.end(), [](const auto& h) {
      return boost::beast::iequals(h.first, "retry-after");
    });
    s->Respond(status, std::move(body), "application/json", headers,
               status == 503 && !has_retry_after ? 1 : 0);
  };
  CallAccounting accounting;
  accounting.ledger = shared_->ledger;
  accounting.store_text = shared_->ledger_store_text;
  accounting.egress_usd_per_gb = shared_->egress_usd_per_gb;
  accounting.tenant = tenant_;
  accounting.tags = std::move(tags).value();
  accounting.rates = shared_->rates;
  const router::OverflowRule overflow = admission.overflow;
  const std::string request_id = NewRequestId();
  std::string why_not_external = WhyNotExternal(req);
  ExternalRequest external{request.body(), req.model,  endpoint,
                           stream,         request_id, RelaysUpstreamChoices(req)};
  call_ = std::make_shared<CompletionCall>(
      stream_.get_executor(), CallWorkers{shared_->workers, shared_->workers}, shared_->tokenizer,
      std::move(req), std::move(built.prompt), built.max_tokens, request_id, shared_->model_id,
      std::move(output), shared_->metrics, std::move(admission), std::move(accounting));
  if (shared_->upstreams && overflow != router::OverflowRule::kNever) {
    CallOverflow o;
    o.rule = overflow;
    o.upstreams = shared_->upstreams;
    o.attempts = std::make_shared<ExternalAttempts>(shared_->upstreams, shared_->upstream_tls,
                                                    shared_->tokenizer, shared_->metrics,
                                                    std::move(external));
    o.why_not_external = std::move(why_not_external);
    if (shared_->burst_asks) {
      o.next_burst = [asks = shared_->burst_asks] {
        return asks->NextArrival(planner::Pool::kPrefill);
      };
    }
    call_->AllowOverflow(std::move(o));
  }
  if (shared_->fault_delay.count() > 0) {
    auto timer =
        std::make_shared<boost::asio::steady_timer>(stream_.get_executor(), shared_->fault_delay);
    timer->async_wait(
        [self = shared_from_this(), timer](boost::system::error_code) { self->StartCall(); });
    return;
  }
  StartCall();
}

void HttpSession::StartCall() {
  if (!call_->Start()) return;
  WatchForClose();  // while it waits in the queue (and, not streaming, while it runs)
}

Status HttpSession::ReadAdmission(const Request& request, CallAdmission* admission) const {
  const auto now = std::chrono::steady_clock::now();
  admission->queue = shared_->admission;
  auto timeout = shared_->queue_timeout;
  auto slo = shared_->ttft_slo;
  if (shared_->keys && !tenant_.empty()) {
    const TenantAdmission t = shared_->keys->AdmissionFor(tenant_);
    admission->weight = t.weight;
    admission->zones = t.zones;
    admission->overflow = t.overflow;
    if (t.ttft_slo_ms > 0) slo = std::chrono::milliseconds(t.ttft_slo_ms);
  }
  // A header's figure: a whole number of milliseconds, > 0.
  auto millis = [&](const char* name, std::optional<std::chrono::milliseconds>* out) -> Status {
    const std::string text(request[name]);
    if (text.empty()) return Status::Ok();
    int64_t value = 0;
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || ptr != text.data() + text.size() || value <= 0) {
      return InvalidArgument(std::string(name) +
                             " takes a whole number of milliseconds > 0, not '" + text + "'");
    }
    *out = std::chrono::milliseconds(value);
    return Status::Ok();
  };
  std::optional<std::chrono::milliseconds> header_timeout, header_slo;
  PDSERVE_RETURN_IF_ERROR(millis("x-pdserve-queue-timeout-ms", &header_timeout));
  PDSERVE_RETURN_IF_ERROR(millis("x-pdserve-ttft-slo-ms", &header_slo));
  if (header_timeout) timeout = std::min(timeout, *header_timeout);  // it may only shorten it
  if (header_slo) slo = *header_slo;
  const std::string priority(request["x-pdserve-priority"]);
  if (priority == "batch") {
    admission->priority = router::Priority::kBatch;
  } else if (!priority.empty() && priority != "interactive") {
    return InvalidArgument("x-pdserve-priority is 'interactive' or 'batch', not '" + priority +
                           "'");
  }
  admission->deadline = now + timeout;
  admission->ttft_slo = slo;
  return Status::Ok();
}

void HttpSession::WatchForClose() {
  watching_ = true;
  const uint64_t generation = ++watch_generation_;
  stream_.socket().async_wait(
      asio::socket_base::wait_read, [self = shared_from_this(), generation](beast::error_code ec) {
        if (!self->watching_ || generation != self->watch_generation_) return;
        self->watching_ = false;
        if (ec == asio::error::operation_aborted) return;
        // The reactor may wake a wait for readiness that an earlier read already consumed: peek
        // without blocking to learn what is really there.
        char byte;
        const ssize_t n =
            ::recv(self->stream_.socket().native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
        if (!ec && n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
          return self->WatchForClose();  // nothing yet: keep watching
        }
        if (!ec && n > 0) return;  // a pipelined request, which the parser reads next
        // End of file or an error: the client is gone.
        spdlog::debug("client closed its connection during a request; cancelling it");
        if (self->call_) self->call_->Cancel();
        self->call_.reset();
        beast::error_code ignored;
        self->stream_.socket().close(ignored);
      });
}

void HttpSession::ForgetWatch() {
  watching_ = false;
  ++watch_generation_;
}

void HttpSession::StopWatchingForClose() {
  if (!watching_) return;
  watching_ = false;
  ++watch_generation_;
  beast::error_code ignored;
  stream_.socket().cancel(ignored);  // no write is pending yet: only the wait is cancelled
}

void HttpSession::Respond(unsigned status, std::string body, const std::string& content_type,
                          const HttpHeaders& headers, int retry_after_s) {
  auto response = std::make_shared<http::response<http::string_body>>(
      static_cast<http::status>(status), version_);
  response->set(http::field::server, "pdserve");
  response->set(http::field::content_type, content_type);
  for (const auto& [name, value] : headers) response->set(name, value);
  if (retry_after_s > 0) response->set(http::field::retry_after, std::to_string(retry_after_s));
  response->keep_alive(keep_alive_);
  response->body() = std::move(body);
  response->prepare_payload();
  stream_.expires_after(kWriteTimeout);
  http::async_write(stream_, *response,
                    [self = shared_from_this(), response](beast::error_code ec, size_t) {
                      if (ec) return;
                      self->AfterResponse();
                    });
}

void HttpSession::RespondError(const ApiError& error, int retry_after_s) {
  if (retry_after_s <= 0 && error.http_status == 503) retry_after_s = 1;
  Respond(error.http_status, DumpJson(error.ToJson()), "application/json", {}, retry_after_s);
}

void HttpSession::AfterResponse() {
  ForgetWatch();
  call_.reset();
  streaming_ = false;
  if (!keep_alive_) {
    beast::error_code ignored;
    stream_.socket().shutdown(asio::ip::tcp::socket::shutdown_send, ignored);
    return;
  }
  Read();
}

void HttpSession::BeginStream() {
  streaming_ = true;
  auto header = std::make_shared<http::response<http::empty_body>>(http::status::ok, version_);
  header->set(http::field::server, "pdserve");
  header->set(http::field::content_type, "text/event-stream");
  header->set(http::field::cache_control, "no-cache");
  header->keep_alive(keep_alive_);
  header->chunked(true);
  auto serializer = std::make_shared<http::response_serializer<http::empty_body>>(*header);
  writing_ = true;
  stream_.expires_after(kWriteTimeout);
  http::async_write_header(
      stream_, *serializer,
      [self = shared_from_this(), header, serializer](beast::error_code ec, size_t) {
        self->writing_ = false;
        if (ec) {
          if (self->call_) self->call_->Cancel();
          return;
        }
        self->WriteNextChunk();
      });
}

void HttpSession::QueueChunk(std::string data, bool last) {
  if (data.empty() && !last) return;
  queued_bytes_ += data.size();
  if (queued_bytes_ > kMaxQueuedStreamBytes) {  // the client is not reading: cut it off
    if (call_) call_->Cancel();
    call_.reset();
    beast::error_code ignored;
    stream_.socket().close(ignored);
    return;
  }
  chunks_.emplace_back(std::move(data), last);
  if (!writing_) WriteNextChunk();
}

void HttpSession::WriteNextChunk() {
  if (chunks_.empty() || writing_) return;
  writing_ = true;
  // Every chunk queued so far goes in one write as one HTTP chunk, the last with the
  // terminating zero-length chunk: one system call, however many tokens came meanwhile.
  auto payload = std::make_shared<std::string>();
  bool last = false;
  while (!chunks_.empty() && !last) {
    *payload += chunks_.front().first;
    last = chunks_.front().second;
    chunks_.pop_front();
  }
  auto done = [self = shared_from_this(), payload, last](beast::error_code ec, size_t) {
    self->writing_ = false;
    self->queued_bytes_ -= payload->size();
    if (ec) {  // the client went away: stop its request on the worker
      if (self->call_) self->call_->Cancel();
      self->call_.reset();
      return;
    }
    if (last) {
      self->chunks_.clear();
      return self->AfterResponse();
    }
    self->WriteNextChunk();
  };
  stream_.expires_after(kWriteTimeout);
  // QueueChunk keeps no empty chunk but the last, whose zero size would end the body early.
  const auto chunk = http::make_chunk(asio::buffer(*payload));
  if (!last) return asio::async_write(stream_, chunk, done);
  if (payload->empty()) return asio::async_write(stream_, http::make_chunk_last(), done);
  asio::async_write(stream_, beast::buffers_cat(chunk, http::make_chunk_last()), done);
}

}  // namespace pdserve::gateway
