// The CRC32C of one KV chunk's payload, taken while the payload is still being read. The reading
// thread reports each read as it lands (Add); with a thread pool, spans of kChecksumSpan bytes
// are checked there, in parallel with the next reads, and joined in order (Crc32cCombine), so
// the reading core mostly copies out of the socket (it checks the last span itself, in Finish,
// and with it any payload shorter than a span); without one, each read is folded in at once,
// while it is in cache. Finish hands over the last bytes and a callback that gets the whole
// payload's CRC once every span is checked: inline, when the pool is already through, or on the
// pool thread that checks the last span.
// Called by TcpKvListener's sessions: Add and Finish from the thread reading the chunk, in order,
// Finish once; the bytes must stay in place until the callback has run.
#pragma once

#include <boost/asio/thread_pool.hpp>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

namespace pdserve::kv_transfer {

// The pool checks spans of at least this many bytes (a chunk's last span may be shorter); each
// is one task, sized against the cost of handing it over (docs/benchmarks.md, Checksums).
inline constexpr size_t kChecksumSpan = 256 << 10;

class ChunkChecksum : public std::enable_shared_from_this<ChunkChecksum> {
 public:
  // `crc`: the payload's CRC32C. `inline_call`: true when it runs inside Finish, on the reading
  // thread; false on a pool thread.
  using Done = std::function<void(uint32_t crc, bool inline_call)>;

  // `pool`: where spans are checked; nullptr checks every read inline.
  static std::shared_ptr<ChunkChecksum> Start(boost::asio::thread_pool* pool);

  // `n` bytes at `data` have landed, right after the bytes of the previous Add.
  void Add(const unsigned char* data, size_t n);
  // No more bytes; `done` runs once, as described above.
  void Finish(Done done);

  // For Start only (pool tasks hold the object through shared_from_this).
  struct StartKey {
   private:
    StartKey() = default;
    friend class ChunkChecksum;
  };
  ChunkChecksum(StartKey, boost::asio::thread_pool* pool) : pool_(pool) {}

 private:
  struct Span {
    uint64_t bytes = 0;
    uint32_t crc = 0;
  };
  void Post(const unsigned char* data, size_t n);
  // Joins the spans in order; requires that all are checked.
  uint32_t Joined() const;

  boost::asio::thread_pool* const pool_;
  // Reading thread only.
  const unsigned char* open_ = nullptr;  // the span being gathered (pool mode)
  size_t open_bytes_ = 0;
  uint32_t folded_ = 0;  // inline mode: the CRC so far
  // Guarded by mu_ once spans are posted.
  mutable std::mutex mu_;
  std::vector<Span> spans_;
  int pending_ = 0;  // spans posted and not yet checked
  Done done_;        // set by Finish
};

}  // namespace pdserve::kv_transfer
