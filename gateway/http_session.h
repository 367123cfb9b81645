// HttpSession: one client connection to the gateway. Reads requests with a fresh Beast parser
// per message (body limit, 60 s read timeout), routes them, and writes responses; SSE streams
// go out as HTTP/1.1 chunks with a bounded write queue (a client that stops reading is cut off
// and its request cancelled). A stream's header goes out only once the request leaves the
// admission queue, so that a request refused there gets a plain 429 or 503. While a request
// waits or runs (streaming or not), the session waits for the socket to turn readable: end of
// file there (the client closed, or half-closed, its side) takes the request out of the queue
// or cancels it on its workers. A client that pipelines its next request is not watched
// further. Tenants over their quota get 429 with Retry-After. Keep-alive. Every async step holds
// shared_from_this() and runs on the connection's strand.
#pragma once

#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <deque>
#include <memory>
#include <optional>

#include "gateway/completion_call.h"
#include "gateway/gateway_server.h"

namespace pdserve::gateway {

class HttpSession : public std::enable_shared_from_this<HttpSession> {
 public:
  HttpSession(boost::asio::ip::tcp::socket socket,
              std::shared_ptr<const GatewayServer::Shared> shared);
  void Run();

 private:
  using Request = boost::beast::http::request<boost::beast::http::string_body>;

  void Read();
  void Handle(Request request);
  void HandleCompletion(const Request& request, Endpoint endpoint);
  // Submits call_ (after the fault delay, when one is set) and watches its client.
  void StartCall();
  // How the request waits: the tenant's weight and SLO, and the x-pdserve-priority,
  // x-pdserve-ttft-slo-ms and x-pdserve-queue-timeout-ms headers (InvalidArgument for a bad one).
  Status ReadAdmission(const Request& request, CallAdmission* admission) const;
  // retry_after_s > 0: a Retry-After header with that many seconds.
  void Respond(unsigned status, std::string body,
               const std::string& content_type = "application/json",
               const HttpHeaders& headers = {}, int retry_after_s = 0);
  void RespondError(const ApiError& error, int retry_after_s = 0);
  void WatchForClose();
  // Cancels the pending wait: only while no write is pending (it cancels the socket's
  // operations).
  void StopWatchingForClose();
  // Leaves the pending wait to complete unheeded (while a stream's writes may be pending).
  void ForgetWatch();
  void BeginStream();
  void QueueChunk(std::string data, bool last);
  void WriteNextChunk();
  void AfterResponse();

  boost::beast::tcp_stream stream_;
  boost::beast::flat_buffer buffer_;
  std::optional<boost::beast::http::request_parser<boost::beast::http::string_body>> parser_;
  std::shared_ptr<const GatewayServer::Shared> shared_;
  bool keep_alive_ = true;
  unsigned version_ = 11;
  std::string tenant_;  // of the current request's API key; empty without authentication
  std::chrono::steady_clock::time_point received_;  // when the current request's last byte came

  std::shared_ptr<CompletionCall> call_;
  bool streaming_ = false;
  std::deque<std::pair<std::string, bool>> chunks_;  // (data, is last)
  size_t queued_bytes_ = 0;
  bool writing_ = false;
  bool watching_ = false;          // a wait for the client closing is pending
  uint64_t watch_generation_ = 0;  // tells a cancelled wait's late completion from the current
};

}  // namespace pdserve::gateway
