#include "kv_transfer/crc32c.h"

#include <immintrin.h>
#include <isa-l/crc.h>

#include <algorithm>
#include <climits>

namespace pdserve::kv_transfer {
namespace {
constexpr uint32_t kPoly = 0x82f63b78;  // reflected Castagnoli polynomial

// Crc32cFromMemory: blocks of kBlock bytes, each checksummed kPiece bytes at a time; between
// pieces, the next block's share of prefetches, its lines taken from kPrefetchStreams equal
// parts in turn. Two streams gave 12.2-13.4 GB/s, eight 12.9-13.3, blocks of 512 KiB 12.5-13.1.
constexpr size_t kBlock = kCrc32cFromMemoryBlock;
constexpr size_t kPiece = 16 << 10;
constexpr size_t kPrefetchStreams = 4;

// Steps in the stream order of a block of `lines` lines: step i is line i / kPrefetchStreams of
// part i % kPrefetchStreams, or none past the block's end (its last part may be shorter).
size_t StreamSteps(size_t lines) {
  return (lines + kPrefetchStreams - 1) / kPrefetchStreams * kPrefetchStreams;
}

// Prefetches steps [first, first + count) of `block` (`lines` lines long) in stream order.
void PrefetchInStreams(const char* block, size_t lines, size_t first, size_t count) {
  const size_t part = (lines + kPrefetchStreams - 1) / kPrefetchStreams;
  for (size_t i = first; i < first + count; ++i) {
    const size_t line = i % kPrefetchStreams * part + i / kPrefetchStreams;
    if (line < lines) _mm_prefetch(block + line * 64, _MM_HINT_T0);
  }
}
}  // namespace

uint32_t Crc32c(const void* data, size_t n, uint32_t crc) {
  // ISA-L's iSCSI CRC takes and returns the register without the final inversion, and an int
  // length, so long buffers go in pieces.
  auto* p = static_cast<unsigned char*>(const_cast<void*>(data));
  uint32_t reg = ~crc;
  do {
    const size_t piece = std::min<size_t>(n, size_t{1} << 30);
    reg = crc32_iscsi(p, static_cast<int>(piece), reg);
    p += piece;
    n -= piece;
  } while (n > 0);
  return ~reg;
}

uint32_t Crc32cFromMemory(const void* data, size_t n, uint32_t crc) {
  const auto* p = static_cast<const char*>(data);
  if (n <= kBlock) return Crc32c(p, n, crc);
  const auto lines_of = [](size_t bytes) { return (bytes + 63) / 64; };
  PrefetchInStreams(p, lines_of(kBlock), 0, StreamSteps(lines_of(kBlock)));
  for (size_t block = 0; block < n; block += kBlock) {
    const size_t end = std::min(n, block + kBlock);
    const size_t next_lines = end < n ? lines_of(std::min(n, end + kBlock) - end) : 0;
    const size_t steps = StreamSteps(next_lines);
    const size_t pieces = (end - block + kPiece - 1) / kPiece;
    const size_t per_piece = (steps + pieces - 1) / pieces;
    for (size_t at = block, sent = 0; at < end; at += kPiece) {
      const size_t count = std::min(per_piece, steps - sent);
      PrefetchInStreams(p + end, next_lines, sent, count);
      sent += count;
      crc = Crc32c(p + at, std::min(kPiece, end - at), crc);
    }
  }
  return crc;
}

uint32_t Crc32cReference(const void* data, size_t n, uint32_t crc) {
  const auto* p = static_cast<const unsigned char*>(data);
  crc = ~crc;
  for (size_t i = 0; i < n; ++i) {
    crc ^= p[i];
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (kPoly & (0u - (crc & 1)));
  }
  return ~crc;
}

}  // namespace pdserve::kv_transfer
