#include "worker/metrics_http_server.h"

#include "common/accept_backoff.h"

#include <prometheus/text_serializer.h>

#include <utility>  // before Asio: Boost 1.74's awaitable.hpp needs std::exchange

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <thread>

namespace pdserve::worker {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using asio::ip::tcp;

namespace {

// One scrape: read the request (5 s at most), answer, close.
class Scrape : public std::enable_shared_from_this<Scrape> {
 public:
  Scrape(tcp::socket socket, std::shared_ptr<prometheus::Registry> registry)
      : stream_(std::move(socket)), registry_(std::move(registry)) {}

  void Run() {
    stream_.expires_after(std::chrono::seconds(5));
    http::async_read(stream_, buffer_, request_,
                     [self = shared_from_this()](beast::error_code ec, size_t) {
                       if (!ec) self->Respond();
                     });
  }

 private:
  void Respond() {
    response_.version(request_.version());
    response_.keep_alive(false);
    response_.set(http::field::server, "pdserve");
    if (request_.method() == http::verb::get && request_.target() == "/metrics") {
      response_.result(http::status::ok);
      response_.set(http::field::content_type, "text/plain; version=0.0.4");
      response_.body() = prometheus::TextSerializer().Serialize(registry_->Collect());
    } else {
      response_.result(http::status::not_found);
      response_.set(http::field::content_type, "text/plain");
      response_.body() = "only GET /metrics is served here\n";
    }
    response_.prepare_payload();
    http::async_write(stream_, response_, [self = shared_from_this()](beast::error_code, size_t) {
      beast::error_code ignored;
      self->stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    });
  }

  beast::tcp_stream stream_;
  std::shared_ptr<prometheus::Registry> registry_;
  beast::flat_buffer buffer_;
  http::request<http::empty_body> request_;
  http::response<http::string_body> response_;
};

}  // namespace

class MetricsHttpServer::Impl {
 public:
  explicit Impl(std::shared_ptr<prometheus::Registry> registry)
      : registry_(std::move(registry)),
        acceptor_(io_),
        accept_backoff_(io_.get_executor(), "the metrics listener") {}

  Status Listen(const std::string& bind_address, int port) {
    boost::system::error_code ec;
    auto address = asio::ip::make_address(bind_address, ec);
    if (ec) return InvalidArgument("bad metrics address '" + bind_address + "'");
    tcp::endpoint endpoint(address, static_cast<uint16_t>(port));
    acceptor_.open(endpoint.protocol(), ec);
    if (!ec) acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
    if (!ec) acceptor_.bind(endpoint, ec);
    if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) {
      return Unavailable("cannot serve metrics on " + bind_address + ":" + std::to_string(port) +
                         ": " + ec.message());
    }
    port_ = acceptor_.local_endpoint().port();
    Accept();
    thread_ = std::thread([this] { io_.run(); });
    return Status::Ok();
  }

  ~Impl() {
    io_.stop();
    if (thread_.joinable()) thread_.join();
  }

  uint16_t port() const { return port_; }

 private:
  void Accept() {
    acceptor_.async_accept([this](boost::system::error_code ec, tcp::socket socket) {
      if (ec == asio::error::operation_aborted || !acceptor_.is_open()) return;
      if (!ec) std::make_shared<Scrape>(std::move(socket), registry_)->Run();
      accept_backoff_.Next(ec, [this] { Accept(); });
    });
  }

  std::shared_ptr<prometheus::Registry> registry_;
  asio::io_context io_;
  tcp::acceptor acceptor_;
  AcceptBackoff accept_backoff_;  // io_'s thread
  uint16_t port_ = 0;
  std::thread thread_;
};

Result<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(
    const std::string& bind_address, int port, std::shared_ptr<prometheus::Registry> registry) {
  if (port < 0 || port > 65535) return InvalidArgument("metrics port out of range");
  auto impl = std::make_unique<Impl>(std::move(registry));
  PDSERVE_RETURN_IF_ERROR(impl->Listen(bind_address, port));
  return std::unique_ptr<MetricsHttpServer>(new MetricsHttpServer(std::move(impl)));
}

MetricsHttpServer::MetricsHttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
MetricsHttpServer::~MetricsHttpServer() = default;
uint16_t MetricsHttpServer::port() const { return impl_->port(); }

}  // namespace pdserve::worker
