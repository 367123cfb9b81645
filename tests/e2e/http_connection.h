// For the end-to-end tests: a blocking HTTP/1.1 client on one loopback connection, for what
// curl hides (closing mid-request, response headers, pipelining, keep-alive). Every read has a
// deadline; one thread per connection.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace pdserve::testing {

// One HTTP/1.1 response as HttpConnection read it: header names lower-cased, the body de-chunked.
struct HttpResponse {
  int status = 0;
  std::map<std::string, std::string> headers;
  std::string body;
  bool keep_alive = true;
};

// The bytes of one HTTP/1.1 request with a JSON body (none when `body` is empty).
inline std::string HttpRequestText(const std::string& method, const std::string& path,
                                   const std::string& body = "",
                                   const std::vector<std::string>& headers = {}) {
  std::string text = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n";
  for (const auto& h : headers) text += h + "\r\n";
  if (!body.empty()) {
    text +=
        "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  }
  return text + "\r\n" + body;
}

// A blocking HTTP/1.1 client on one loopback connection, for what curl hides: closing the socket
// mid-request, response headers, pipelining, many keep-alive streams from threads. Every read has
// a deadline. One thread per connection.
class HttpConnection {
 public:
  explicit HttpConnection(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd_ >= 0 && ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) Close();
    if (fd_ >= 0) {
      int one = 1;
      ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
  }
  ~HttpConnection() { Close(); }
  HttpConnection(const HttpConnection&) = delete;
  HttpConnection& operator=(const HttpConnection&) = delete;

  bool connected() const { return fd_ >= 0; }
  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  bool Send(const std::string& bytes) {
    size_t sent = 0;
    while (fd_ >= 0 && sent < bytes.size()) {
      const ssize_t n = ::send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      sent += static_cast<size_t>(n);
    }
    return fd_ >= 0;
  }

  // Reads one whole response by `deadline`. False (with `error` saying why, and what arrived in
  // *out) on end of file, timeout or malformed HTTP before the response ended.
  bool ReadResponse(HttpResponse* out, std::chrono::steady_clock::time_point deadline,
                    std::string* error) {
    *out = HttpResponse();
    size_t header_end;
    while ((header_end = buffer_.find("\r\n\r\n")) == std::string::npos) {
      if (!Fill(deadline, error)) return false;
    }
    std::string head = buffer_.substr(0, header_end);
    buffer_.erase(0, header_end + 4);
    if (head.rfind("HTTP/1.", 0) != 0 || head.size() < 12) return Bad("status line", error);
    out->status = std::atoi(head.c_str() + 9);
    out->keep_alive = head.compare(0, 8, "HTTP/1.1") == 0;
    size_t pos = head.find("\r\n");
    while (pos != std::string::npos && pos < head.size()) {
      const size_t next = head.find("\r\n", pos + 2);
      const std::string line =
          head.substr(pos + 2, next == std::string::npos ? next : next - pos - 2);
      pos = next;
      const size_t colon = line.find(':');
      if (colon == std::string::npos) continue;
      std::string name = line.substr(0, colon);
      std::transform(name.begin(), name.end(), name.begin(), ::tolower);
      std::string value = line.substr(colon + 1);
      value.erase(0, value.find_first_not_of(' '));
      out->headers[name] = value;
    }
    if (out->headers["connection"] == "close") out->keep_alive = false;
    if (out->headers["transfer-encoding"] == "chunked") {
      while (true) {
        size_t line_end;
        while ((line_end = buffer_.find("\r\n")) == std::string::npos) {
          if (!Fill(deadline, error)) return false;
        }
        const size_t size = std::strtoul(buffer_.c_str(), nullptr, 16);
        if (size == 0) {  // the last chunk; no trailers are expected
          while (buffer_.size() < line_end + 4) {
            if (!Fill(deadline, error)) return false;
          }
          buffer_.erase(0, line_end + 4);
          return true;
        }
        while (buffer_.size() < line_end + 2 + size + 2) {
          if (!Fill(deadline, error)) return false;
        }
        out->body.append(buffer_, line_end + 2, size);
        buffer_.erase(0, line_end + 2 + size + 2);
      }
    }
    if (out->headers.count("content-length")) {
      const size_t length = std::strtoul(out->headers["content-length"].c_str(), nullptr, 10);
      while (buffer_.size() < length) {
        if (!Fill(deadline, error)) return false;
      }
      out->body = buffer_.substr(0, length);
      buffer_.erase(0, length);
      return true;
    }
    while (Fill(deadline, error)) {  // neither: the body ends with the connection
    }
    out->body = std::move(buffer_);
    buffer_.clear();
    out->keep_alive = false;
    return *error == "end of file";
  }

 private:
  static bool Bad(const std::string& what, std::string* error) {
    *error = "malformed response: " + what;
    return false;
  }
  // Appends what the socket has by `deadline` to buffer_.
  bool Fill(std::chrono::steady_clock::time_point deadline, std::string* error) {
    if (fd_ < 0) return (*error = "not connected", false);
    while (true) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return (*error = "timed out", false);
      pollfd p{fd_, POLLIN, 0};
      const int ready = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
      if (ready < 0 && errno != EINTR) return (*error = "poll failed", false);
      if (ready <= 0) continue;
      char buf[16384];
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n == 0) return (*error = "end of file", false);
      if (n < 0) return (*error = std::string("recv: ") + std::strerror(errno), false);
      buffer_.append(buf, static_cast<size_t>(n));
      return true;
    }
  }

  int fd_ = -1;
  std::string buffer_;
};

}  // namespace pdserve::testing
