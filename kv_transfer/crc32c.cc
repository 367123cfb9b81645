#include "kv_transfer/crc32c.h"

#include <isa-l/crc.h>

#include <algorithm>
#include <climits>

namespace pdserve::kv_transfer {
namespace {
constexpr uint32_t kPoly = 0x82f63b78;  // reflected Castagnoli polynomial
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
