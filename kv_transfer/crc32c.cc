#include "kv_transfer/crc32c.h"

#include <immintrin.h>
#include <isa-l/crc.h>

#include <algorithm>
#include <array>
#include <climits>

namespace pdserve::kv_transfer {
namespace {
constexpr uint32_t kPoly = 0x82f63b78;  // reflected Castagnoli polynomial

// Crc32cFromMemory: blocks of kBlock bytes, each checksummed kPiece bytes at a time; between
// pieces, the next block's share of prefetches, its lines taken from kPrefetchStreams equal
// parts in turn. The sizes follow the measurements in docs/benchmarks.md (Checksums).
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

// Polynomials over GF(2) modulo the CRC polynomial, held as the CRC holds them: reflected, bit 31
// is x^0. Returns a * b mod P.
uint32_t MultiplyModPoly(uint32_t a, uint32_t b) {
  uint32_t product = 0;
  for (uint32_t term = 1u << 31; term != 0; term >>= 1) {
    if (a & term) product ^= b;
    b = (b >> 1) ^ (kPoly & (0u - (b & 1)));  // b *= x
  }
  return product;
}

// x^(8 * 2^k) mod P for k = 0..63: what appending 2^k zero bytes multiplies a CRC by.
const std::array<uint32_t, 64>& ZeroBytePowers() {
  static const std::array<uint32_t, 64> powers = [] {
    std::array<uint32_t, 64> p{};
    p[0] = 1u << 23;  // x^8
    for (size_t k = 1; k < p.size(); ++k) p[k] = MultiplyModPoly(p[k - 1], p[k - 1]);
    return p;
  }();
  return powers;
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

uint32_t Crc32cCombine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b) {
  // The pre- and post-inversions of a's and b's CRCs cancel out, leaving the CRC of a shifted
  // by len_b zero bytes, plus b's: crc(a . b) = crc(a) * x^(8 len_b) + crc(b) (mod P).
  const auto& powers = ZeroBytePowers();
  for (size_t k = 0; len_b != 0; ++k, len_b >>= 1) {
    if (len_b & 1) crc_a = MultiplyModPoly(crc_a, powers[k]);
  }
  return crc_a ^ crc_b;
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
