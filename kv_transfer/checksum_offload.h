// Checking CRCs on more than one CPU. ParallelCrc32c is the sending side's: a TCP chunk's
// CRC32C must be known before its header goes out, and one thread reading a cold chunk from
// memory is a large share of a sender's CPU (docs/benchmarks.md, Checksums); the chunk is cut
// into spans checked at once on a small pool and the calling thread, and joined with
// Crc32cCombine. (The receiving side's is ChunkChecksum, which follows the socket reads instead.)
// AllowedCpus says whether there is a second CPU to use. For the TCP transport and listener.
#pragma once

#include <cstddef>
#include <cstdint>

#include <boost/asio/thread_pool.hpp>

namespace pdserve::kv_transfer {

// CPUs this process may run on (its affinity; a cgroup's CPU quota is not counted), or all the
// host's where the affinity mask does not fit a cpu_set_t.
int AllowedCpus();

class ParallelCrc32c {
 public:
  // Buffers shorter than two spans are checked on the calling thread alone.
  static constexpr size_t kMinSpan = 256 << 10;

  // `threads` pool threads (at least 1) beside the caller.
  explicit ParallelCrc32c(int threads);
  ~ParallelCrc32c();  // joins the pool; no call may be in progress
  ParallelCrc32c(const ParallelCrc32c&) = delete;
  ParallelCrc32c& operator=(const ParallelCrc32c&) = delete;

  // Crc32c(data, n): the same value. Returns only when every span is done, so the buffer may
  // change or go away as soon as it returns. Thread-safe; concurrent calls share the pool.
  uint32_t operator()(const void* data, size_t n);

  int threads() const { return threads_; }

 private:
  const int threads_;
  boost::asio::thread_pool pool_;
};

}  // namespace pdserve::kv_transfer
