// UnansweredPort: a loopback port whose SYNs go unanswered, as a host that drops them (a firewall,
// a machine gone): a listener that never accepts, its accept queue filled until the kernel
// drops new SYNs. For tests of dial timeouts; a test skips where the kernel answers instead.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <vector>

namespace pdserve::testing {

class UnansweredPort {
 public:
  UnansweredPort() {
    listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    if (listener_ < 0 || ::bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof address) ||
        ::listen(listener_, 0) ||
        ::getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length)) {
      return;
    }
    address_ = address;
    for (int i = 0; i < 8 && !unanswered_; ++i) unanswered_ = FillOne();
  }
  ~UnansweredPort() {
    for (int fd : fillers_) ::close(fd);
    if (listener_ >= 0) ::close(listener_);
  }
  UnansweredPort(const UnansweredPort&) = delete;
  UnansweredPort& operator=(const UnansweredPort&) = delete;

  // False where the kernel answered every SYN (the test should skip).
  bool unanswered() const { return unanswered_; }
  uint16_t port() const { return ntohs(address_.sin_port); }

 private:
  // One more connection, never accepted; true once its SYN goes unanswered.
  bool FillOne() {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (fd < 0) return false;
    fillers_.push_back(fd);
    (void)::connect(fd, reinterpret_cast<sockaddr*>(&address_), sizeof address_);
    pollfd p{fd, POLLOUT, 0};
    return ::poll(&p, 1, 200) == 0;  // still in SYN_SENT
  }

  int listener_ = -1;
  sockaddr_in address_{};
  std::vector<int> fillers_;
  bool unanswered_ = false;
};

}  // namespace pdserve::testing
