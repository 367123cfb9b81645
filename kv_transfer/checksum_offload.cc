#include "kv_transfer/checksum_offload.h"

#include <sched.h>

#include <algorithm>
#include <latch>
#include <thread>
#include <vector>

#include <boost/asio/post.hpp>

#include "kv_transfer/crc32c.h"

namespace pdserve::kv_transfer {

int AllowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) {
    return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  }
  return CPU_COUNT(&set);
}

ParallelCrc32c::ParallelCrc32c(int threads)
    : threads_(std::max(1, threads)), pool_(static_cast<size_t>(threads_)) {}

ParallelCrc32c::~ParallelCrc32c() { pool_.join(); }

uint32_t ParallelCrc32c::operator()(const void* data, size_t n) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  // As many equal spans as there are threads, the caller's included, each at least kMinSpan
  // and a whole number of cache lines but the last.
  const size_t spans = std::min<size_t>(threads_ + 1, n / kMinSpan);
  if (spans < 2) return Crc32cFromMemory(bytes, n);
  const size_t span = (n / spans + 63) & ~size_t{63};
  std::vector<uint32_t> crcs(spans);
  std::latch pool_done(static_cast<std::ptrdiff_t>(spans - 1));
  auto length_of = [&](size_t i) { return i + 1 < spans ? span : n - span * (spans - 1); };
  for (size_t i = 1; i < spans; ++i) {
    boost::asio::post(pool_, [&, i] {
      crcs[i] = Crc32cFromMemory(bytes + i * span, length_of(i));
      pool_done.count_down();
    });
  }
  crcs[0] = Crc32cFromMemory(bytes, span);
  pool_done.wait();
  uint32_t crc = crcs[0];
  for (size_t i = 1; i < spans; ++i) crc = Crc32cCombine(crc, crcs[i], length_of(i));
  return crc;
}

}  // namespace pdserve::kv_transfer
