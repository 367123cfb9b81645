// pdserve's one HTTP/1.1 client (Boost.Beast): a connection to one host, plain or TLS, that sends
// a request and hands its response on as it arrives, the header first, then the body in the
// pieces it is read in (a streamed answer's events are seen as soon as their bytes come). For
// the gateway's calls to external upstreams (gateway/external_call), the load generator
// (bench/serve/http_client) and small local GETs (HttpGet, below).
//
// A connection dials on its first exchange (resolving its host then, unless resolved
// addresses are given), with TLS for `tls`: the server name sent, and with `verify_peer` the
// certificate checked against the context's CAs and the host's name. After an exchange whose
// response allowed it (`HttpEnd::keep_alive`), the next exchange reuses the connection. Every
// step has a timeout: resolving, connecting, the TLS handshake, the write and each read must
// each finish within its step's limit and before the exchange's deadline. Nothing a server sends
// can crash it: bad HTTP ends the exchange with an error.
//
// Threads: a connection belongs to its executor (an io_context run by one thread, or a strand);
// call it and destroy it there. Its handlers run there. One exchange at a time.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/system/error_code.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace pdserve {

// A host's addresses, resolved once for many connections (ResolveHttpHost).
struct HttpAddresses;

// Resolves `host`:`port` now (blocking). Unavailable when it cannot.
Result<std::shared_ptr<const HttpAddresses>> ResolveHttpHost(const std::string& host,
                                                             const std::string& port);

// A TLS client context: TLS 1.2 at least, peer verification on, the system's CA paths or
// `ca_file` (PEM). InvalidArgument when the CAs cannot be loaded.
Result<std::shared_ptr<boost::asio::ssl::context>> MakeTlsClientContext(
    const std::string& ca_file = "");

struct HttpEndpoint {
  std::string host;         // a name or an address (IPv6 without brackets)
  std::string port = "80";  // a number
  bool tls = false;         // https; then tls_context is required
  bool verify_peer = true;  // tls: check the certificate chain and that it names `host`
  std::shared_ptr<boost::asio::ssl::context> tls_context;
  // Where to dial; null: resolve `host` at each dial.
  std::shared_ptr<const HttpAddresses> addresses;
};

struct HttpRequest {
  std::string method = "POST";
  std::string target;  // the path, e.g. "/v1/completions"
  // Fields besides Host (from the endpoint), Content-Length and Connection.
  std::vector<std::pair<std::string, std::string>> fields;
  std::string body;
  bool keep_alive = true;  // false: ask the server to close after the response
};

struct HttpTimeouts {
  using Clock = std::chrono::steady_clock;
  Clock::duration connect = std::chrono::seconds(10);     // resolving, connecting, TLS handshake
  Clock::duration idle = std::chrono::seconds(60);        // each write and read once connected
  Clock::time_point deadline = Clock::time_point::max();  // the whole exchange
};

// What the response's header says that callers use.
struct HttpHead {
  int status = 0;
  std::string content_type;
  std::string retry_after;  // the Retry-After field as sent ("" when absent)
};

// The step an exchange failed in.
enum class HttpStep { kResolve, kConnect, kTlsHandshake, kWrite, kReadHeader, kReadBody };

// How an exchange ended: complete, or the step it failed in and why.
struct HttpEnd {
  enum class Error {
    kNone,
    kTimeout,         // a step's limit or the deadline passed
    kClosed,          // the server closed (or reset) the connection before a response began
    kClosedMidReply,  // the server closed the connection inside the response
    kMalformed,       // the response is not HTTP/1.1 as Beast parses it
    kOther,           // anything else (refused connection, TLS verification, ...)
  };
  Error error = Error::kNone;
  HttpStep step = HttpStep::kReadBody;
  boost::system::error_code code;  // the underlying error, for its message
  bool keep_alive = false;         // complete, and the connection may carry another exchange
  bool ok() const { return error == Error::kNone; }
};

struct HttpHandlers {
  std::function<void(const HttpHead& head)> on_head;
  // A piece of the body as read. Returning false ends the exchange here: no handler is called
  // after it, and the connection should be closed.
  std::function<bool(std::string_view bytes)> on_body;
  std::function<void(const HttpEnd& end)> on_end;  // once, unless on_body stopped or Close
};

class HttpConnection {
 public:
  HttpConnection(boost::asio::any_io_executor executor, HttpEndpoint endpoint);
  ~HttpConnection();  // closes it (on its executor)
  HttpConnection(const HttpConnection&) = delete;
  HttpConnection& operator=(const HttpConnection&) = delete;

  // Sends `request` and reads its response, dialing first when not connected. Handlers run on
  // the connection's executor, never inside this call.
  void Exchange(HttpRequest request, HttpTimeouts timeouts, HttpHandlers handlers);
  // Closes the connection; the exchange in progress, if any, calls no handler after it.
  void Close();
  // Connected and not closed (a server may still have closed its end).
  bool is_open() const;

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

// A whole response read by HttpGet.
struct HttpResponse {
  int status = 0;
  std::string body;
};

// GET `target` from http://`host`:`port` on a private io_context (blocking), the whole
// exchange within `timeout`; a body past `max_body` bytes is an error. Unavailable when the
// server cannot be reached or its answer is cut short or malformed, DeadlineExceeded past the
// timeout. For small local requests (a gateway's /ready and /metrics); any thread.
Result<HttpResponse> HttpGet(const std::string& host, const std::string& port,
                             const std::string& target, std::chrono::milliseconds timeout,
                             size_t max_body = 16 << 20);

}  // namespace pdserve
