// The HTTP client against a scripted server on a loopback port: whole and streamed bodies, a
// kept-alive connection reused, and each way an answer can fail (timeout, refused, cut short,
// not HTTP, too long).
#include "common/http_client.h"

#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace pdserve {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using namespace std::chrono_literals;

// Accepts `connections` connections on a loopback port, one after the other, and runs `serve`
// on each in its own thread.
class ScriptedServer {
 public:
  ScriptedServer(int connections, std::function<void(tcp::socket&)> serve)
      : acceptor_(io_, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)) {
    port_ = acceptor_.local_endpoint().port();
    thread_ = std::thread([this, connections, serve = std::move(serve)] {
      for (int i = 0; i < connections; ++i) {
        tcp::socket socket(io_);
        boost::system::error_code ec;
        acceptor_.accept(socket, ec);
        if (ec) return;
        ++accepted_;
        serve(socket);
      }
    });
  }
  ~ScriptedServer() { thread_.join(); }

  std::string port() const { return std::to_string(port_); }
  int accepted() const { return accepted_; }

 private:
  asio::io_context io_;
  tcp::acceptor acceptor_;
  uint16_t port_ = 0;
  std::atomic<int> accepted_{0};
  std::thread thread_;
};

// Reads one request's head and its Content-Length body; "" when the client closed.
std::string ReadRequest(tcp::socket& socket, asio::streambuf& in) {
  boost::system::error_code ec;
  const size_t head_size = asio::read_until(socket, in, "\r\n\r\n", ec);
  if (ec) return "";
  std::string head(asio::buffers_begin(in.data()), asio::buffers_begin(in.data()) + head_size);
  in.consume(head_size);
  const size_t at = head.find("Content-Length: ");
  if (at != std::string::npos) {
    const size_t length = std::stoul(head.substr(at + 16));
    if (in.size() < length) asio::read(socket, in, asio::transfer_exactly(length - in.size()), ec);
    in.consume(length);
  }
  return head;
}

HttpEndpoint Loopback(const std::string& port) {
  HttpEndpoint endpoint;
  endpoint.host = "127.0.0.1";
  endpoint.port = port;
  return endpoint;
}

void Send(tcp::socket& socket, const std::string& bytes) {
  boost::system::error_code ec;
  asio::write(socket, asio::buffer(bytes), ec);
}

TEST(HttpGet, ReadsTheStatusAndWholeBody) {
  std::string request;
  {
    ScriptedServer server(2, [&](tcp::socket& s) {
      asio::streambuf in;
      const std::string head = ReadRequest(s, in);
      if (head.find("/ready") != std::string::npos) {
        request = head;
        Send(s, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello");
      } else {
        Send(s, "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 4\r\n\r\nbusy");
      }
    });
    auto ok = HttpGet("127.0.0.1", server.port(), "/ready", 2s);
    ASSERT_TRUE(ok.ok()) << ok.status().ToString();
    EXPECT_EQ(ok->status, 200);
    EXPECT_EQ(ok->body, "hello");
    EXPECT_NE(request.find("GET /ready HTTP/1.1\r\n"), std::string::npos) << request;
    EXPECT_NE(request.find("Host: 127.0.0.1:" + server.port() + "\r\n"), std::string::npos);
    auto busy = HttpGet("127.0.0.1", server.port(), "/metrics", 2s);
    ASSERT_TRUE(busy.ok());  // an answer, if not a 200
    EXPECT_EQ(busy->status, 503);
    EXPECT_EQ(busy->body, "busy");
  }
}

TEST(HttpGet, ASilentServerTimesOutAndAClosedPortIsUnavailable) {
  {
    ScriptedServer server(1, [](tcp::socket& s) {
      asio::streambuf in;
      ReadRequest(s, in);
      std::this_thread::sleep_for(1s);  // answers nothing in time
    });
    const auto start = std::chrono::steady_clock::now();
    auto silent = HttpGet("127.0.0.1", server.port(), "/ready", 200ms);
    EXPECT_EQ(silent.status().code(), StatusCode::kDeadlineExceeded) << silent.status().ToString();
    EXPECT_LT(std::chrono::steady_clock::now() - start, 900ms);
  }
  std::string closed_port;
  {
    asio::io_context io;
    tcp::acceptor gone(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    closed_port = std::to_string(gone.local_endpoint().port());
  }
  auto refused = HttpGet("127.0.0.1", closed_port, "/ready", 2s);
  EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable) << refused.status().ToString();
}

TEST(HttpGet, RefusesABodyPastItsBound) {
  ScriptedServer server(1, [](tcp::socket& s) {
    asio::streambuf in;
    ReadRequest(s, in);
    Send(s, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n" + std::string(100, 'x'));
  });
  auto r = HttpGet("127.0.0.1", server.port(), "/metrics", 2s, /*max_body=*/10);
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted) << r.status().ToString();
}

// Runs one exchange on `connection` to its end; the pieces of the body and how it ended.
struct Outcome {
  HttpHead head;
  std::vector<std::string> pieces;
  std::optional<HttpEnd> end;
};

Outcome RunExchange(asio::io_context& io, HttpConnection& connection, HttpRequest request,
                    std::function<bool(const std::string&)> keep_reading = nullptr) {
  Outcome out;
  HttpHandlers handlers;
  handlers.on_head = [&](const HttpHead& head) { out.head = head; };
  handlers.on_body = [&](std::string_view bytes) {
    out.pieces.emplace_back(bytes);
    return !keep_reading || keep_reading(out.pieces.back());
  };
  handlers.on_end = [&](const HttpEnd& end) { out.end = end; };
  HttpTimeouts timeouts;
  timeouts.connect = timeouts.idle = 2s;
  connection.Exchange(std::move(request), timeouts, std::move(handlers));
  io.restart();
  io.run();
  return out;
}

std::string Joined(const std::vector<std::string>& pieces) {
  std::string all;
  for (const std::string& p : pieces) all += p;
  return all;
}

TEST(HttpConnection, StreamsAChunkedBodyAndReusesAKeptAliveConnection) {
  std::vector<std::string> requests;
  ScriptedServer server(1, [&](tcp::socket& s) {
    asio::streambuf in;
    for (int i = 0; i < 2; ++i) {
      requests.push_back(ReadRequest(s, in));
      Send(s,
           "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nRetry-After: 3\r\n"
           "Transfer-Encoding: chunked\r\n\r\n");
      std::this_thread::sleep_for(20ms);  // the first event is read before the second is sent
      Send(s, "9\r\ndata: a\n\n\r\n");
      std::this_thread::sleep_for(20ms);
      Send(s, "9\r\ndata: b\n\n\r\n0\r\n\r\n");
    }
  });
  asio::io_context io;
  HttpConnection connection(io.get_executor(), Loopback(server.port()));
  for (int i = 0; i < 2; ++i) {
    HttpRequest request;
    request.target = "/v1/completions";
    request.fields = {{"Content-Type", "application/json"}};
    request.body = R"({"stream":true})";
    Outcome out = RunExchange(io, connection, std::move(request));
    ASSERT_TRUE(out.end && out.end->ok()) << (out.end ? out.end->code.message() : "no end");
    EXPECT_TRUE(out.end->keep_alive);
    EXPECT_EQ(out.head.status, 200);
    EXPECT_EQ(out.head.content_type, "text/event-stream");
    EXPECT_EQ(out.head.retry_after, "3");
    EXPECT_EQ(Joined(out.pieces), "data: a\n\ndata: b\n\n");
    EXPECT_GE(out.pieces.size(), 2u) << "each event as it arrives";
    EXPECT_TRUE(connection.is_open());
  }
  EXPECT_EQ(server.accepted(), 1);
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_NE(requests[1].find("POST /v1/completions HTTP/1.1\r\n"), std::string::npos);
  EXPECT_NE(requests[1].find("Content-Length: 15\r\n"), std::string::npos) << requests[1];
}

TEST(HttpConnection, SaysWhereAndHowAnAnswerFailed) {
  ScriptedServer server(3, [](tcp::socket& s) {
    asio::streambuf in;
    const std::string head = ReadRequest(s, in);
    if (head.find("/garbage") != std::string::npos) {
      Send(s, "this is not HTTP\r\n\r\n");
    } else if (head.find("/cut") != std::string::npos) {
      Send(s, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc");
    } else {
      Send(s, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabcdefghij");
    }
  });
  asio::io_context io;
  auto run = [&](const std::string& target, std::function<bool(const std::string&)> keep = {}) {
    HttpConnection connection(io.get_executor(), Loopback(server.port()));
    HttpRequest request;
    request.method = "GET";
    request.target = target;
    return RunExchange(io, connection, std::move(request), std::move(keep));
  };
  Outcome garbage = run("/garbage");
  ASSERT_TRUE(garbage.end);
  EXPECT_EQ(garbage.end->error, HttpEnd::Error::kMalformed);
  EXPECT_EQ(garbage.end->step, HttpStep::kReadHeader);
  Outcome cut = run("/cut");
  ASSERT_TRUE(cut.end);
  EXPECT_EQ(cut.end->error, HttpEnd::Error::kClosedMidReply);
  EXPECT_EQ(cut.end->step, HttpStep::kReadBody);
  EXPECT_EQ(Joined(cut.pieces), "abc");
  // The reader stops at the first piece: no end is reported after it.
  Outcome stopped = run("/whole", [](const std::string&) { return false; });
  EXPECT_FALSE(stopped.end);
  EXPECT_EQ(stopped.pieces.size(), 1u);
}

}  // namespace
}  // namespace pdserve
