#include "kv_transfer/chunk_checksum.h"

#include <boost/asio/post.hpp>
#include <cassert>
#include <utility>

#include "kv_transfer/crc32c.h"

namespace pdserve::kv_transfer {

std::shared_ptr<ChunkChecksum> ChunkChecksum::Start(boost::asio::thread_pool* pool) {
  return std::make_shared<ChunkChecksum>(StartKey{}, pool);
}

void ChunkChecksum::Add(const unsigned char* data, size_t n) {
  if (n == 0) return;
  if (pool_ == nullptr) {
    folded_ = Crc32c(data, n, folded_);
    return;
  }
  if (open_bytes_ == 0) open_ = data;
  assert(data == open_ + open_bytes_ && "ChunkChecksum: reads must be contiguous");
  open_bytes_ += n;
  if (open_bytes_ >= kChecksumSpan) {
    Post(open_, open_bytes_);
    open_bytes_ = 0;
  }
}

void ChunkChecksum::Post(const unsigned char* data, size_t n) {
  size_t index;
  {
    std::lock_guard lock(mu_);
    index = spans_.size();
    spans_.push_back({n, 0});
    ++pending_;
  }
  boost::asio::post(*pool_, [self = shared_from_this(), data, n, index] {
    const uint32_t crc = Crc32c(data, n);
    Done done;
    {
      std::lock_guard lock(self->mu_);
      self->spans_[index].crc = crc;
      if (--self->pending_ == 0) done = std::move(self->done_);  // empty until Finish
    }
    if (done) done(self->Joined(), false);
  });
}

void ChunkChecksum::Finish(Done done) {
  if (pool_ == nullptr) return done(folded_, true);
  // The last bytes are checked here, where they are in cache, so that a chunk whose earlier
  // spans are through is acked without a hop to the pool and back.
  const uint32_t tail_crc = open_bytes_ > 0 ? Crc32c(open_, open_bytes_) : 0;
  bool now;
  {
    std::lock_guard lock(mu_);
    if (open_bytes_ > 0) spans_.push_back({open_bytes_, tail_crc});
    now = pending_ == 0;
    if (!now) done_ = std::move(done);
  }
  open_bytes_ = 0;
  if (now) done(Joined(), true);
}

uint32_t ChunkChecksum::Joined() const {
  std::lock_guard lock(mu_);
  uint32_t crc = 0;
  for (const Span& s : spans_) crc = Crc32cCombine(crc, s.crc, s.bytes);
  return crc;
}

}  // namespace pdserve::kv_transfer
