#include "kv_transfer/payload_splicer.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include <fmt/format.h>

namespace pdserve::kv_transfer {
namespace {
constexpr int kWantedPipeBytes = 1 << 20;

// splice(2) into a socket whose peer has gone raises SIGPIPE, as write(2) does (there is no
// MSG_NOSIGNAL for it), and SIGPIPE's default is to end the process. So the calling thread
// blocks it for the call and takes back a SIGPIPE that the call raised: a lost peer is an
// error to return, never the end of the worker.
class SigpipeShield {
 public:
  SigpipeShield() {
    sigset_t pipe_only;
    sigemptyset(&pipe_only);
    sigaddset(&pipe_only, SIGPIPE);
    sigset_t pending;
    sigpending(&pending);
    already_pending_ = sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &pipe_only, &old_mask_);
  }
  ~SigpipeShield() {
    if (!already_pending_) {
      sigset_t pending;
      sigpending(&pending);
      if (sigismember(&pending, SIGPIPE) == 1) {
        sigset_t pipe_only;
        sigemptyset(&pipe_only);
        sigaddset(&pipe_only, SIGPIPE);
        const timespec now{0, 0};
        while (sigtimedwait(&pipe_only, nullptr, &now) < 0 && errno == EINTR) {
        }
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
  }
  SigpipeShield(const SigpipeShield&) = delete;
  SigpipeShield& operator=(const SigpipeShield&) = delete;

 private:
  sigset_t old_mask_;
  bool already_pending_ = false;
};
}  // namespace

Result<PayloadSplicer> PayloadSplicer::Make() {
  int fds[2];
  if (::pipe2(fds, O_NONBLOCK | O_CLOEXEC) != 0) {
    return Unavailable(fmt::format("KV splice pipe: {}", std::strerror(errno)));
  }
  // Ask for 1 MiB, then less: an unprivileged process may be held to pipe-max-size.
  for (int want = kWantedPipeBytes; want > 65536; want /= 2) {
    if (::fcntl(fds[1], F_SETPIPE_SZ, want) >= 0) break;
  }
  const int size = ::fcntl(fds[1], F_GETPIPE_SZ);
  return PayloadSplicer(fds[0], fds[1], static_cast<size_t>(std::max(size, 4096)));
}

PayloadSplicer::PayloadSplicer(int read_fd, int write_fd, size_t pipe_bytes)
    : read_fd_(read_fd), write_fd_(write_fd), pipe_bytes_(pipe_bytes) {}

PayloadSplicer::PayloadSplicer(PayloadSplicer&& other) noexcept
    : read_fd_(std::exchange(other.read_fd_, -1)),
      write_fd_(std::exchange(other.write_fd_, -1)),
      pipe_bytes_(other.pipe_bytes_),
      in_pipe_(std::exchange(other.in_pipe_, 0)) {}

PayloadSplicer& PayloadSplicer::operator=(PayloadSplicer&& other) noexcept {
  if (this != &other) {
    Close();
    read_fd_ = std::exchange(other.read_fd_, -1);
    write_fd_ = std::exchange(other.write_fd_, -1);
    pipe_bytes_ = other.pipe_bytes_;
    in_pipe_ = std::exchange(other.in_pipe_, 0);
  }
  return *this;
}

PayloadSplicer::~PayloadSplicer() { Close(); }

void PayloadSplicer::Close() {
  if (read_fd_ >= 0) ::close(read_fd_);
  if (write_fd_ >= 0) ::close(write_fd_);
  read_fd_ = write_fd_ = -1;
}

Result<size_t> PayloadSplicer::Send(int fd, const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  size_t in_socket = 0;
  const SigpipeShield shield;
  while (in_socket < n) {
    // The pipe is refilled only once the socket has taken all of it, so the bytes in it are
    // always the first in_pipe_ of what the caller passed.
    if (in_pipe_ == 0) {
      iovec iov{const_cast<unsigned char*>(p + in_socket), std::min(n - in_socket, pipe_bytes_)};
      const ssize_t k = ::vmsplice(write_fd_, &iov, 1, SPLICE_F_NONBLOCK);
      if (k < 0) {
        if (errno == EINTR) continue;
        if (in_socket > 0) break;  // report the progress; the next call reports the error
        // EFAULT, EINVAL, ENOMEM: memory the kernel will not lend (device or I/O mappings).
        return FailedPrecondition(
            fmt::format("KV payload cannot be spliced: vmsplice: {}", std::strerror(errno)));
      }
      in_pipe_ = static_cast<size_t>(k);
    }
    const ssize_t s =
        ::splice(read_fd_, nullptr, fd, nullptr, in_pipe_, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
    if (s < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK || in_socket > 0) break;  // full, or see above
      return Unavailable(fmt::format("KV peer: write: {}", std::strerror(errno)));
    }
    if (s == 0) break;
    in_pipe_ -= static_cast<size_t>(s);
    in_socket += static_cast<size_t>(s);
  }
  return in_socket;
}

}  // namespace pdserve::kv_transfer
