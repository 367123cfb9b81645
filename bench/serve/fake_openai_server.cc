// The fake server's only translation unit (Beast is heavy to compile).
#include "bench/serve/fake_openai_server.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_set>

#include <fmt/format.h>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

namespace pdserve::bench {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using error_code = boost::system::error_code;
using nlohmann::json;

struct FakeOpenAiServer::State {
  explicit State(FakeServerOptions o)
      : options(std::move(o)), tls(net::ssl::context::tls_server), acceptor(io) {}
  FakeServerOptions options;
  net::ssl::context tls;  // used only when options carry a certificate
  net::io_context io;
  tcp::acceptor acceptor;
  std::vector<std::thread> threads;
  std::atomic<int64_t> requests{0};
  uint16_t port = 0;
  std::mutex mu;
  std::condition_variable stopped_cv;
  bool stopped = false;  // guarded by mu
  std::mutex cache_mu;
  std::unordered_set<uint64_t> cached_blocks;  // guarded by cache_mu: keys of 16-word blocks
};

namespace {

using State = FakeOpenAiServer::State;

bool IsSpace(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

// Appends the words of `text` to `words`.
void SplitWords(std::string_view text, std::vector<std::string_view>& words) {
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && IsSpace(text[i])) ++i;
    size_t start = i;
    while (i < text.size() && !IsSpace(text[i])) ++i;
    if (i > start) words.push_back(text.substr(start, i - start));
  }
}

constexpr size_t kFakeBlockWords = 16;

// Block keys of the whole 16-word blocks among words[0, count), each chained on its parent's
// (FNV-1a over the parent key and the words).
std::vector<uint64_t> BlockKeys(const std::vector<std::string_view>& words, size_t count) {
  std::vector<uint64_t> keys;
  uint64_t key = 14695981039346656037ULL;
  for (size_t block = 0; (block + 1) * kFakeBlockWords <= count; ++block) {
    for (size_t w = block * kFakeBlockWords; w < (block + 1) * kFakeBlockWords; ++w) {
      for (char c : words[w]) key = (key ^ static_cast<unsigned char>(c)) * 1099511628211ULL;
      key = (key ^ 0x20) * 1099511628211ULL;
    }
    keys.push_back(key);
  }
  return keys;
}

// The prompt's cached words (leading blocks held, never the last word), then its blocks and
// those of its answer but the answer's last word are held.
int64_t LookUpAndCache(State& state, std::vector<std::string_view> words, int64_t answer_words) {
  const size_t prompt_words = words.size();
  for (int64_t i = 0; i + 1 < answer_words; ++i) words.push_back("hello");
  std::vector<uint64_t> keys = BlockKeys(words, words.size());
  std::lock_guard lock(state.cache_mu);
  size_t hits = 0;
  while (hits < keys.size() && (hits + 1) * kFakeBlockWords <= prompt_words - 1 &&
         state.cached_blocks.count(keys[hits]) > 0) {
    ++hits;
  }
  state.cached_blocks.insert(keys.begin(), keys.end());
  return static_cast<int64_t>(hits * kFakeBlockWords);
}

std::chrono::steady_clock::duration Delay(double seconds) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(seconds));
}

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, State* state)
      : stream_(std::move(socket), state->tls),
        timer_(stream_.get_executor()),
        state_(state),
        tls_(!state->options.tls_cert_pem.empty()) {}

  void Start() {
    if (!tls_) return Read();
    stream_.async_handshake(net::ssl::stream_base::server,
                            [self = shared_from_this()](error_code ec) {
                              if (ec) return self->Close();
                              self->Read();
                            });
  }

 private:
  tcp::socket& socket() { return stream_.next_layer(); }

  // Calls f with the connection's byte stream: TLS or the plain socket.
  template <typename F>
  void WithStream(F&& f) {
    if (tls_) {
      f(stream_);
    } else {
      f(socket());
    }
  }

  void Read() {
    parser_.emplace();
    parser_->body_limit(1 << 20);
    WithStream([this](auto& stream) {
      http::async_read(stream, buffer_, *parser_,
                       [self = shared_from_this()](error_code ec, size_t) { self->OnRequest(ec); });
    });
  }

  void OnRequest(error_code ec) {
    if (ec) return Close();
    received_ = std::chrono::steady_clock::now();
    int64_t n = state_->requests.fetch_add(1);
    const auto& faults = state_->options.faults;
    fault_ = faults.empty() ? FakeFault::kNone : faults[static_cast<size_t>(n) % faults.size()];
    id_ = n;
    const auto& request = parser_->get();
    keep_alive_ = request.keep_alive();
    chat_ = request.target().find("chat") != beast::string_view::npos;
    json body = json::parse(request.body(), nullptr, /*allow_exceptions=*/false);
    if (body.is_discarded() || !body.is_object()) {
      return SendError(http::status::bad_request, "the request body is not a JSON object");
    }
    tokens_ = state_->options.default_tokens;
    for (const char* key : {"max_tokens", "max_completion_tokens"}) {
      if (auto it = body.find(key); it != body.end() && it->is_number_integer()) {
        tokens_ = std::max<int64_t>(1, it->get<int64_t>());
      }
    }
    std::vector<std::string_view> words;
    if (auto it = body.find("prompt"); it != body.end() && it->is_string()) {
      SplitWords(it->get_ref<const std::string&>(), words);
    }
    if (auto it = body.find("messages"); it != body.end() && it->is_array()) {
      for (const json& m : *it) {
        if (m.is_object() && m.contains("content") && m["content"].is_string()) {
          SplitWords(m["content"].get_ref<const std::string&>(), words);
        }
      }
    }
    prompt_tokens_ = static_cast<int64_t>(words.size());
    cached_tokens_ = -1;
    if (state_->options.prefix_cache && !words.empty()) {
      cached_tokens_ = LookUpAndCache(*state_, std::move(words), tokens_);
    }
    ReadRichFields(body);
    bool stream = body.value("stream", false);
    include_usage_ = false;
    if (auto it = body.find("stream_options"); it != body.end() && it->is_object()) {
      include_usage_ = it->value("include_usage", false);
    }
    if (fault_ == FakeFault::kHang) return Read();  // never answers; ends when the client closes
    if (fault_ == FakeFault::kHttp500) {
      return SendError(http::status::internal_server_error, "injected failure");
    }
    if (fault_ == FakeFault::kHttp429) {
      return SendError(http::status::too_many_requests, "at capacity", /*retry_after_s=*/7);
    }
    if (!stream) return SendWhole(/*sse=*/false);
    if (fault_ == FakeFault::kNone && state_->options.ttft_s <= 0 && state_->options.itl_s <= 0) {
      return SendWhole(/*sse=*/true);
    }
    StartStream();
  }

  // n, logprobs and tools: answered with n choices, each token's logprob (-0.5), and a call of
  // the first tool with arguments "{}" (unless tool_choice is "none").
  void ReadRichFields(const json& body) {
    choices_ = 1;
    if (auto it = body.find("n"); it != body.end() && it->is_number_integer()) {
      choices_ = std::clamp<int64_t>(it->get<int64_t>(), 1, 128);
    }
    logprobs_ = false;
    if (auto it = body.find("logprobs"); it != body.end()) {
      logprobs_ = (it->is_boolean() && it->get<bool>()) || it->is_number_integer();
    }
    tool_.clear();
    auto tools = body.find("tools");
    const bool none = body.value("tool_choice", json("auto")) == json("none");
    if (tools != body.end() && tools->is_array() && !tools->empty() && !none) {
      const json& f = (*tools)[0].value("function", json::object());
      if (f.is_object() && f.contains("name") && f["name"].is_string()) tool_ = f["name"];
    }
  }

  bool Rich() const { return choices_ > 1 || logprobs_ || !tool_.empty(); }

  // Token i's logprobs entry (or the whole answer's, i < 0).
  json Logprobs(int64_t i) const {
    const int64_t from = i < 0 ? 0 : i, to = i < 0 ? tokens_ : i + 1;
    if (chat_) {
      json content = json::array();
      for (int64_t k = from; k < to; ++k) {
        content.push_back({{"token", " hello"},
                           {"logprob", -0.5},
                           {"bytes", {32, 104, 101, 108, 108, 111}},
                           {"top_logprobs", json::array()}});
      }
      return {{"content", content}, {"refusal", nullptr}};
    }
    json tokens = json::array(), values = json::array(), tops = json::array(),
         offsets = json::array();
    for (int64_t k = from; k < to; ++k) {
      tokens.push_back(" hello");
      values.push_back(-0.5);
      tops.push_back({{" hello", -0.5}});
      offsets.push_back(6 * k);
    }
    return {{"tokens", tokens},
            {"token_logprobs", values},
            {"top_logprobs", tops},
            {"text_offset", offsets}};
  }

  // The choices of token i's chunk, or of the whole answer (i < 0).
  json RichChoices(int64_t i) const {
    const bool last = i < 0 || i + 1 == tokens_;
    json out = json::array();
    for (int64_t c = 0; c < choices_; ++c) {
      json choice = {{"index", c}, {"logprobs", nullptr}, {"finish_reason", nullptr}};
      if (!tool_.empty() && chat_) {
        // The call's head first, its arguments in the second chunk (the first when it is the
        // only one).
        const std::string id = fmt::format("call_fake_{}", c);
        const std::string arguments = i < 0 || i == 1 || (i == 0 && tokens_ == 1) ? "{}" : "";
        json call = {{"index", 0}, {"function", {{"arguments", arguments}}}};
        if (i <= 0) {
          call["id"] = id;
          call["type"] = "function";
          call["function"]["name"] = tool_;
        }
        if (i < 0) call.erase("index");
        json message = {{"tool_calls", json::array({call})}};
        if (i <= 0) message["role"] = "assistant";
        if (i < 0) message["content"] = nullptr;
        choice[i < 0 ? "message" : "delta"] = message;
        if (last) choice["finish_reason"] = "tool_calls";
      } else {
        std::string text;
        for (int64_t k = i < 0 ? 0 : i; k < (i < 0 ? tokens_ : i + 1); ++k) text += " hello";
        if (chat_) {
          choice[i < 0 ? "message" : "delta"] = {{"role", "assistant"}, {"content", text}};
        } else {
          choice["text"] = text;
        }
        if (logprobs_) choice["logprobs"] = Logprobs(i);
        if (last) choice["finish_reason"] = "length";
      }
      out.push_back(std::move(choice));
    }
    return out;
  }

  std::string TokenChunk(int64_t i) const {
    if (Rich()) {
      return "data: " +
             json{{"id", fmt::format("{}-{}", chat_ ? "chatcmpl" : "cmpl", id_)},
                  {"object", chat_ ? "chat.completion.chunk" : "text_completion"},
                  {"created", 0},
                  {"model", "fake"},
                  {"choices", RichChoices(i)}}
                 .dump() +
             "\n\n";
    }
    const char* finish = i + 1 == tokens_ ? "\"length\"" : "null";
    if (chat_) {
      return fmt::format(
          "data: {{\"id\":\"chatcmpl-{}\",\"object\":\"chat.completion.chunk\",\"created\":0,"
          "\"model\":\"fake\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\" hello\"}},"
          "\"finish_reason\":{}}}]}}\n\n",
          id_, finish);
    }
    return fmt::format(
        "data: {{\"id\":\"cmpl-{}\",\"object\":\"text_completion\",\"created\":0,\"model\":"
        "\"fake\",\"choices\":[{{\"index\":0,\"text\":\" hello\",\"logprobs\":null,"
        "\"finish_reason\":{}}}]}}\n\n",
        id_, finish);
  }

  json Usage() const {
    json usage = {{"prompt_tokens", prompt_tokens_},
                  {"completion_tokens", choices_ * tokens_},
                  {"total_tokens", prompt_tokens_ + choices_ * tokens_}};
    if (cached_tokens_ >= 0) usage["prompt_tokens_details"] = {{"cached_tokens", cached_tokens_}};
    return usage;
  }

  std::string Tail() const {
    std::string tail;
    if (include_usage_) {
      tail = fmt::format(
          "data: {{\"id\":\"cmpl-{}\",\"object\":\"{}\",\"created\":0,\"model\":\"fake\","
          "\"choices\":[],\"usage\":{}}}\n\n",
          id_, chat_ ? "chat.completion.chunk" : "text_completion", Usage().dump());
    }
    return tail + "data: [DONE]\n\n";
  }

  void SendError(http::status status, std::string_view message, int retry_after_s = 0) {
    auto res = std::make_shared<http::response<http::string_body>>(status, 11);
    res->set(http::field::content_type, "application/json");
    if (retry_after_s > 0) res->set(http::field::retry_after, std::to_string(retry_after_s));
    res->keep_alive(keep_alive_);
    res->body() = json{{"error",
                        {{"message", message},
                         {"type", "server_error"},
                         {"param", nullptr},
                         {"code", static_cast<int>(status)}}}}
                      .dump();
    res->prepare_payload();
    Write(std::move(res));
  }

  void SendWhole(bool sse) {
    auto res = std::make_shared<http::response<http::string_body>>(http::status::ok, 11);
    res->keep_alive(keep_alive_);
    if (sse) {
      res->set(http::field::content_type, "text/event-stream");
      std::string& out = res->body();
      for (int64_t i = 0; i < tokens_; ++i) out += TokenChunk(i);
      out += Tail();
    } else {
      res->set(http::field::content_type, "application/json");
      std::string text;
      for (int64_t i = 0; i < tokens_; ++i) text += " hello";
      const json choices = Rich()
                               ? RichChoices(-1)
                               : json{{{"index", 0}, {"text", text}, {"finish_reason", "length"}}};
      res->body() = json{
          {"id", fmt::format("cmpl-{}", id_)},
          {"object", chat_ ? "chat.completion" : "text_completion"},
          {"choices", choices},
          {"usage",
           Usage()}}.dump();
    }
    res->prepare_payload();
    Write(std::move(res));
  }

  void Write(std::shared_ptr<http::response<http::string_body>> res) {
    WithStream([&](auto& stream) {
      http::async_write(stream, *res, [self = shared_from_this(), res](error_code ec, size_t) {
        if (ec || !res->keep_alive()) return self->Close();
        self->Read();
      });
    });
  }

  void StartStream() {
    head_ = {};
    head_.result(http::status::ok);
    head_.version(11);
    head_.set(http::field::content_type, "text/event-stream");
    head_.set(http::field::cache_control, "no-cache");
    head_.keep_alive(keep_alive_);
    head_.chunked(true);
    serializer_.emplace(head_);
    WithStream([this](auto& stream) {
      http::async_write_header(stream, *serializer_,
                               [self = shared_from_this()](error_code ec, size_t) {
                                 if (ec) return self->Close();
                                 self->SendAtSchedule(0);
                               });
    });
  }

  // Token i leaves at received + ttft + i * itl: deadlines are absolute, so a late timer under
  // load delays one token, not every token after it.
  void SendAtSchedule(int64_t token) {
    const FakeServerOptions& o = state_->options;
    timer_.expires_at(received_ + Delay(o.ttft_s + static_cast<double>(token) * o.itl_s));
    timer_.async_wait([self = shared_from_this(), token](error_code ec) {
      if (ec) return self->Close();
      self->SendToken(token);
    });
  }

  void SendToken(int64_t i) {
    if (fault_ == FakeFault::kCloseMidStream && i == 2) return Close();
    out_ = TokenChunk(i);
    if (fault_ == FakeFault::kBadJson && i == 1) out_ = "data: {\"choices\": [ not json\n\n";
    WithStream([this, i](auto& stream) {
      net::async_write(stream, http::make_chunk(net::buffer(out_)),
                       [self = shared_from_this(), i](error_code ec, size_t) {
                         if (ec) return self->Close();
                         if (i + 1 < self->tokens_) {
                           return self->SendAtSchedule(i + 1);
                         }
                         self->SendTail();
                       });
    });
  }

  // The usage chunk and [DONE], then the last (empty) HTTP chunk.
  void SendTail() {
    out_ = Tail();
    WithStream([this](auto& stream) {
      net::async_write(stream, http::make_chunk(net::buffer(out_)),
                       [self = shared_from_this(), &stream](error_code ec, size_t) {
                         if (ec) return self->Close();
                         net::async_write(stream, http::make_chunk_last(),
                                          [self](error_code ec, size_t) {
                                            if (ec || !self->keep_alive_) return self->Close();
                                            self->Read();
                                          });
                       });
    });
  }

  void Close() {
    error_code ignored;
    timer_.cancel();
    socket().shutdown(tcp::socket::shutdown_both, ignored);
    socket().close(ignored);
  }

  net::ssl::stream<tcp::socket> stream_;
  net::steady_timer timer_;
  std::chrono::steady_clock::time_point received_;
  State* state_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  http::response<http::empty_body> head_;
  std::optional<http::response_serializer<http::empty_body>> serializer_;
  std::string out_;
  FakeFault fault_ = FakeFault::kNone;
  int64_t id_ = 0;
  int64_t tokens_ = 0;
  int64_t prompt_tokens_ = 0;
  int64_t cached_tokens_ = -1;  // -1: not reported
  bool chat_ = false;
  bool include_usage_ = false;
  // What a richer answer holds (RichChoices): choices, logprobs asked (chat's boolean, or
  // completions' count), the first tool's name where a call is allowed.
  int64_t choices_ = 1;
  bool logprobs_ = false;
  std::string tool_;
  bool keep_alive_ = true;
  bool tls_ = false;
};

void Accept(State* state) {
  state->acceptor.async_accept(net::make_strand(state->io),
                               [state](error_code ec, tcp::socket socket) {
                                 if (ec == net::error::operation_aborted) return;
                                 if (!ec) {
                                   error_code ignored;
                                   socket.set_option(tcp::no_delay(true), ignored);
                                   std::make_shared<Session>(std::move(socket), state)->Start();
                                 }
                                 if (state->acceptor.is_open()) Accept(state);
                               });
}

}  // namespace

Result<std::unique_ptr<FakeOpenAiServer>> FakeOpenAiServer::Start(
    const FakeServerOptions& options) {
  if (options.threads < 1) return InvalidArgument("fake server needs at least one thread");
  auto state = std::make_shared<State>(options);
  error_code ec;
  if (!options.tls_cert_pem.empty()) {
    state->tls.use_certificate_chain(net::buffer(options.tls_cert_pem), ec);
    if (!ec) {
      state->tls.use_private_key(net::buffer(options.tls_key_pem), net::ssl::context::pem, ec);
    }
    if (ec) return InvalidArgument("fake server: bad TLS certificate or key: " + ec.message());
  }
  auto address = net::ip::make_address(options.address, ec);
  if (ec) return InvalidArgument(fmt::format("bad listen address '{}'", options.address));
  tcp::endpoint endpoint(address, options.port);
  state->acceptor.open(endpoint.protocol(), ec);
  if (!ec) state->acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) state->acceptor.bind(endpoint, ec);
  if (!ec) state->acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    return Unavailable(fmt::format("fake server cannot listen on {}:{}: {}", options.address,
                                   options.port, ec.message()));
  }
  state->port = state->acceptor.local_endpoint().port();
  Accept(state.get());
  for (int i = 0; i < options.threads; ++i) {
    state->threads.emplace_back([s = state.get()] { s->io.run(); });
  }
  return std::unique_ptr<FakeOpenAiServer>(new FakeOpenAiServer(std::move(state)));
}

FakeOpenAiServer::~FakeOpenAiServer() { Stop(); }

uint16_t FakeOpenAiServer::port() const { return state_->port; }

int64_t FakeOpenAiServer::requests_received() const { return state_->requests.load(); }

void FakeOpenAiServer::Stop() {
  {
    std::lock_guard lock(state_->mu);
    if (state_->stopped) return;
    state_->stopped = true;
  }
  net::post(state_->io, [s = state_.get()] {
    error_code ignored;
    s->acceptor.close(ignored);
  });
  state_->io.stop();
  for (auto& t : state_->threads) t.join();
  state_->threads.clear();
  state_->stopped_cv.notify_all();
}

void FakeOpenAiServer::Wait() {
  std::unique_lock lock(state_->mu);
  state_->stopped_cv.wait(lock, [&] { return state_->stopped; });
}

}  // namespace pdserve::bench
