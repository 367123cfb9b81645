#include "bench/kv/bench_kv_sockets.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "kv_transfer/tcp_congestion.h"

namespace pdserve::bench {
namespace {

constexpr int kSocketTimeoutSeconds = 120;

}  // namespace

Status ConfigureSocket(int fd, const std::string& congestion) {
  timeval tv{kSocketTimeoutSeconds, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return kv_transfer::SetCongestionControl(fd, congestion);
}

FdCloser::~FdCloser() { ::close(fd); }

Status SendAll(int fd, const void* data, size_t n) {
  const auto* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL);
    if (k <= 0) return Unavailable(fmt::format("bench kv: send: {}", std::strerror(errno)));
    p += k, n -= k;
  }
  return Status::Ok();
}

Status RecvAll(int fd, void* data, size_t n) {
  auto* p = static_cast<char*>(data);
  while (n > 0) {
    ssize_t k = ::recv(fd, p, n, 0);
    if (k == 0) return Unavailable("bench kv: the peer closed the connection");
    if (k < 0) return Unavailable(fmt::format("bench kv: recv: {}", std::strerror(errno)));
    p += k, n -= k;
  }
  return Status::Ok();
}

Status SendJson(int fd, const nlohmann::json& j) {
  const std::string s = j.dump();
  const uint32_t len = htonl(static_cast<uint32_t>(s.size()));
  PDSERVE_RETURN_IF_ERROR(SendAll(fd, &len, 4));
  return SendAll(fd, s.data(), s.size());
}

Result<nlohmann::json> RecvJson(int fd) {
  uint32_t len = 0;
  PDSERVE_RETURN_IF_ERROR(RecvAll(fd, &len, 4));
  len = ntohl(len);
  if (len > (16u << 20)) return InvalidArgument("bench kv: control message too long");
  std::string s(len, '\0');
  PDSERVE_RETURN_IF_ERROR(RecvAll(fd, s.data(), len));
  nlohmann::json j = nlohmann::json::parse(s, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return InvalidArgument("bench kv: bad control message");
  return j;
}

Result<int> ListenOn(int port, bool any_host, uint16_t* bound) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(any_host ? INADDR_ANY : INADDR_LOOPBACK);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd, 4) != 0) {
    ::close(fd);
    return Unavailable(
        fmt::format("bench kv: cannot listen on {}: {}", port, std::strerror(errno)));
  }
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  *bound = ntohs(a.sin_port);
  return fd;
}

Result<int> Dial(const std::string& host, uint16_t port, const std::string& congestion) {
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res) != 0 || !res) {
    return Unavailable("bench kv: cannot resolve " + host);
  }
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (Status s = ConfigureSocket(fd, congestion); !s.ok()) {
    freeaddrinfo(res);
    ::close(fd);
    return s;
  }
  const int rc = ::connect(fd, res->ai_addr, res->ai_addrlen);
  freeaddrinfo(res);
  if (rc != 0) {
    ::close(fd);
    return Unavailable(
        fmt::format("bench kv: cannot connect to {}:{}: {}", host, port, std::strerror(errno)));
  }
  return fd;
}

}  // namespace pdserve::bench
