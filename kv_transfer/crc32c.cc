// The three-way interleaved hardware CRC follows Mark Adler's crc32c.c (zlib licence): the data
// is cut into three blocks that are CRC'd in parallel, then combined by shifting the first two
// CRCs over the length of the blocks after them with precomputed "zeros" operators.
#include "kv_transfer/crc32c.h"

#include <nmmintrin.h>

#include <array>
#include <cstring>

namespace pdserve::kv_transfer {
namespace {

constexpr uint32_t kPoly = 0x82f63b78;  // reflected Castagnoli polynomial
constexpr size_t kLong = 8192;
constexpr size_t kShort = 256;

using ZerosTable = std::array<std::array<uint32_t, 256>, 4>;

uint32_t Gf2MatrixTimes(const uint32_t* mat, uint32_t vec) {
  uint32_t sum = 0;
  while (vec) {
    if (vec & 1) sum ^= *mat;
    vec >>= 1;
    ++mat;
  }
  return sum;
}

void Gf2MatrixSquare(uint32_t* square, const uint32_t* mat) {
  for (int n = 0; n < 32; ++n) square[n] = Gf2MatrixTimes(mat, mat[n]);
}

// The operator that appends `len` zero bytes (len a power of two) to a CRC.
void ZerosOperator(uint32_t* even, size_t len) {
  uint32_t odd[32];
  uint32_t row = 1;
  odd[0] = kPoly;
  for (int n = 1; n < 32; ++n) {
    odd[n] = row;
    row <<= 1;
  }
  Gf2MatrixSquare(even, odd);  // two zero bits
  Gf2MatrixSquare(odd, even);  // four zero bits
  do {
    Gf2MatrixSquare(even, odd);
    len >>= 1;
    if (len == 0) return;
    Gf2MatrixSquare(odd, even);
    len >>= 1;
  } while (len);
  std::memcpy(even, odd, sizeof odd);
}

ZerosTable MakeZerosTable(size_t len) {
  uint32_t op[32];
  ZerosOperator(op, len);
  ZerosTable t{};
  for (uint32_t n = 0; n < 256; ++n) {
    t[0][n] = Gf2MatrixTimes(op, n);
    t[1][n] = Gf2MatrixTimes(op, n << 8);
    t[2][n] = Gf2MatrixTimes(op, n << 16);
    t[3][n] = Gf2MatrixTimes(op, n << 24);
  }
  return t;
}

const ZerosTable kLongZeros = MakeZerosTable(kLong);
const ZerosTable kShortZeros = MakeZerosTable(kShort);

inline uint32_t Shift(const ZerosTable& z, uint32_t crc) {
  return z[0][crc & 0xff] ^ z[1][(crc >> 8) & 0xff] ^ z[2][(crc >> 16) & 0xff] ^ z[3][crc >> 24];
}

inline uint64_t Load64(const unsigned char* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Three streams of `block` bytes each, while at least 3*block bytes remain.
inline const unsigned char* Interleaved(const unsigned char* next, size_t& len, uint64_t& crc0,
                                        size_t block, const ZerosTable& zeros) {
  while (len >= block * 3) {
    uint64_t crc1 = 0, crc2 = 0;
    const unsigned char* end = next + block;
    do {
      crc0 = _mm_crc32_u64(crc0, Load64(next));
      crc1 = _mm_crc32_u64(crc1, Load64(next + block));
      crc2 = _mm_crc32_u64(crc2, Load64(next + 2 * block));
      next += 8;
    } while (next < end);
    crc0 = Shift(zeros, static_cast<uint32_t>(crc0)) ^ crc1;
    crc0 = Shift(zeros, static_cast<uint32_t>(crc0)) ^ crc2;
    next += 2 * block;
    len -= 3 * block;
  }
  return next;
}

}  // namespace

uint32_t Crc32c(const void* data, size_t len, uint32_t crc) {
  const auto* next = static_cast<const unsigned char*>(data);
  uint64_t crc0 = crc ^ 0xffffffffu;
  while (len && (reinterpret_cast<uintptr_t>(next) & 7) != 0) {
    crc0 = _mm_crc32_u8(static_cast<uint32_t>(crc0), *next++);
    --len;
  }
  next = Interleaved(next, len, crc0, kLong, kLongZeros);
  next = Interleaved(next, len, crc0, kShort, kShortZeros);
  while (len >= 8) {
    crc0 = _mm_crc32_u64(crc0, Load64(next));
    next += 8;
    len -= 8;
  }
  while (len) {
    crc0 = _mm_crc32_u8(static_cast<uint32_t>(crc0), *next++);
    --len;
  }
  return static_cast<uint32_t>(crc0) ^ 0xffffffffu;
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
