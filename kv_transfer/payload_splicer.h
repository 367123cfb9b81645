// Moves payload bytes into a TCP socket by reference instead of by copy: vmsplice(2) hands the
// payload's pages to a pipe, splice(2) hands them on to the socket, and the socket sends from
// the pages themselves. On loopback the receiver's recv then copies straight out of the
// sender's memory, so a chunk costs one copy instead of two; through a NIC it is DMA'd from them.
// The price is that the bytes must not change until the peer has them: TcpTransport splices
// only KV pool pages, which stay put until the chunk is acked (and a chunk of a request that
// fails meanwhile is thrown away by the receiver, whose CRC check would catch a change).
// One splicer per connection, used by one thread at a time (TcpTransport's write_mu_).
#pragma once

#include <cstddef>

#include "common/status.h"

namespace pdserve::kv_transfer {

class PayloadSplicer {
 public:
  // A non-blocking pipe of up to 1 MiB (the host's pipe-max-size permitting); Unavailable when
  // the host gives none.
  static Result<PayloadSplicer> Make();
  PayloadSplicer(PayloadSplicer&& other) noexcept;
  PayloadSplicer& operator=(PayloadSplicer&& other) noexcept;
  ~PayloadSplicer();

  // Moves the n bytes at `data` towards the non-blocking socket `fd` and returns how many of
  // them the socket now holds; fewer than n means it is full (wait for it to be writable). The
  // rest may sit in the pipe: the next call must pass the bytes from data + returned on, and
  // the stream may take nothing else (no other write to fd) until the payload is all in.
  // Errors: Unavailable for a broken socket; FailedPrecondition when this memory cannot be
  // spliced (and nothing of it is in the pipe): send it by copy instead.
  Result<size_t> Send(int fd, const void* data, size_t n);

  size_t in_pipe() const { return in_pipe_; }  // bytes handed to the pipe, not yet to the socket
  size_t pipe_bytes() const { return pipe_bytes_; }

 private:
  PayloadSplicer(int read_fd, int write_fd, size_t pipe_bytes);
  void Close();

  int read_fd_ = -1;
  int write_fd_ = -1;
  size_t pipe_bytes_ = 0;
  size_t in_pipe_ = 0;
};

}  // namespace pdserve::kv_transfer
