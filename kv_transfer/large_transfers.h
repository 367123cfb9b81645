// A completion condition for Asio's composed socket operations (async_read, async_write) on the
// KV side channel. By default they hand the kernel at most 64 KiB per system call, and each
// call is a round through the reactor; KV chunks are megabytes, and those rounds cost loopback
// much of its bandwidth (docs/benchmarks.md, TCP transport and listener). With LargeTransfers
// each call may move up to 16 MiB. For the TCP transport and listener only.
#pragma once

#include <cstddef>

#include <boost/system/error_code.hpp>

namespace pdserve::kv_transfer {

struct LargeTransfers {
  // Asio calls this after each system call: 0 ends the operation (an error), otherwise the
  // most bytes the next call may move. The operation also ends when its buffers are full.
  size_t operator()(const boost::system::error_code& ec, size_t /*transferred*/) const {
    return ec ? 0 : size_t{16} << 20;
  }
};

}  // namespace pdserve::kv_transfer
